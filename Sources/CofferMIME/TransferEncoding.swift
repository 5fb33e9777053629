/// Base64 (RFC 4648), written in 76-character lines for MIME bodies (RFC 2045 section 6.8).
enum Base64Encoding {
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    /// Input bytes per output line: 57 bytes make 76 characters.
    static let bytesPerLine = 57

    /// Base64 of `bytes` without line breaks, with padding.
    static func encode(_ bytes: [UInt8]) -> String {
        var output: [UInt8] = []
        output.reserveCapacity((bytes.count + 2) / 3 * 4)
        append(bytes[...], to: &output)
        return String(decoding: output, as: UTF8.self)
    }

    static func append(_ bytes: ArraySlice<UInt8>, to output: inout [UInt8]) {
        let start = output.count
        output.append(contentsOf: repeatElement(0, count: (bytes.count + 2) / 3 * 4))
        output.withUnsafeMutableBufferPointer { out in
            bytes.withUnsafeBufferPointer { input in
                alphabet.withUnsafeBufferPointer { table in
                    var at = start
                    var index = 0
                    while index + 3 <= input.count {
                        let value =
                            UInt32(input[index]) << 16 | UInt32(input[index + 1]) << 8 | UInt32(input[index + 2])
                        out[at] = table[Int(value >> 18 & 63)]
                        out[at + 1] = table[Int(value >> 12 & 63)]
                        out[at + 2] = table[Int(value >> 6 & 63)]
                        out[at + 3] = table[Int(value & 63)]
                        at += 4
                        index += 3
                    }
                    let rest = input.count - index
                    if rest > 0 {
                        let value = UInt32(input[index]) << 16 | (rest == 2 ? UInt32(input[index + 1]) << 8 : 0)
                        out[at] = table[Int(value >> 18 & 63)]
                        out[at + 1] = table[Int(value >> 12 & 63)]
                        out[at + 2] = rest == 2 ? table[Int(value >> 6 & 63)] : UInt8(ascii: "=")
                        out[at + 3] = UInt8(ascii: "=")
                    }
                }
            }
        }
    }

    /// Encodes a stream chunk by chunk into CRLF-terminated 76-character lines, keeping fewer than 57 bytes between
    /// chunks.
    struct LineEncoder {
        private var carry: [UInt8] = []

        /// Encodes every whole line that `chunk` (after the bytes kept from earlier chunks) completes.
        mutating func encode(_ chunk: ArraySlice<UInt8>, into output: inout [UInt8]) {
            var input = chunk
            if !carry.isEmpty {
                let needed = bytesPerLine - carry.count
                carry += input.prefix(needed)
                input = input.dropFirst(needed)
                guard carry.count == bytesPerLine else {
                    return
                }
                Base64Encoding.append(carry[...], to: &output)
                output += [0x0D, 0x0A]
                carry = []
            }
            while input.count >= bytesPerLine {
                Base64Encoding.append(input.prefix(bytesPerLine), to: &output)
                output += [0x0D, 0x0A]
                input = input.dropFirst(bytesPerLine)
            }
            carry = Array(input)
        }

        /// Encodes the bytes kept back as the last (shorter, padded) line.
        mutating func finish(into output: inout [UInt8]) {
            if !carry.isEmpty {
                Base64Encoding.append(carry[...], to: &output)
                output += [0x0D, 0x0A]
                carry = []
            }
        }
    }
}

/// Text bodies: line breaks normalised to CRLF, then either 7bit as is or quoted-printable (RFC 2045 section 6.7).
enum TextBodyEncoding {
    /// The longest line written (RFC 2045: 76 characters, a soft line break's `=` included).
    static let lineLimit = 76

