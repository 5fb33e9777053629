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

/// The tokenizer of CSS Syntax Level 3, over Unicode scalars. Linear in the input: every
/// step consumes at least one code point, and comments are skipped as they are met.
struct CSSTokenizer {
    private var input: [Unicode.Scalar]
    private var position = 0

    /// Prepares `text` with the spec's preprocessing: CR, FF and CR LF become LF, NUL becomes
    /// U+FFFD.
    init(_ text: String) {
        var scalars: [Unicode.Scalar] = []
        scalars.reserveCapacity(text.utf8.count)  // at least the number of scalars, without decoding them
        var previousCR = false
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 0x0D:
                scalars.append("\n")
                previousCR = true
                continue
            case 0x0A:
                if !previousCR { scalars.append("\n") }
            case 0x0C:
                scalars.append("\n")
            case 0:
                scalars.append("\u{FFFD}")
            default:
                scalars.append(scalar)
            }
            previousCR = false
        }
        input = scalars
    }

    /// Tokenizes the whole input.
    static func tokenize(_ text: String) -> [CSSToken] {
        var tokenizer = CSSTokenizer(text)
        var tokens: [CSSToken] = []
        while let token = tokenizer.next() { tokens.append(token) }
        return tokens
    }

    private func peek(_ offset: Int = 0) -> Unicode.Scalar? {
        let index = position + offset
        return index < input.count ? input[index] : nil
    }

    /// Returns the next token, or `nil` at the end of the input.
    mutating func next() -> CSSToken? {
        while true {
            guard let char = peek() else { return nil }
            // Comments.
            if char == "/" && peek(1) == "*" {
                position += 2
                while position < input.count {
                    if input[position] == "*" && peek(1) == "/" {
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

    private mutating func consumeToken(_ char: Unicode.Scalar) -> CSSToken {
        if Self.isWhitespace(char) {
            var text = ""
            while let next = peek(), Self.isWhitespace(next) {
                text.unicodeScalars.append(next)
                position += 1
            }
            return .whitespace(text)
        }
        switch char {
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
            return .delim(char)
        case ",":
            position += 1
            return .comma
        case "-":
            if startsNumber(0) { return consumeNumeric() }
            if peek(1) == "-" && peek(2) == ">" {
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
            if peek(1) == "!" && peek(2) == "-" && peek(3) == "-" {
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
            position += 1
            return .delim(char)
        }
    }

    // MARK: Character classes

    static func isWhitespace(_ char: Unicode.Scalar) -> Bool {
        char == " " || char == "\t" || char == "\n"
    }

    static func isDigit(_ char: Unicode.Scalar) -> Bool { char.value >= 0x30 && char.value <= 0x39 }

    static func isHexDigit(_ char: Unicode.Scalar) -> Bool {
        isDigit(char) || (char.value >= 0x41 && char.value <= 0x46) || (char.value >= 0x61 && char.value <= 0x66)
    }

    static func isNameStartCodePoint(_ char: Unicode.Scalar) -> Bool {
        let value = char.value
        return (value >= 0x41 && value <= 0x5A) || (value >= 0x61 && value <= 0x7A) || value == 0x5F || value >= 0x80
    }

    static func isNameCodePoint(_ char: Unicode.Scalar) -> Bool {
        isNameStartCodePoint(char) || isDigit(char) || char == "-"
    }

    private static func isNonPrintable(_ char: Unicode.Scalar) -> Bool {
        let value = char.value
        return value <= 0x08 || value == 0x0B || (value >= 0x0E && value <= 0x1F) || value == 0x7F
    }

    // MARK: Checks

    private func startsValidEscape(_ offset: Int) -> Bool {
        guard peek(offset) == "\\" else { return false }
        guard let next = peek(offset + 1) else { return false }
        return next != "\n"
    }

    private func wouldStartIdentifier(_ offset: Int) -> Bool {
        guard let first = peek(offset) else { return false }
        if first == "-" {
            guard let second = peek(offset + 1) else { return false }
            return Self.isNameStartCodePoint(second) || second == "-" || startsValidEscape(offset + 1)
        }
        if Self.isNameStartCodePoint(first) { return true }
        return startsValidEscape(offset)
    }

    private func startsNumber(_ offset: Int) -> Bool {
        guard let first = peek(offset) else { return false }
        if first == "+" || first == "-" {
            guard let second = peek(offset + 1) else { return false }
            if Self.isDigit(second) { return true }
            if second == ".", let third = peek(offset + 2) { return Self.isDigit(third) }
            return false
        }
        if first == "." {
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
        position += 1
        return char
    }

    private static func hexValue(_ char: Unicode.Scalar) -> UInt8 {
        let value = char.value
        if value <= 0x39 { return UInt8(value - 0x30) }
        if value <= 0x46 { return UInt8(value - 0x41 + 10) }
        return UInt8(value - 0x61 + 10)
    }

    private mutating func consumeName() -> String {
        var result = String.UnicodeScalarView()
        while let char = peek() {
            if Self.isNameCodePoint(char) {
                result.append(char)
                position += 1
            } else if startsValidEscape(0) {
                result.append(consumeEscape())
            } else {
                break
            }
        }
        return String(result)
    }

    private mutating func consumeString(ending: Unicode.Scalar) -> CSSToken {
        var result = String.UnicodeScalarView()
        while let char = peek() {
            if char == ending {
                position += 1
                return .string(String(result), singleQuoted: ending == "'")
            }
            if char == "\n" {
                // Not consumed: the newline is reprocessed as whitespace.
                return .badString
            }
            if char == "\\" {
                guard let next = peek(1) else {
                    position += 1
                    continue
                }
                if next == "\n" {
                    position += 2
                    continue
                }
                result.append(consumeEscape())
                continue
            }
            result.append(char)
            position += 1
        }
        return .string(String(result), singleQuoted: ending == "'")
    }

    private mutating func consumeNumber() -> String {
        var repr = String.UnicodeScalarView()
        if let char = peek(), char == "+" || char == "-" {
            repr.append(char)
            position += 1
        }
        while let char = peek(), Self.isDigit(char) {
            repr.append(char)
            position += 1
        }
        if peek() == ".", let next = peek(1), Self.isDigit(next) {
            repr.append(".")
            position += 1
            while let char = peek(), Self.isDigit(char) {
                repr.append(char)
                position += 1
            }
        }
        if let e = peek(), e == "e" || e == "E" {
            var digitsAt = 1
            if let sign = peek(1), sign == "+" || sign == "-" { digitsAt = 2 }
            if let digit = peek(digitsAt), Self.isDigit(digit) {
                for _ in 0..<digitsAt {
                    repr.append(input[position])
                    position += 1
                }
                while let char = peek(), Self.isDigit(char) {
                    repr.append(char)
                    position += 1
                }
            }
        }
        return String(repr)
    }

    private mutating func consumeNumeric() -> CSSToken {
        let number = consumeNumber()
        if wouldStartIdentifier(0) { return .dimension(number, unit: consumeName()) }
        if peek() == "%" {
            position += 1
            return .percentage(number)
        }
        return .number(number)
    }

    private mutating func consumeIdentLike() -> CSSToken {
        let name = consumeName()
        if peek() == "(" {
            position += 1
            if name.lowercased() == "url" {
                // Skip whitespace, but leave one if a quote follows so the function form is kept.
                while let a = peek(), Self.isWhitespace(a), let b = peek(1), Self.isWhitespace(b) { position += 1 }
                let first = peek()
                let second = peek(1)
                if first == "\"" || first == "'"
                    || (first.map(Self.isWhitespace) == true && (second == "\"" || second == "'"))
                {
                    return .function(name)
                }
                return consumeURL()
            }
            return .function(name)
        }
        return .ident(name)
    }

    private mutating func consumeURL() -> CSSToken {
        var result = String.UnicodeScalarView()
        while let char = peek(), Self.isWhitespace(char) { position += 1 }
        while true {
            guard let char = peek() else { return .url(String(result)) }
            if char == ")" {
                position += 1
                return .url(String(result))
            }
            if Self.isWhitespace(char) {
                while let next = peek(), Self.isWhitespace(next) { position += 1 }
                if peek() == ")" {
                    position += 1
                    return .url(String(result))
                }
                if peek() == nil { return .url(String(result)) }
                consumeBadURLRemnants()
                return .badURL
            }
            if char == "\"" || char == "'" || char == "(" || Self.isNonPrintable(char) {
                consumeBadURLRemnants()
                return .badURL
            }
            if char == "\\" {
                if startsValidEscape(0) {
                    result.append(consumeEscape())
                    continue
                }
                consumeBadURLRemnants()
                return .badURL
            }
            result.append(char)
            position += 1
        }
    }

    private mutating func consumeBadURLRemnants() {
        while let char = peek() {
            if char == ")" {
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
