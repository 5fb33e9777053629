/// A token of CSS Syntax Level 3 (section 4). Escapes are decoded: an identifier written
/// `\65 xpression` is the identifier `expression`, so every check sees what a browser sees.
enum CSSToken: Equatable, Sendable {
    case ident(String)
    case function(String)
    case atKeyword(String)
    /// A hash token; `isID` is the spec's type flag "id" (the name would start an identifier).
    case hash(String, isID: Bool)
    /// A string; `singleQuoted` records the quote it was written with, to write it back alike.
    case string(String, singleQuoted: Bool)
    case badString
    case url(String)
    case badURL
    case delim(Unicode.Scalar)
    /// A number with its source representation (numbers cannot contain escapes).
    case number(String)
    case percentage(String)
    case dimension(String, unit: String)
    /// Whitespace with its source text (only spaces, tabs and line feeds after preprocessing).
    case whitespace(String)
    case cdo
    case cdc
    case colon
    case semicolon
    case comma
    case openSquare
    case closeSquare
    case openParen
    case closeParen
    case openCurly
    case closeCurly

    var isWhitespace: Bool {
        if case .whitespace = self { return true }
        return false
    }
}

/// The tokenizer of CSS Syntax Level 3, over the UTF-8 bytes of the input. Linear in the input: every
/// step consumes at least one byte, and comments are skipped as they are met.
///
/// Every character the grammar names is ASCII, and every code point at or above U+0080 is a name code point,
/// so the tokenizer looks at bytes: each byte of a multi-byte sequence is at least 0x80 and reads as a name code
/// point, which keeps the whole sequence together. Only an escaped non-ASCII character is decoded as a scalar.
/// Token text without escapes is one slice of the input.
struct CSSTokenizer {
    private var input: [UInt8]
    private var position = 0

    /// Prepares `text` with the spec's preprocessing: CR, FF and CR LF become LF, NUL becomes
    /// U+FFFD.
    init(_ text: String) {
        guard ByteScan.contains(text, anyOf: 0x0D, 0x0C, 0) else {
            input = Array(text.utf8)
            return
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count + 2)
        var previousCR = false
        for byte in text.utf8 {
            switch byte {
            case 0x0D:
                bytes.append(0x0A)
                previousCR = true
                continue
            case 0x0A:
                if !previousCR { bytes.append(0x0A) }
            case 0x0C:
                bytes.append(0x0A)
            case 0:
                bytes.append(contentsOf: [0xEF, 0xBF, 0xBD])
            default:
                bytes.append(byte)
            }
            previousCR = false
        }
        input = bytes
    }

    /// Tokenizes the whole input.
    static func tokenize(_ text: String) -> [CSSToken] {
        var tokenizer = CSSTokenizer(text)
        var tokens: [CSSToken] = []
        while let token = tokenizer.next() { tokens.append(token) }
        return tokens
    }

    private func peek(_ offset: Int = 0) -> UInt8? {
        let index = position + offset
        return index < input.count ? input[index] : nil
    }

    private func peek(_ offset: Int = 0, is char: Unicode.Scalar) -> Bool {
        peek(offset) == UInt8(char.value)
    }

    /// The input from `start` to the current position as text.
    private func text(from start: Int) -> String {
        String(decoding: input[start..<position], as: UTF8.self)
    }

    /// Returns the next token, or `nil` at the end of the input.
    mutating func next() -> CSSToken? {
        while true {
            guard let char = peek() else { return nil }
            // Comments.
            if char == UInt8(ascii: "/") && peek(1, is: "*") {
                position += 2
                while position < input.count {
                    if input[position] == UInt8(ascii: "*") && peek(1, is: "/") {
                        position += 2
                        break
                    }
                    position += 1
                }
                if position > input.count { position = input.count }
                continue
            }
            return consumeToken(char)
        }
    }

