/// An incremental parser for IMAP server responses: feed it bytes as they arrive, take events out with `next()`.
///
/// It never needs the whole stream: it keeps only the unread input and the response being assembled. A line longer
/// than `limits.maxLineLength`, a literal larger than `limits.maxLiteralSize` or a response larger than
/// `limits.maxResponseSize` is a typed error. A `BODY[…]` literal in a FETCH response of at least
/// `limits.streamBodyThreshold` bytes is not buffered: it comes out as `.bodyBegin`, `.bodyChunk`… and `.bodyEnd`
/// events, then the rest of the FETCH response as a `.response` whose item is `.streamedBody`.
///
/// After an error the parser is unusable (the stream position is unknown): drop the connection.
public struct IMAPResponseParser: Sendable {
    /// The bounds that keep memory use fixed whatever the server sends.
    public struct Limits: Sendable, Equatable {
        /// The longest response line, literals excluded (bytes).
        public var maxLineLength: Int
        /// The largest literal the parser accepts (bytes).
        public var maxLiteralSize: Int
        /// The largest buffered response (lines plus buffered literals, bytes).
        public var maxResponseSize: Int
        /// BODY literals of at least this many bytes are streamed in chunks instead of buffered.
        public var streamBodyThreshold: Int
        /// The largest `.bodyChunk`.
        public var chunkSize: Int
        /// The deepest list nesting.
        public var maxDepth: Int

        /// Creates limits; the defaults suit a mail client (64 KiB lines, 256 MiB literals, 1 MiB buffered bodies).
        public init(
            maxLineLength: Int = 64 * 1024,
            maxLiteralSize: Int = 256 * 1024 * 1024,
            maxResponseSize: Int = 4 * 1024 * 1024,
            streamBodyThreshold: Int = 1024 * 1024,
            chunkSize: Int = 64 * 1024,
            maxDepth: Int = 64
        ) {
            self.maxLineLength = maxLineLength
            self.maxLiteralSize = maxLiteralSize
            self.maxResponseSize = maxResponseSize
            self.streamBodyThreshold = streamBodyThreshold
            self.chunkSize = max(1, chunkSize)
            self.maxDepth = maxDepth
        }
    }

    private enum State: Sendable {
        case line
        case literal(remaining: Int)
        case streaming(remaining: Int)
        case streamEnded
        case failed(IMAPError)
    }

    /// The limits in force.
    public let limits: Limits
    private var input: [UInt8] = []
    private var readIndex = 0
    /// Where the CRLF search resumes in the current line (so a long line is not rescanned per feed).
    private var scanIndex = 0
    private var response: [UInt8] = []
    private var streamed: [Int: Int] = [:]
    private var state: State = .line

    /// Creates a parser with the given limits.
    public init(limits: Limits = Limits()) {
        self.limits = limits
    }

    /// The bytes fed but not yet consumed (for tests and back-pressure).
    public var bufferedByteCount: Int { input.count - readIndex + response.count }

    /// Appends bytes received from the server.
    public mutating func feed(_ bytes: some Sequence<UInt8>) {
        if readIndex > 0, readIndex >= input.count / 2 {
            input.removeFirst(readIndex)
            scanIndex -= readIndex
            readIndex = 0
        }
        input.append(contentsOf: bytes)
    }

    /// The next complete event, or nil when more bytes are needed.
    ///
    /// - Throws: `IMAPError` for malformed or oversized input; every later call throws the same error.
    public mutating func next() throws(IMAPError) -> IMAPResponseEvent? {
        do {
            return try step()
        } catch {
            state = .failed(error)
            throw error
        }
    }

    private mutating func step() throws(IMAPError) -> IMAPResponseEvent? {
        while true {
            switch state {
            case .failed(let error):
                throw error
            case .streamEnded:
                state = .line
                return .bodyEnd
            case .streaming(let remaining):
                let available = input.count - readIndex
                guard available > 0 else { return nil }
                let count = min(available, remaining, limits.chunkSize)
                let chunk = Array(input[readIndex..<(readIndex + count)])
                readIndex += count
                scanIndex = readIndex
                state = remaining - count == 0 ? .streamEnded : .streaming(remaining: remaining - count)
                return .bodyChunk(chunk)
            case .literal(let remaining):
                let available = input.count - readIndex
                guard available > 0 else { return nil }
                let count = min(available, remaining)
                response.append(contentsOf: input[readIndex..<(readIndex + count)])
                readIndex += count
                scanIndex = readIndex
                state = remaining - count == 0 ? .line : .literal(remaining: remaining - count)
            case .line:
                switch try readLine() {
                case .event(let event): return event
                case .needMore: return nil
                case .progressed: continue
                }
            }
        }
    }

    private enum LineResult {
        case event(IMAPResponseEvent)
        case needMore
        case progressed
    }