    /// The text's UTF-8 with every line break (CRLF, LF or CR alone) as CRLF, ending with a line break unless empty.
    static func normalized(_ text: String) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(text.utf8.count + text.utf8.count / 32 + 2)
        var previousCR = false
        for byte in text.utf8 {
            if byte == 0x0A {
                if !previousCR {
                    output += [0x0D, 0x0A]
                }
                previousCR = false
            } else if byte == 0x0D {
                output += [0x0D, 0x0A]
                previousCR = true
            } else {
                output.append(byte)
                previousCR = false
            }
        }
        if !output.isEmpty && output.last != 0x0A {
            output += [0x0D, 0x0A]
        }
        return output
    }

    /// Whether normalised text can go as 7bit: printable ASCII and tab only, lines of at most 76 characters, no
    /// trailing whitespace (transports strip it), no line starting with `From ` (mbox files alter it) or `--=_`
    /// (the start of every boundary this writer makes).
    static func isSevenBitSafe(_ bytes: [UInt8]) -> Bool {
        var lineStart = 0
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == 0x0D {
                let length = index - lineStart
                if length > lineLimit {
                    return false
                }
                if length > 0 && (bytes[index - 1] == 0x20 || bytes[index - 1] == 0x09) {
                    return false
                }
                if startsLine(bytes, at: lineStart, with: "From ") || startsLine(bytes, at: lineStart, with: "--=_") {
                    return false
                }
                index += 2
                lineStart = index
                continue
            }
            if !(byte == 0x09 || (byte >= 0x20 && byte < 0x7F)) {
                return false
            }
            index += 1
        }
        return true
    }

    static func startsLine(_ bytes: [UInt8], at index: Int, with prefix: StaticString) -> Bool {
        let count = prefix.utf8CodeUnitCount
        guard index + count <= bytes.count else {
            return false
        }
        for offset in 0..<count where bytes[index + offset] != prefix.utf8Start[offset] {
            return false
        }
        return true
    }

    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    /// A quoted-printable encoder over normalised text, run a range at a time so a large body is written in
    /// pieces. It looks past the range's end (the whole text is at hand) to decide on trailing whitespace.
    ///
    /// Output: printable ASCII except `=` as is; `=`, controls, 8-bit bytes, a space or tab before a line break,
    /// and the `F` of a line starting with `From ` as `=XX`; soft line breaks keep lines within 76 characters and
    /// never split an escape. The output never holds `=` followed by anything but two hex digits or a line break,
    /// so it cannot contain a boundary starting with `=_`.
    struct QuotedPrintableEncoder {
        private var column = 0

        mutating func encode(_ input: [UInt8], range: Range<Int>, into output: inout [UInt8]) {
            var index = range.lowerBound
            while index < range.upperBound {
                let byte = input[index]
                if byte == 0x0D && index + 1 < input.count && input[index + 1] == 0x0A {
                    output += [0x0D, 0x0A]
                    column = 0
                    index += 2
                    continue
                }
                let atLineEnd = index + 1 == input.count || input[index + 1] == 0x0D
                let limit = atLineEnd ? lineLimit : lineLimit - 1
                var literal = isLiteral(byte, atLineEnd: atLineEnd, input: input, index: index)
                if column + (literal ? 1 : 3) > limit {
                    output += [UInt8(ascii: "="), 0x0D, 0x0A]
                    column = 0
                    literal = isLiteral(byte, atLineEnd: atLineEnd, input: input, index: index)
                }
                if literal {
                    output.append(byte)
                    column += 1
                } else {
                    output += [UInt8(ascii: "="), hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 0x0F)]]
                    column += 3
                }
                index += 1
            }
        }

        private func isLiteral(_ byte: UInt8, atLineEnd: Bool, input: [UInt8], index: Int) -> Bool {
            if byte == 0x20 || byte == 0x09 {
                return !atLineEnd
            }
            guard byte > 0x20 && byte < 0x7F && byte != UInt8(ascii: "=") else {
                return false
            }
            if column == 0 && byte == UInt8(ascii: "F") && startsLine(input, at: index, with: "From ") {
                return false
            }
            return true
        }
    }
}