    private mutating func consumeToken(_ char: UInt8) -> CSSToken {
        if Self.isWhitespace(char) {
            let start = position
            while let next = peek(), Self.isWhitespace(next) { position += 1 }
            return .whitespace(text(from: start))
        }
        switch Unicode.Scalar(char) {
        case "\"", "'":
            position += 1
            return consumeString(ending: char)
        case "#":
            position += 1
            if let next = peek(), Self.isNameCodePoint(next) || startsValidEscape(0) {
                let isID = wouldStartIdentifier(0)
                return .hash(consumeName(), isID: isID)
            }
            return .delim("#")
        case "(":
            position += 1
            return .openParen
        case ")":
            position += 1
            return .closeParen
        case "+", ".":
            if startsNumber(0) { return consumeNumeric() }
            position += 1
            return .delim(Unicode.Scalar(char))
        case ",":
            position += 1
            return .comma
        case "-":
            if startsNumber(0) { return consumeNumeric() }
            if peek(1, is: "-") && peek(2, is: ">") {
                position += 3
                return .cdc
            }
            if wouldStartIdentifier(0) { return consumeIdentLike() }
            position += 1
            return .delim("-")
        case ":":
            position += 1
            return .colon
        case ";":
            position += 1
            return .semicolon
        case "<":
            if peek(1, is: "!") && peek(2, is: "-") && peek(3, is: "-") {
                position += 4
                return .cdo
            }
            position += 1
            return .delim("<")
        case "@":
            position += 1
            if wouldStartIdentifier(0) { return .atKeyword(consumeName()) }
            return .delim("@")
        case "[":
            position += 1
            return .openSquare
        case "\\":
            if startsValidEscape(0) { return consumeIdentLike() }
            position += 1
            return .delim("\\")
        case "]":
            position += 1
            return .closeSquare
        case "{":
            position += 1
            return .openCurly
        case "}":
            position += 1
            return .closeCurly
        default:
            if Self.isDigit(char) { return consumeNumeric() }
            if Self.isNameStartCodePoint(char) { return consumeIdentLike() }
            // Not a name start, so ASCII: one byte is the whole character.
            position += 1
            return .delim(Unicode.Scalar(char))
        }
    }

    // MARK: Character classes

    private static func isWhitespace(_ char: Unicode.Scalar) -> Bool {
        char == " " || char == "\t" || char == "\n"
    }

    static func isDigit(_ char: Unicode.Scalar) -> Bool { char.value >= 0x30 && char.value <= 0x39 }

    static func isNameStartCodePoint(_ char: Unicode.Scalar) -> Bool {
        let value = char.value
        return (value >= 0x41 && value <= 0x5A) || (value >= 0x61 && value <= 0x7A) || value == 0x5F || value >= 0x80
    }

    static func isNameCodePoint(_ char: Unicode.Scalar) -> Bool {
        isNameStartCodePoint(char) || isDigit(char) || char == "-"
    }

    // The same classes over one byte of the input: a byte at or above 0x80 is part of a non-ASCII code point.