    /// Reads one line; returns an event when it completes a response or begins a streamed body.
    private mutating func readLine() throws(IMAPError) -> LineResult {
        var end: Int? = nil
        var index = max(scanIndex, readIndex)
        while index < input.count {
            if input[index] == 0x0A {
                end = index
                break
            }
            index += 1
        }
        guard let lf = end else {
            scanIndex = input.count
            // +1: the CR of a line of exactly the limit may already be here, waiting for its LF.
            if input.count - readIndex > limits.maxLineLength + 1 { throw .lineTooLong(limit: limits.maxLineLength) }
            return .needMore
        }
        let lineStart = readIndex
        let lineEnd = lf - 1
        // The length first: a line that would have passed the limit before its LF arrived is too long whether or not
        // it ends in CR, so the error does not depend on how the bytes were split into reads.
        guard lineEnd - lineStart <= limits.maxLineLength else { throw .lineTooLong(limit: limits.maxLineLength) }
        guard lf > readIndex, input[lf - 1] == 0x0D else {
            throw .syntax(expected: "CRLF", offset: response.count + (lf - readIndex))
        }
        let segmentStart = response.count
        response.append(contentsOf: input[lineStart...lf])
        readIndex = lf + 1
        scanIndex = readIndex
        guard response.count <= limits.maxResponseSize else { throw .responseTooLarge(limit: limits.maxResponseSize) }
        let isContinuation = segmentStart == 0 && response.first == UInt8(ascii: "+")
        if !isContinuation, let (size, braceAt) = try literalHeader(lineStart: segmentStart) {
            guard size <= UInt64(limits.maxLiteralSize) else {
                throw .literalTooLarge(size: size, limit: limits.maxLiteralSize)
            }
            let count = Int(size)
            if count >= limits.streamBodyThreshold, let (sequence, section) = streamableBody(braceAt: braceAt) {
                streamed[braceAt] = count
                state = count == 0 ? .streamEnded : .streaming(remaining: count)
                return .event(.bodyBegin(sequence: sequence, section: section, size: count))
            }
            guard response.count + count <= limits.maxResponseSize else {
                throw .responseTooLarge(limit: limits.maxResponseSize)
            }
            if count > 0 { state = .literal(remaining: count) }
            return .progressed
        }
        let bytes = response
        let marks = streamed
        response = []
        streamed = [:]
        var grammar = ResponseGrammar(bytes: bytes, streamed: marks, maxDepth: limits.maxDepth)
        return .event(.response(try grammar.parseResponse()))
    }

    /// `{n}` at the end of the line just appended (before CRLF): the size and the offset of `{`.
    private func literalHeader(lineStart: Int) throws(IMAPError) -> (UInt64, Int)? {
        let close = response.count - 3
        guard close > lineStart, response[close] == UInt8(ascii: "}") else { return nil }
        var index = close - 1
        var digits = 0
        while index >= lineStart, response[index] >= 0x30, response[index] <= 0x39 {
            index -= 1
            digits += 1
        }
        guard index >= lineStart, response[index] == UInt8(ascii: "{"), digits > 0 else { return nil }
        guard digits <= 19 else { throw .literalTooLarge(size: UInt64.max, limit: limits.maxLiteralSize) }
        var size: UInt64 = 0
        for byte in response[(index + 1)..<close] {
            let (times, overflow1) = size.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times.addingReportingOverflow(UInt64(byte - 0x30))
            guard !overflow1, !overflow2 else { throw .literalTooLarge(size: UInt64.max, limit: limits.maxLiteralSize) }
            size = sum
        }
        return (size, index)
    }

    /// If the literal at `braceAt` is the value of `BODY[section]<origin>` in `* n FETCH`, its `n` and section.
    private func streamableBody(braceAt: Int) -> (UInt32, String)? {
        // `* ` digits ` FETCH (`
        var index = 0
        guard response.count > 2, response[0] == UInt8(ascii: "*"), response[1] == 0x20 else { return nil }
        index = 2
        var sequence: UInt32 = 0
        let digitsStart = index
        while index < response.count, response[index] >= 0x30, response[index] <= 0x39 {
            let (times, o1) = sequence.multipliedReportingOverflow(by: 10)
            let (sum, o2) = times.addingReportingOverflow(UInt32(response[index] - 0x30))
            guard !o1, !o2 else { return nil }
            sequence = sum
            index += 1
        }
        guard index > digitsStart else { return nil }
        let fetch = Array(" FETCH ".utf8)
        guard index + fetch.count <= response.count,
            zip(response[index..<(index + fetch.count)], fetch).allSatisfy({ ResponseGrammar.upper($0) == $1 })
        else { return nil }
        // Backwards from `{`: SP, optional `<digits>`, `]`, section, `[`, `BODY`.
        var end = braceAt - 1
        guard end > 0, response[end] == 0x20 else { return nil }
        end -= 1
        if response[end] == UInt8(ascii: ">") {
            while end > 0, response[end] != UInt8(ascii: "<") { end -= 1 }
            end -= 1
        }
        guard end > 0, response[end] == UInt8(ascii: "]") else { return nil }
        var open = end - 1
        while open > 0, response[open] != UInt8(ascii: "["), response[open] != UInt8(ascii: "]") { open -= 1 }
        guard open >= 4, response[open] == UInt8(ascii: "[") else { return nil }
        let name = response[(open - 4)..<open].map(ResponseGrammar.upper)
        guard name == Array("BODY".utf8), open - 5 >= 0, response[open - 5] == 0x20 || response[open - 5] == 0x28
        else { return nil }
        return (sequence, String(decoding: response[(open + 1)..<end], as: UTF8.self))
    }
}
