#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Resource limits that keep parsing of hostile input bounded in time and memory.
public struct MIMELimits: Sendable, Hashable {
    /// The largest header section of the message or of any part, in bytes.
    public var maxHeaderSectionBytes: Int
    /// The most header fields in the message or in any part.
    public var maxHeaderFields: Int
    /// The deepest nesting of multiparts and enclosed messages; deeper content is kept undivided.
    public var maxNestingDepth: Int
    /// The most parts in one message; further parts are not split out.
    public var maxParts: Int

    /// Creates limits.
    public init(
        maxHeaderSectionBytes: Int = 1 << 20,
        maxHeaderFields: Int = 10_000,
        maxNestingDepth: Int = 64,
        maxParts: Int = 10_000
    ) {
        self.maxHeaderSectionBytes = maxHeaderSectionBytes
        self.maxHeaderFields = maxHeaderFields
        self.maxNestingDepth = maxNestingDepth
        self.maxParts = maxParts
    }

    /// 1 MiB of headers, 10,000 header fields, 64 levels of nesting, 10,000 parts.
    public static let `default` = MIMELimits()
}

/// Parses RFC 5322 / MIME messages.
///
/// Parsing is best-effort: malformed structure (missing or broken boundaries, bad base64, missing headers, NUL bytes,
/// unknown charsets) gives a result with `defects`, never a crash. Only input that exceeds the limits on header size
/// or count, or empty input, is rejected with a `MIMEError`. Scanning is linear in the input size: every line is
/// examined a bounded number of times, and multipart delimiters are found through one index built in a single pass.
public enum MIMEParser {
    /// Parses a complete message (an `.eml` file, or one message from an mbox or Maildir).
    public static func parse(_ bytes: [UInt8], limits: MIMELimits = .default) throws(MIMEError) -> MIMEMessage {
        guard !bytes.isEmpty else {
            throw .emptyMessage
        }
        return try bytes.withUnsafeBufferPointer { (buffer) throws(MIMEError) -> MIMEMessage in
            var state = ParserState(buffer: buffer, limits: limits)
            let root = try state.parseEntity(
                start: 0,
                end: buffer.count,
                depth: 0,
                defaultType: .textPlain,
                top: true
            )
            return MIMEMessage(root: root, defects: state.defects)
        }
    }
}

private struct Delimiter {
    var start: Int
    var next: Int
    var isClose: Bool
}

private struct ParserState {
    let buffer: UnsafeBufferPointer<UInt8>
    let limits: MIMELimits
    var defects: [MIMEDefect] = []
    var partCount = 0
    var delimiterIndex: [[UInt8]: [Delimiter]]?

    static let newline = UInt8(ascii: "\n")
    static let carriageReturn = UInt8(ascii: "\r")
    static let space = UInt8(ascii: " ")
    static let tab = UInt8(ascii: "\t")
    static let colon = UInt8(ascii: ":")
    static let dash = UInt8(ascii: "-")

    init(buffer: UnsafeBufferPointer<UInt8>, limits: MIMELimits) {
        self.buffer = buffer
        self.limits = limits
    }

    mutating func note(_ defect: MIMEDefect) {
        if !defects.contains(defect) {
            defects.append(defect)
        }
    }

    /// The end of the line's content (before CR LF or LF) and the start of the next line.
    func line(from start: Int, to end: Int) -> (contentEnd: Int, next: Int) {
        guard start < end, let base = buffer.baseAddress else {
            return (end, end)
        }
        guard let found = memchr(base + start, Int32(Self.newline), end - start) else {
            return (end, end)
        }
        let newlineIndex = UnsafePointer(found.assumingMemoryBound(to: UInt8.self)) - base
        var contentEnd = newlineIndex
        if contentEnd > start && buffer[contentEnd - 1] == Self.carriageReturn {
            contentEnd -= 1
        }
        return (contentEnd, newlineIndex + 1)
    }

    func hasPrefix(_ prefix: StaticString, at index: Int, end: Int) -> Bool {
        let count = prefix.utf8CodeUnitCount
        guard index + count <= end else {
            return false
        }
        let pointer = prefix.utf8Start
        for offset in 0..<count where buffer[index + offset] != pointer[offset] {
            return false
        }
        return true
    }

    func string(_ range: Range<Int>) -> String {
        String(decoding: UnsafeBufferPointer(rebasing: buffer[range]), as: UTF8.self)
    }

    // MARK: Header section

    private struct PendingField {
        var nameRange: Range<Int>
        var valueStart: Int
        var valueEnd: Int
    }

    private func makeField(_ pending: PendingField) -> HeaderField {
        let name = string(pending.nameRange)
        let raw = string(pending.valueStart..<max(pending.valueStart, pending.valueEnd))
        let field = HeaderField(name: name, rawValue: raw, value: "")
        let unfolded = field.unfoldedValue
        return HeaderField(name: name, rawValue: raw, value: HeaderDecoding.decodeUnstructured(unfolded))
    }