    private static func isWhitespace(_ byte: UInt8) -> Bool { isWhitespace(Unicode.Scalar(byte)) }
    private static func isDigit(_ byte: UInt8) -> Bool { isDigit(Unicode.Scalar(byte)) }
    private static func isNameStartCodePoint(_ byte: UInt8) -> Bool { isNameStartCodePoint(Unicode.Scalar(byte)) }
    private static func isNameCodePoint(_ byte: UInt8) -> Bool { isNameCodePoint(Unicode.Scalar(byte)) }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        isDigit(byte) || (byte >= 0x41 && byte <= 0x46) || (byte >= 0x61 && byte <= 0x66)
    }

    private static func isNonPrintable(_ byte: UInt8) -> Bool {
        byte <= 0x08 || byte == 0x0B || (byte >= 0x0E && byte <= 0x1F) || byte == 0x7F
    }

    // MARK: Checks

    private func startsValidEscape(_ offset: Int) -> Bool {
        guard peek(offset, is: "\\") else { return false }
        guard let next = peek(offset + 1) else { return false }
        return next != UInt8(ascii: "\n")
    }

    private func wouldStartIdentifier(_ offset: Int) -> Bool {
        guard let first = peek(offset) else { return false }
        if first == UInt8(ascii: "-") {
            guard let second = peek(offset + 1) else { return false }
            return Self.isNameStartCodePoint(second) || second == UInt8(ascii: "-") || startsValidEscape(offset + 1)
        }
        if Self.isNameStartCodePoint(first) { return true }
        return startsValidEscape(offset)
    }

    private func startsNumber(_ offset: Int) -> Bool {
        guard let first = peek(offset) else { return false }
        if first == UInt8(ascii: "+") || first == UInt8(ascii: "-") {
            guard let second = peek(offset + 1) else { return false }
            if Self.isDigit(second) { return true }
            if second == UInt8(ascii: "."), let third = peek(offset + 2) { return Self.isDigit(third) }
            return false
        }
        if first == UInt8(ascii: ".") {
            guard let second = peek(offset + 1) else { return false }
            return Self.isDigit(second)
        }
        return Self.isDigit(first)
    }

    // MARK: Consumers

    /// Consumes an escape; the backslash has been checked but not consumed.
    private mutating func consumeEscape() -> Unicode.Scalar {
        position += 1  // The backslash.
        guard let char = peek() else { return "\u{FFFD}" }
        if Self.isHexDigit(char) {
            var value: UInt32 = 0
            var count = 0
            while count < 6, let digit = peek(), Self.isHexDigit(digit) {
                value = value * 16 + UInt32(Self.hexValue(digit))
                position += 1
                count += 1
            }
            if let next = peek(), Self.isWhitespace(next) { position += 1 }
            if value == 0 || (value >= 0xD800 && value <= 0xDFFF) || value > 0x10FFFF { return "\u{FFFD}" }
            return Unicode.Scalar(value) ?? "\u{FFFD}"
        }
        // The escaped character itself, decoded whole if it is not ASCII (the input is valid UTF-8).
        var parser = Unicode.UTF8.ForwardParser()
        var bytes = input[position...].makeIterator()
        guard case .valid(let encoded) = parser.parseScalar(from: &bytes) else {
            position += 1
            return "\u{FFFD}"
        }
        position += encoded.count
        return Unicode.UTF8.decode(encoded)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8 {
        if byte <= 0x39 { return byte - 0x30 }
        if byte <= 0x46 { return byte - 0x41 + 10 }
        return byte - 0x61 + 10
    }

    /// Token text made of runs of the input and decoded escapes. Until the first escape (or skipped byte) it holds
    /// nothing: text with none is one slice of the input.
    private struct Builder {
        var bytes: [UInt8] = []
        /// Whether a run was moved in: the text is `bytes` and the current run, not the current run alone.
        var started = false

        mutating func append(_ scalar: Unicode.Scalar) {
            if let encoded = UTF8.encode(scalar) { bytes.append(contentsOf: encoded) }
        }
    }

    /// The token text, given that the current run began at `start` and ends at the current position.
    private func finish(_ builder: Builder, from start: Int) -> String {
        guard builder.started else { return text(from: start) }
        return String(decoding: builder.bytes + input[start..<position], as: UTF8.self)
    }

    /// Moves the current run (`start` to the current position) into the builder, before an escape or a skip.
    private func flush(_ builder: inout Builder, from start: Int) {
        builder.started = true
        builder.bytes.append(contentsOf: input[start..<position])
    }

    private mutating func consumeName() -> String {
        var builder = Builder()
        var start = position
        while let char = peek() {
            if Self.isNameCodePoint(char) {
                position += 1
            } else if startsValidEscape(0) {
                flush(&builder, from: start)
                builder.append(consumeEscape())
                start = position
            } else {
                break
            }
        }
        return finish(builder, from: start)
    }

    private mutating func consumeString(ending: UInt8) -> CSSToken {
        let singleQuoted = ending == UInt8(ascii: "'")
        var builder = Builder()
        var start = position
        while let char = peek() {
            if char == ending {
                let value = finish(builder, from: start)
                position += 1
                return .string(value, singleQuoted: singleQuoted)
            }
            if char == UInt8(ascii: "\n") {
                // Not consumed: the newline is reprocessed as whitespace.
                return .badString
            }
            if char == UInt8(ascii: "\\") {
                flush(&builder, from: start)
                if peek(1) == nil {
                    position += 1
                } else if peek(1, is: "\n") {
                    position += 2
                } else {
                    builder.append(consumeEscape())
                }
                start = position
                continue
            }
            position += 1
        }
        return .string(finish(builder, from: start), singleQuoted: singleQuoted)
    }

    private mutating func consumeNumber() -> String {
        let start = position
        if let char = peek(), char == UInt8(ascii: "+") || char == UInt8(ascii: "-") { position += 1 }
        while let char = peek(), Self.isDigit(char) { position += 1 }
        if peek(is: "."), let next = peek(1), Self.isDigit(next) {
            position += 1
            while let char = peek(), Self.isDigit(char) { position += 1 }
        }
        if let e = peek(), e == UInt8(ascii: "e") || e == UInt8(ascii: "E") {
            var digitsAt = 1
            if let sign = peek(1), sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") { digitsAt = 2 }
            if let digit = peek(digitsAt), Self.isDigit(digit) {
                position += digitsAt
                while let char = peek(), Self.isDigit(char) { position += 1 }
            }
        }
        return text(from: start)
    }

    private mutating func consumeNumeric() -> CSSToken {
        let number = consumeNumber()
        if wouldStartIdentifier(0) { return .dimension(number, unit: consumeName()) }
        if peek(is: "%") {
            position += 1
            return .percentage(number)
        }
        return .number(number)
    }

    private mutating func consumeIdentLike() -> CSSToken {
        let name = consumeName()
        if peek(is: "(") {
            position += 1
            // `url`, ASCII case-insensitively (no other code point lowercases to u, r or l).
            if name.utf8.elementsEqual("url".utf8, by: { $0 | 0x20 == $1 }) {
                // Skip whitespace, but leave one if a quote follows so the function form is kept.
                while let a = peek(), Self.isWhitespace(a), let b = peek(1), Self.isWhitespace(b) { position += 1 }
                let first = peek()
                let second = peek(1)
                let quote: (UInt8?) -> Bool = { $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "'") }
                if quote(first) || (first.map(Self.isWhitespace) == true && quote(second)) {
                    return .function(name)
                }
                return consumeURL()
            }
            return .function(name)
        }
        return .ident(name)
    }

    private mutating func consumeURL() -> CSSToken {
        while let char = peek(), Self.isWhitespace(char) { position += 1 }
        var builder = Builder()
        var start = position
        while true {
            guard let char = peek() else { return .url(finish(builder, from: start)) }
            if char == UInt8(ascii: ")") {
                let value = finish(builder, from: start)
                position += 1
                return .url(value)
            }
            if Self.isWhitespace(char) {
                let value = finish(builder, from: start)
                while let next = peek(), Self.isWhitespace(next) { position += 1 }
                if peek(is: ")") {
                    position += 1
                    return .url(value)
                }
                if peek() == nil { return .url(value) }
                consumeBadURLRemnants()
                return .badURL
            }
            if char == UInt8(ascii: "\"") || char == UInt8(ascii: "'") || char == UInt8(ascii: "(")
                || Self.isNonPrintable(char)
            {
                consumeBadURLRemnants()
                return .badURL
            }
            if char == UInt8(ascii: "\\") {
                if startsValidEscape(0) {
                    flush(&builder, from: start)
                    builder.append(consumeEscape())
                    start = position
                    continue
                }
                consumeBadURLRemnants()
                return .badURL
            }
            position += 1
        }
    }

    private mutating func consumeBadURLRemnants() {
        while let char = peek() {
            if char == UInt8(ascii: ")") {
                position += 1
                return
            }
            if startsValidEscape(0) {
                _ = consumeEscape()
            } else {
                position += 1
            }
        }
    }
}
