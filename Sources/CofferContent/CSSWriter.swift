/// Writes CSS tokens back as text in a canonical form that tokenizes to the same tokens.
///
/// Identifiers, strings and URLs are escaped as CSSOM serializes them, `<` is always written as
/// an escape (so the text can never close a `<style>` element), and an empty comment is put
/// between two tokens that would otherwise run together (for example after a comment was
/// dropped between them).
struct CSSWriter {
    private(set) var text = ""
    private var last: CSSToken?

    mutating func write(_ components: [CSSComponent]) {
        for component in components { write(component) }
    }

    mutating func write(_ component: CSSComponent) {
        switch component {
        case .token(let token):
            write(token)
        case .function(let name, let arguments):
            write(.function(name))
            write(arguments)
            write(.closeParen)
        case .block(let opening, let contents):
            write(opening)
            write(contents)
            switch opening {
            case .openCurly: write(.closeCurly)
            case .openSquare: write(.closeSquare)
            default: write(.closeParen)
            }
        case .tooDeep:
            break
        }
    }

    /// Writes raw text that is already serialized (a separator such as `, `).
    mutating func writeRaw(_ raw: String, as token: CSSToken) {
        if let last, Self.needsSeparator(last, token) { text += "/**/" }
        text += raw
        self.last = token
    }

    mutating func write(_ token: CSSToken) {
        if let last, Self.needsSeparator(last, token) { text += "/**/" }
        last = token
        switch token {
        case .ident(let name): Self.appendIdentifier(name, to: &text)
        case .function(let name):
            Self.appendIdentifier(name, to: &text)
            text += "("
        case .atKeyword(let name):
            text += "@"
            Self.appendIdentifier(name, to: &text)
        case .hash(let name, let isID):
            text += "#"
            if isID { Self.appendIdentifier(name, to: &text) } else { Self.appendName(name, to: &text) }
        case .string(let value, let singleQuoted): Self.appendString(value, singleQuoted: singleQuoted, to: &text)
        case .url(let value):
            text += "url("
            // The common case: nothing to escape, so the URL is written as it is.
            if value.utf8.allSatisfy({ $0 > 0x20 && $0 != 0x7F && !"\"'()\\<".utf8.contains($0) }) {
                text += value
            } else {
                for scalar in value.unicodeScalars {
                    switch scalar {
                    case " ", "\t", "\n", "\"", "'", "(", ")", "\\", "<":
                        Self.appendHexEscape(scalar, to: &text)
                    default:
                        if scalar.value < 0x20 || scalar.value == 0x7F {
                            Self.appendHexEscape(scalar, to: &text)
                        } else {
                            text.unicodeScalars.append(scalar)
                        }
                    }
                }
            }
            text += ")"
        case .delim(let scalar):
            if scalar == "<" || scalar == "\\" {
                Self.appendHexEscape(scalar, to: &text)
            } else {
                text.unicodeScalars.append(scalar)
            }
        case .number(let repr): text += repr
        case .percentage(let repr): text += repr + "%"
        case .dimension(let repr, let unit):
            text += repr
            Self.appendUnit(unit, to: &text)
        case .whitespace(let value): text += value.isEmpty ? " " : value
        case .badString, .badURL, .cdo, .cdc: break
        case .colon: text += ":"
        case .semicolon: text += ";"
        case .comma: text += ","
        case .openSquare: text += "["
        case .closeSquare: text += "]"
        case .openParen: text += "("
        case .closeParen: text += ")"
        case .openCurly: text += "{"
        case .closeCurly: text += "}"
        }
    }

    // MARK: Separation

    private static func isWordLike(_ token: CSSToken) -> Bool {
        switch token {
        case .ident, .atKeyword, .hash, .dimension, .number, .percentage: return true
        case .delim(let scalar): return scalar == "#" || scalar == "-" || scalar == "@"
        default: return false
        }
    }

    private static func startsWord(_ token: CSSToken) -> Bool {
        switch token {
        case .ident, .function, .url, .badURL, .number, .percentage, .dimension, .cdc: return true
        case .delim(let scalar): return scalar == "-" || scalar == "%"
        default: return false
        }
    }

    /// The first character of a numeric token's source, if it is a sign or a dot.
    private static func numericLead(_ token: CSSToken) -> Unicode.Scalar? {
        switch token {
        case .number(let repr), .percentage(let repr), .dimension(let repr, _):
            guard let first = repr.unicodeScalars.first, first == "+" || first == "." else { return nil }
            return first
        default:
            return nil
        }
    }

    static func needsSeparator(_ previous: CSSToken, _ next: CSSToken) -> Bool {
        if let lead = numericLead(next) {
            // `+` cannot continue a name or number; `.` continues only a number.
            if lead == "+" { return false }
            if case .number = previous { return true }
            if case .delim(let scalar) = previous { return scalar == "." || scalar == "+" }
            return false
        }
        if isWordLike(previous) && startsWord(next) { return true }
        if case .ident = previous, next == .openParen { return true }
        if case .delim(let scalar) = previous {
            switch next {
            case .number, .percentage, .dimension:
                if scalar == "." || scalar == "+" { return true }
            case .delim(let other):
                if scalar == "/" && other == "*" { return true }
            default:
                break
            }
        }
        return false
    }

