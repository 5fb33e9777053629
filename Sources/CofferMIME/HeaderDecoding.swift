/// RFC 2047 encoded-word decoding and RFC 2045/2231 parameter parsing.
enum HeaderDecoding {
    /// The longest encoded word searched for. Real encoded words are at most 75 characters; the cap keeps a value
    /// full of unterminated `=?` sequences linear-time.
    static let maxEncodedWordLength = 4096

    private static func isWhitespace(_ scalar: Unicode.Scalar) -> Bool {
        scalar == " " || scalar == "\t"
    }

    /// Tries to decode an RFC 2047 encoded word starting at `start` (which must point at `=?`).
    /// Returns the decoded text and the index just past the closing `?=`.
    ///
    /// Only a valid word decodes (RFC 2047 sections 2, 4 and 6.3): its charset and encoded text are printable ASCII
    /// without spaces, its B or Q text is well-formed, and the bytes are text in its charset. Anything else is not
    /// an encoded word and is shown as written: a word never runs across whitespace, so it cannot swallow the
    /// commas and addresses that follow it in an address list.
    static func encodedWord(_ scalars: [Unicode.Scalar], at start: Int) -> (text: String, end: Int)? {
        let count = scalars.count
        guard start + 1 < count, scalars[start] == "=", scalars[start + 1] == "?" else {
            return nil
        }
        let limit = min(count, start + maxEncodedWordLength)
        // charset
        var index = start + 2
        while index < limit && scalars[index] != "?" {
            guard isEncodedWordCharacter(scalars[index]) else { return nil }
            index += 1
        }
        guard index < limit, index > start + 2 else {
            return nil
        }
        let charset = String(String.UnicodeScalarView(scalars[(start + 2)..<index]))
        // encoding letter
        guard index + 2 < limit, scalars[index + 2] == "?" else {
            return nil
        }
        let letter = scalars[index + 1]
        let isBase64: Bool
        switch letter {
        case "b", "B": isBase64 = true
        case "q", "Q": isBase64 = false
        default: return nil
        }
        let textStart = index + 3
        // encoded text runs to the first "?=" and contains no further "?"
        var cursor = textStart
        while cursor + 1 < limit {
            if scalars[cursor] == "?" {
                guard scalars[cursor + 1] == "=" else {
                    return nil
                }
                break
            }
            guard isEncodedWordCharacter(scalars[cursor]) else { return nil }
            cursor += 1
        }
        guard cursor + 1 < limit, scalars[cursor] == "?", scalars[cursor + 1] == "=" else {
            return nil
        }
        let raw = scalars[textStart..<cursor].map { UInt8($0.value) }
        guard let bytes = isBase64 ? bDecode(raw) : qDecode(raw),
            let text = Charset.decodeStrict(bytes, charset: charset)
        else { return nil }
        return (text, cursor + 2)
    }

    /// Printable ASCII other than space (RFC 2047 `token` and `encoded-text`; `?` is checked by the caller).
    private static func isEncodedWordCharacter(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value > 0x20 && scalar.value < 0x7F
    }

    /// RFC 2047 "B": the base64 alphabet only, padding only at the end; nil for anything else.
    private static func bDecode(_ raw: [UInt8]) -> [UInt8]? {
        var body = raw[...]
        while body.last == UInt8(ascii: "=") { body = body.dropLast() }
        guard raw.count - body.count <= 2, body.count % 4 != 1,
            body.allSatisfy({ TransferDecoding.isBase64Character($0) })
        else { return nil }
        return TransferDecoding.base64(body)
    }

    /// RFC 2047 "Q": `_` is a space and `=` is followed by two hex digits; nil for a broken escape.
    private static func qDecode(_ raw: [UInt8]) -> [UInt8]? {
        var output: [UInt8] = []
        output.reserveCapacity(raw.count)
        var index = 0
        while index < raw.count {
            let byte = raw[index]
            if byte == UInt8(ascii: "_") {
                output.append(UInt8(ascii: " "))
            } else if byte == UInt8(ascii: "=") {
                guard index + 2 < raw.count, let high = TransferDecoding.hexValue(raw[index + 1]),
                    let low = TransferDecoding.hexValue(raw[index + 2])
                else { return nil }
                output.append(high << 4 | low)
                index += 3
                continue
            } else {
                output.append(byte)
            }
            index += 1
        }
        return output
    }

    private enum Token {
        case whitespace(String)
        case encodedWord(String)
        case text(String)
    }