    mutating func parseHeaders(
        start: Int,
        end: Int,
        allowUnixFrom: Bool
    ) throws(MIMEError) -> (fields: [HeaderField], bodyStart: Int) {
        var fields: [HeaderField] = []
        var pending: PendingField?
        var index = start
        var isFirstLine = true
        while index < end {
            let (contentEnd, next) = line(from: index, to: end)
            if next - start > limits.maxHeaderSectionBytes {
                throw .headerSectionTooLarge(limit: limits.maxHeaderSectionBytes)
            }
            defer { isFirstLine = false }
            if contentEnd == index {
                if let field = pending {
                    fields.append(makeField(field))
                }
                return (fields, next)
            }
            let first = buffer[index]
            if first == Self.space || first == Self.tab {
                pending?.valueEnd = contentEnd
                index = next
                continue
            }
            if hasPrefix("From ", at: index, end: contentEnd) {
                // An mbox separator line at the top, or a stray one among the headers: ignored.
                if !(isFirstLine && allowUnixFrom) {
                    note(.invalidHeaderLine)
                }
                index = next
                continue
            }
            var cursor = index
            while cursor < contentEnd && buffer[cursor] != Self.colon && buffer[cursor] > 0x20
                && buffer[cursor] < 0x7F
            {
                cursor += 1
            }
            if cursor < contentEnd && buffer[cursor] == Self.colon {
                if let field = pending {
                    fields.append(makeField(field))
                    if fields.count >= limits.maxHeaderFields {
                        throw .tooManyHeaderFields(limit: limits.maxHeaderFields)
                    }
                }
                pending = nil
                if cursor == index {
                    note(.invalidHeaderLine)
                } else {
                    pending = PendingField(nameRange: index..<cursor, valueStart: cursor + 1, valueEnd: contentEnd)
                }
                index = next
                continue
            }
            // Not a header line: the body starts here although no blank line separated it.
            note(.missingHeaderBodySeparator)
            if let field = pending {
                fields.append(makeField(field))
            }
            return (fields, index)
        }
        if let field = pending {
            fields.append(makeField(field))
        }
        return (fields, end)
    }

    // MARK: Delimiters

    mutating func delimiters(for boundary: [UInt8], in range: Range<Int>) -> ArraySlice<Delimiter> {
        if delimiterIndex == nil {
            delimiterIndex = buildDelimiterIndex()
        }
        guard let list = delimiterIndex?[boundary], !list.isEmpty else {
            return []
        }
        var low = 0
        var high = list.count
        while low < high {
            let middle = (low + high) / 2
            if list[middle].start < range.lowerBound {
                low = middle + 1
            } else {
                high = middle
            }
        }
        var upper = low
        while upper < list.count && list[upper].start < range.upperBound {
            upper += 1
        }
        return list[low..<upper]
    }

    /// One pass over the whole input: every line starting with `--` is filed under the boundary it would delimit.
    func buildDelimiterIndex() -> [[UInt8]: [Delimiter]] {
        var index: [[UInt8]: [Delimiter]] = [:]
        var position = 0
        let end = buffer.count
        while position < end {
            let (contentEnd, next) = line(from: position, to: end)
            if contentEnd - position >= 2 && contentEnd - position <= 260 && buffer[position] == Self.dash
                && buffer[position + 1] == Self.dash
            {
                var tokenEnd = contentEnd
                while tokenEnd > position + 2
                    && (buffer[tokenEnd - 1] == Self.space || buffer[tokenEnd - 1] == Self.tab)
                {
                    tokenEnd -= 1
                }
                let token = Array(buffer[(position + 2)..<tokenEnd])
                index[token, default: []].append(Delimiter(start: position, next: next, isClose: false))
                if token.count > 2 && token[token.count - 1] == Self.dash && token[token.count - 2] == Self.dash {
                    index[Array(token.dropLast(2)), default: []].append(
                        Delimiter(start: position, next: next, isClose: true)
                    )
                }
            }
            position = next
        }
        return index
    }

    // MARK: Entities

    func decodeBody(_ range: Range<Int>, encoding: String) -> [UInt8] {
        let slice = UnsafeBufferPointer(rebasing: buffer[range])
        switch encoding {
        case "base64":
            return TransferDecoding.base64(slice)
        case "quoted-printable":
            return TransferDecoding.quotedPrintable(slice)
        default:
            return Array(slice)
        }
    }