    // MARK: Escaping

    static func appendHexEscape(_ scalar: Unicode.Scalar, to text: inout String) {
        text += "\\" + String(scalar.value, radix: 16) + " "
    }

    /// Whether every byte is a name code point: an ASCII letter, digit, `-` or `_`, or a byte of a non-ASCII scalar
    /// (all of which are name code points). Such a name needs no escape but for a leading digit.
    private static func isPlainName(_ name: String) -> Bool {
        name.utf8.allSatisfy { byte in
            switch byte {
            case 0x30...0x39, 0x41...0x5A, 0x61...0x7A, UInt8(ascii: "-"), UInt8(ascii: "_"), 0x80...: return true
            default: return false
            }
        }
    }

    /// Whether an identifier made of name code points starts with a digit, or a `-` and a digit: the digit is escaped.
    private static func startsWithDigit(_ name: String) -> Bool {
        var bytes = name.utf8.makeIterator()
        var first = bytes.next()
        if first == UInt8(ascii: "-") { first = bytes.next() }
        return first.map { $0 >= 0x30 && $0 <= 0x39 } ?? false
    }

    /// CSSOM "serialize an identifier", with `<` escaped as well.
    static func appendIdentifier(_ name: String, to text: inout String) {
        // The common case, written as it is: name code points only, no leading digit, not `-` alone.
        if isPlainName(name) && !startsWithDigit(name) && name != "-" {
            text += name
            return
        }
        let scalars = Array(name.unicodeScalars)
        if scalars.count == 1 && scalars[0] == "-" {
            text += "\\-"
            return
        }
        for (index, scalar) in scalars.enumerated() {
            let value = scalar.value
            if value == 0 {
                text += "\u{FFFD}"
            } else if value < 0x20 || value == 0x7F || scalar == "<" {
                appendHexEscape(scalar, to: &text)
            } else if CSSTokenizer.isDigit(scalar) && (index == 0 || (index == 1 && scalars[0] == "-")) {
                appendHexEscape(scalar, to: &text)
            } else if value >= 0x80 || CSSTokenizer.isNameCodePoint(scalar) {
                text.unicodeScalars.append(scalar)
            } else {
                text += "\\"
                text.unicodeScalars.append(scalar)
            }
        }
    }

    /// Name code points as they are; anything else escaped.
    private static func appendName(_ name: String, to text: inout String) {
        if isPlainName(name) {
            text += name
            return
        }
        for scalar in name.unicodeScalars {
            let value = scalar.value
            if value == 0 {
                text += "\u{FFFD}"
            } else if value < 0x20 || value == 0x7F || scalar == "<" {
                appendHexEscape(scalar, to: &text)
            } else if value >= 0x80 || CSSTokenizer.isNameCodePoint(scalar) {
                text.unicodeScalars.append(scalar)
            } else {
                text += "\\"
                text.unicodeScalars.append(scalar)
            }
        }
    }

    /// A dimension's unit: an identifier that must not read as an exponent after the number.
    private static func appendUnit(_ unit: String, to text: inout String) {
        // Only a unit that starts with `e` can read as an exponent.
        guard let lead = unit.utf8.first, lead | 0x20 == UInt8(ascii: "e") else {
            appendIdentifier(unit, to: &text)
            return
        }
        let scalars = Array(unit.unicodeScalars)
        let readsAsExponent =
            scalars.count > 1
            && (CSSTokenizer.isDigit(scalars[1])
                || (scalars[1] == "-" && scalars.count > 2 && CSSTokenizer.isDigit(scalars[2])))
        if let first = scalars.first, first == "e" || first == "E", readsAsExponent {
            appendHexEscape(first, to: &text)
            var rest = ""
            appendName(String(String.UnicodeScalarView(scalars.dropFirst())), to: &rest)
            text += rest
            return
        }
        appendIdentifier(unit, to: &text)
    }

    static func appendString(_ value: String, singleQuoted: Bool = false, to text: inout String) {
        let quote: Unicode.Scalar = singleQuoted ? "'" : "\""
        // The common case: nothing to escape, so the value is written as it is between its quotes.
        let plain = value.utf8.allSatisfy { byte in
            byte >= 0x20 && byte != 0x7F && byte != UInt8(ascii: "\\") && byte != UInt8(ascii: "<")
                && byte != UInt8(quote.value)
        }
        if plain {
            text.unicodeScalars.append(quote)
            text += value
            text.unicodeScalars.append(quote)
            return
        }
        text.unicodeScalars.append(quote)
        for scalar in value.unicodeScalars {
            switch scalar {
            case quote, "\\":
                text += "\\"
                text.unicodeScalars.append(scalar)
            case "<": appendHexEscape(scalar, to: &text)
            default:
                if scalar.value == 0 {
                    text += "\u{FFFD}"
                } else if scalar.value < 0x20 || scalar.value == 0x7F {
                    appendHexEscape(scalar, to: &text)
                } else {
                    text.unicodeScalars.append(scalar)
                }
            }
        }
        text.unicodeScalars.append(quote)
    }
}