    /// Decodes an unstructured header value (RFC 5322 unstructured text with RFC 2047 encoded words).
    ///
    /// Whitespace is kept as is, except that whitespace separating two encoded words is removed; encoded words
    /// not surrounded by whitespace are still decoded, as real mail needs.
    static func decodeUnstructured(_ value: String) -> String {
        if !value.contains("=?") {
            return value
        }
        let scalars = Array(value.unicodeScalars)
        var tokens: [Token] = []
        var index = 0
        while index < scalars.count {
            if isWhitespace(scalars[index]) {
                var end = index
                while end < scalars.count && isWhitespace(scalars[end]) {
                    end += 1
                }
                tokens.append(.whitespace(String(String.UnicodeScalarView(scalars[index..<end]))))
                index = end
                continue
            }
            var validWord = true
            if scalars[index] == "=" && index + 1 < scalars.count && scalars[index + 1] == "?" {
                if let (text, end) = encodedWord(scalars, at: index) {
                    if tokens.count > 1, case .whitespace = tokens[tokens.count - 1],
                        case .encodedWord = tokens[tokens.count - 2]
                    {
                        tokens[tokens.count - 1] = .whitespace("")
                    }
                    tokens.append(.encodedWord(text))
                    index = end
                    continue
                }
                validWord = false
            }
            var end = index
            while end < scalars.count && !isWhitespace(scalars[end]) {
                end += 1
            }
            if validWord {
                // Split the word before an embedded encoded word so the next round decodes it.
                var probe = index + 1
                while probe + 1 < end {
                    if scalars[probe] == "=" && scalars[probe + 1] == "?" && encodedWord(scalars, at: probe) != nil {
                        end = probe
                        break
                    }
                    probe += 1
                }
            }
            tokens.append(.text(String(String.UnicodeScalarView(scalars[index..<end]))))
            index = end
        }
        var result = ""
        for token in tokens {
            switch token {
            case .whitespace(let text), .encodedWord(let text), .text(let text):
                result += text
            }
        }
        return result
    }

    /// Splits a structured MIME header value ("type/subtype; name=value; ...") into its main value and its
    /// parameters, joining RFC 2231 continuations and decoding RFC 2231 charsets. Parameter names are lowercased;
    /// when a name repeats, the first occurrence wins, except that an RFC 2231 extended value is preferred over a
    /// plain one.
    static func parseParameterized(_ value: String) -> (value: String, parameters: [String: String]) {
        let scalars = Array(value.unicodeScalars)
        var segments: [String] = []
        var current = String.UnicodeScalarView()
        var inQuotes = false
        var index = 0
        while index < scalars.count {
            let scalar = scalars[index]
            if inQuotes && scalar == "\\" && index + 1 < scalars.count {
                current.append(scalar)
                current.append(scalars[index + 1])
                index += 2
                continue
            }
            if scalar == "\"" {
                inQuotes.toggle()
            }
            if scalar == ";" && !inQuotes {
                segments.append(String(current))
                current = String.UnicodeScalarView()
            } else {
                current.append(scalar)
            }
            index += 1
        }
        segments.append(String(current))
        let main = segments.removeFirst().trimmingWhitespace()

        struct Piece {
            var value: String
            var encoded: Bool
        }
        var plain: [String: String] = [:]
        var extended: [String: [Int: Piece]] = [:]
        for segment in segments {
            guard let equals = segment.firstIndex(of: "=") else {
                continue
            }
            let name = segment[..<equals].trimmingWhitespace().lowercased()
            if name.isEmpty {
                continue
            }
            let rawValue = segment[segment.index(after: equals)...].trimmingWhitespace()
            let unquoted = unquote(rawValue)
            if let star = name.firstIndex(of: "*") {
                let base = String(name[..<star])
                var rest = name[name.index(after: star)...]
                var encoded = false
                if rest.hasSuffix("*") {
                    encoded = true
                    rest = rest.dropLast()
                }
                let section: Int
                if rest.isEmpty {
                    section = 0
                    encoded = true
                } else if let number = Int(rest), number >= 0, number < 10_000 {
                    section = number
                } else {
                    continue
                }
                if extended[base, default: [:]][section] == nil {
                    extended[base, default: [:]][section] = Piece(value: unquoted, encoded: encoded)
                }
            } else if plain[name] == nil {
                plain[name] = unquoted
            }
        }
        var parameters = plain
        for (name, pieces) in extended {
            var charset: String?
            var bytes: [UInt8] = []
            var anyEncoded = false
            for section in pieces.keys.sorted() {
                guard let piece = pieces[section] else {
                    continue
                }
                var text = piece.value
                if piece.encoded {
                    anyEncoded = true
                    if section == pieces.keys.min() {
                        let parts = text.split(separator: "'", maxSplits: 2, omittingEmptySubsequences: false)
                        if parts.count == 3 {
                            charset = parts[0].isEmpty ? nil : String(parts[0])
                            text = String(parts[2])
                        }
                    }
                    bytes += TransferDecoding.percent(Array(text.utf8))
                } else {
                    bytes += Array(text.utf8)
                }
            }
            if anyEncoded, let charset {
                parameters[name] = Charset.decode(bytes, charset: charset)
            } else {
                parameters[name] = String(decoding: bytes, as: UTF8.self)
            }
        }
        return (main, parameters)
    }

    /// Removes surrounding double quotes and backslash escapes from a parameter value.
    static func unquote(_ value: String) -> String {
        guard value.hasPrefix("\"") else {
            return value
        }
        var result = String.UnicodeScalarView()
        var iterator = value.unicodeScalars.dropFirst().makeIterator()
        while let scalar = iterator.next() {
            if scalar == "\\" {
                if let next = iterator.next() {
                    result.append(next)
                }
            } else if scalar == "\"" {
                break
            } else {
                result.append(scalar)
            }
        }
        return String(result)
    }
}

extension StringProtocol {
    /// The text without leading and trailing spaces, tabs and line breaks.
    func trimmingWhitespace() -> String {
        let isSpace: (Unicode.Scalar) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n" }
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !isSpace($0) }) else {
            return ""
        }
        let last = scalars.lastIndex(where: { !isSpace($0) })!
        return String(String.UnicodeScalarView(scalars[first...last]))
    }
}
