/// One complete SMTP reply (RFC 5321 4.2): its code and the text of each of its lines.
package struct SMTPReply: Sendable, Equatable {
    /// The three-digit code, the same on every line.
    package var code: Int
    /// The enhanced status code (RFC 3463, `class.subject.detail`) that starts the first line's text, if any.
    package var enhancedCode: String?
    /// Each line's text after the code and its separator (the enhanced code removed), as sent (bytes as Latin-1).
    package var lines: [String]

    /// 2xx.
    package var isPositive: Bool { code / 100 == 2 }
}

/// An incremental parser of SMTP replies: bytes in as they arrive, whole replies out.
///
/// It checks the grammar of RFC 5321 4.2 (`Reply-code [ ("-" / SP) textstring ] CRLF`, the code's digits in their
/// ranges, every line of a multi-line reply with the same code) and bounds what the server can make it hold: a line
/// longer than ``Limits/maxLineLength`` or a reply of more than ``Limits/maxLines`` lines is an error before it is
/// buffered whole. A bare LF, a bare CR or a NUL in a reply is malformed.
package struct SMTPReplyParser {
    /// The parser's bounds.
    package struct Limits: Sendable, Equatable {
        /// The longest reply line, CRLF included (RFC 5321 4.5.3.1.5 allows 512; servers' EHLO lines stay short).
        package var maxLineLength: Int = 2048
        /// The most lines in one reply (an EHLO reply has one per extension).
        package var maxLines: Int = 128

        /// The default bounds.
        package init(maxLineLength: Int = 2048, maxLines: Int = 128) {
            self.maxLineLength = maxLineLength
            self.maxLines = maxLines
        }
    }

    private let limits: Limits
    private var buffer: [UInt8] = []
    private var start = 0
    private var lines: [String] = []
    private var code: Int?

    package init(limits: Limits = .init()) { self.limits = limits }

    /// Bytes received but not yet part of a returned reply.
    package var bufferedByteCount: Int { buffer.count - start + lines.reduce(0) { $0 + $1.utf8.count } }

    /// Adds received bytes.
    package mutating func feed(_ bytes: some Sequence<UInt8>) {
        if start > 4096, start * 2 > buffer.count {
            buffer.removeFirst(start)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next complete reply, or nil until more bytes arrive.
    package mutating func next() throws(SMTPError) -> SMTPReply? {
        while true {
            guard let end = lineEnd() else {
                if buffer.count - start > limits.maxLineLength { throw .replyLineTooLong(limit: limits.maxLineLength) }
                return nil
            }
            guard buffer[end] == 0x0D, end + 1 < buffer.count, buffer[end + 1] == 0x0A else {
                throw .malformedReply(reason: "a reply line ends in a bare CR or a bare LF")
            }
            let line = buffer[start..<end]
            start = end + 2
            guard line.count + 2 <= limits.maxLineLength else { throw .replyLineTooLong(limit: limits.maxLineLength) }
            let (lineCode, last, text) = try Self.parse(line)
            if let code, code != lineCode {
                throw .malformedReply(reason: "the lines of one reply carry different codes")
            }
            code = lineCode
            lines.append(text)
            guard lines.count <= limits.maxLines else { throw .tooManyReplyLines(limit: limits.maxLines) }
            if last {
                defer {
                    lines = []
                    code = nil
                }
                return Self.reply(code: lineCode, lines: lines)
            }
        }
    }

    /// The index of the first CR or LF of the next line end (`next` checks that it is a CRLF), or nil until one has
    /// arrived (for a CR, with the byte after it).
    private func lineEnd() -> Int? {
        var index = start
        while index < buffer.count {
            switch buffer[index] {
            case 0x0D:
                guard index + 1 < buffer.count else { return nil }
                return index
            case 0x0A: return index
            default: index += 1
            }
        }
        return nil
    }

    private static func parse(_ line: ArraySlice<UInt8>) throws(SMTPError) -> (Int, Bool, String) {
        let bytes = Array(line)
        guard bytes.count >= 3 else { throw .malformedReply(reason: "a reply line is shorter than its code") }
        let digits = bytes.prefix(3)
        guard (0x32...0x35).contains(digits[0]), (0x30...0x35).contains(digits[1]), (0x30...0x39).contains(digits[2])
        else { throw .malformedReply(reason: "a reply line does not start with a reply code") }
        let code = digits.reduce(0) { $0 * 10 + Int($1 - 0x30) }
        guard bytes.count > 3 else { return (code, true, "") }
        let separator = bytes[3]
        guard separator == 0x20 || separator == 0x2D else {
            throw .malformedReply(reason: "a reply code is followed by neither a space nor a hyphen")
        }
        let text = bytes.dropFirst(4)
        guard !text.contains(where: { $0 == 0x00 || $0 == 0x0A || $0 == 0x0D }) else {
            throw .malformedReply(reason: "a reply line holds a NUL, a bare CR or a bare LF")
        }
        return (code, separator == 0x20, String(decoding: text, as: Unicode.ASCII.self))
    }

    /// The reply, its enhanced status code split off when the first line starts with one of the code's class.
    private static func reply(code: Int, lines: [String]) -> SMTPReply {
        var lines = lines
        var enhanced: String?
        for index in lines.indices {
            let words = lines[index].split(separator: " ", maxSplits: 1, omittingEmptySubsequences: false)
            guard let first = words.first, isEnhancedCode(first, replyClass: code / 100) else { continue }
            if index == 0 { enhanced = String(first) }
            lines[index] = words.count > 1 ? String(words[1]) : ""
        }
        return SMTPReply(code: code, enhancedCode: enhanced, lines: lines)
    }

    /// `class.subject.detail` (RFC 3463): class 2, 4 or 5 matching the reply's, 1–3 and 1–3 digits.
    private static func isEnhancedCode(_ word: Substring, replyClass: Int) -> Bool {
        let parts = word.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "\(replyClass)", [2, 4, 5].contains(replyClass) else { return false }
        return parts.dropFirst().allSatisfy { part in
            (1...3).contains(part.count) && part.allSatisfy { $0.isASCII && $0.isNumber }
        }
    }
}