    mutating func parseEntity(
        start: Int,
        end: Int,
        depth: Int,
        defaultType: ContentType,
        top: Bool,
        insideEnclosedMessage: Bool = false
    ) throws(MIMEError) -> MIMEPart {
        let (headers, bodyStart) = try parseHeaders(start: start, end: end, allowUnixFrom: top)
        partCount += 1
        var part = MIMEPart(headers: headers, contentType: defaultType)
        if let value = part.header("Content-Type")?.unfoldedValue {
            part.contentType = ContentType.parse(value)
        }
        if let value = part.header("Content-Disposition")?.unfoldedValue {
            let (main, parameters) = HeaderDecoding.parseParameterized(value)
            part.disposition = ContentDisposition(type: main.lowercased(), parameters: parameters)
        }
        if let value = part.header("Content-Transfer-Encoding")?.value {
            let encoding = value.trimmingWhitespace().lowercased()
            part.transferEncoding = encoding.isEmpty ? "7bit" : encoding
        }
        if let value = part.header("Content-ID")?.unfoldedValue {
            let trimmed = value.trimmingWhitespace()
            let id = MIMEMessage.messageIDs(trimmed).first ?? trimmed
            part.contentID = id.isEmpty ? nil : id
        }
        let bodyRange = min(bodyStart, end)..<end

        if part.contentType.type == "multipart" {
            guard depth < limits.maxNestingDepth else {
                note(.nestingTooDeep(limit: limits.maxNestingDepth))
                part.body = decodeBody(bodyRange, encoding: part.transferEncoding)
                return part
            }
            guard let boundary = part.contentType.parameters["boundary"]?.trimmingTrailingWhitespace(),
                !boundary.isEmpty
            else {
                note(.missingBoundaryParameter)
                part.body = decodeBody(bodyRange, encoding: part.transferEncoding)
                return part
            }
            let found = delimiters(for: Array(boundary.utf8), in: bodyRange)
            guard !found.isEmpty else {
                note(.boundaryNotFound)
                part.body = decodeBody(bodyRange, encoding: part.transferEncoding)
                return part
            }
            let childDefault: ContentType = part.contentType.subtype == "digest" ? .messageRFC822 : .textPlain
            var childStart: Int?
            var closed = false
            for delimiter in found {
                if let contentStart = childStart {
                    var contentEnd = delimiter.start
                    if contentEnd > contentStart && buffer[contentEnd - 1] == Self.newline {
                        contentEnd -= 1
                        if contentEnd > contentStart && buffer[contentEnd - 1] == Self.carriageReturn {
                            contentEnd -= 1
                        }
                    }
                    guard
                        try appendChild(
                            to: &part,
                            start: contentStart,
                            end: contentEnd,
                            depth: depth,
                            childDefault,
                            insideEnclosedMessage
                        )
                    else {
                        return part
                    }
                }
                if delimiter.isClose {
                    closed = true
                    break
                }
                childStart = min(delimiter.next, end)
            }
            if !closed {
                note(.closeBoundaryNotFound)
                if let contentStart = childStart {
                    _ = try appendChild(
                        to: &part,
                        start: contentStart,
                        end: end,
                        depth: depth,
                        childDefault,
                        insideEnclosedMessage
                    )
                }
            }
            return part
        }

        if part.isEnclosedMessage && depth < limits.maxNestingDepth
            && ["7bit", "8bit", "binary"].contains(part.transferEncoding)
        {
            if !insideEnclosedMessage {
                part.body = Array(UnsafeBufferPointer(rebasing: buffer[bodyRange]))
            }
            guard partCount < limits.maxParts else {
                note(.tooManyParts(limit: limits.maxParts))
                return part
            }
            let inner = try parseEntity(
                start: bodyRange.lowerBound,
                end: bodyRange.upperBound,
                depth: depth + 1,
                defaultType: .textPlain,
                top: false,
                insideEnclosedMessage: true
            )
            part.children = [inner]
            return part
        }
        if part.isEnclosedMessage && depth >= limits.maxNestingDepth {
            note(.nestingTooDeep(limit: limits.maxNestingDepth))
        }
        part.body = decodeBody(bodyRange, encoding: part.transferEncoding)
        return part
    }

    /// Parses one child; returns false (after noting the defect) once the part limit is reached.
    mutating func appendChild(
        to part: inout MIMEPart,
        start: Int,
        end: Int,
        depth: Int,
        _ defaultType: ContentType,
        _ insideEnclosedMessage: Bool
    ) throws(MIMEError) -> Bool {
        guard partCount < limits.maxParts else {
            note(.tooManyParts(limit: limits.maxParts))
            return false
        }
        let child = try parseEntity(
            start: start,
            end: max(start, end),
            depth: depth + 1,
            defaultType: defaultType,
            top: false,
            insideEnclosedMessage: insideEnclosedMessage
        )
        part.children.append(child)
        return true
    }
}

extension String {
    /// The text without trailing spaces and tabs.
    func trimmingTrailingWhitespace() -> String {
        var scalars = unicodeScalars[...]
        while let last = scalars.last, last == " " || last == "\t" {
            scalars = scalars.dropLast()
        }
        return String(scalars)
    }
}
