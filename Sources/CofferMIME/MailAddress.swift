/// One mailbox from an address header such as From, To or Cc.
public struct MailAddress: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The display name, decoded (RFC 2047) and unquoted; `nil` when the address has none.
    public var name: String?
    /// The address itself (`local@domain`); a bare local part when the header has no domain.
    public var address: String
    /// The name of the RFC 5322 group this mailbox was listed in, if any (groups are flattened).
    public var group: String?

    /// Creates an address.
    public init(name: String?, address: String, group: String? = nil) {
        self.name = name
        self.address = address
        self.group = group
    }

    /// The address formatted as `Name <address>` (or just the address when there is no name).
    public var description: String {
        guard let name, !name.isEmpty else {
            return address
        }
        return "\(name) <\(address)>"
    }

    /// Parses an RFC 5322 address list (the unfolded, undecoded header value) leniently: display names, quoted
    /// strings, comments, RFC 2047 encoded words and groups are understood; empty entries are skipped and
    /// unparseable entries keep whatever address text they contain.
    public static func parseList(_ value: String) -> [MailAddress] {
        var parser = AddressListParser(tokens: AddressTokenizer.tokenize(value))
        return parser.parse()
    }
}

private enum AddressToken: Equatable {
    case atom(String)
    case quoted(String)
    case domainLiteral(String)
    case special(Unicode.Scalar)
}

private enum AddressTokenizer {
    static let specials: Set<Unicode.Scalar> = ["(", ")", "<", ">", "@", ",", ";", ":", "\\", "\"", "[", "]"]

    static func tokenize(_ value: String) -> [AddressToken] {
        let scalars = Array(value.unicodeScalars)
        var tokens: [AddressToken] = []
        var index = 0
        while index < scalars.count {
            let scalar = scalars[index]
            switch scalar {
            case " ", "\t", "\r", "\n":
                index += 1
            case "(":
                // Comments nest; they are dropped.
                var depth = 0
                while index < scalars.count {
                    let current = scalars[index]
                    if current == "\\" {
                        index += 2
                        continue
                    }
                    if current == "(" {
                        depth += 1
                    } else if current == ")" {
                        depth -= 1
                        if depth == 0 {
                            index += 1
                            break
                        }
                    }
                    index += 1
                }
            case "\"":
                var text = String.UnicodeScalarView()
                index += 1
                while index < scalars.count && scalars[index] != "\"" {
                    if scalars[index] == "\\" && index + 1 < scalars.count {
                        index += 1
                    }
                    text.append(scalars[index])
                    index += 1
                }
                index += 1
                tokens.append(.quoted(String(text)))
            case "[":
                var text = String.UnicodeScalarView()
                while index < scalars.count && scalars[index] != "]" {
                    text.append(scalars[index])
                    index += 1
                }
                text.append("]")
                index += 1
                tokens.append(.domainLiteral(String(text)))
            default:
                if specials.contains(scalar) {
                    tokens.append(.special(scalar))
                    index += 1
                    continue
                }
                // An encoded word in a phrase holds no specials (RFC 2047 section 5(3)): one that does is not a
                // word, so it cannot hide the addresses after a comma inside a display name.
                if scalar == "=", let (_, end) = HeaderDecoding.encodedWord(scalars, at: index),
                    !scalars[index..<end].contains(where: specials.contains)
                {
                    tokens.append(.atom(String(String.UnicodeScalarView(scalars[index..<end]))))
                    index = end
                    continue
                }
                var end = index
                while end < scalars.count {
                    let current = scalars[end]
                    if current == " " || current == "\t" || current == "\r" || current == "\n"
                        || specials.contains(current)
                    {
                        break
                    }
                    end += 1
                }
                tokens.append(.atom(String(String.UnicodeScalarView(scalars[index..<end]))))
                index = end
            }
        }
        return tokens
    }
}

private struct AddressListParser {
    let tokens: [AddressToken]
    var position = 0

    init(tokens: [AddressToken]) {
        self.tokens = tokens
    }

    private var current: AddressToken? { position < tokens.count ? tokens[position] : nil }

    mutating func parse() -> [MailAddress] {
        var result: [MailAddress] = []
        while position < tokens.count {
            if current == .special(",") || current == .special(";") || current == .special(">") {
                position += 1
                continue
            }
            let phrase = readPhrase()
            switch current {
            case .special(":"):
                position += 1
                let group = displayName(phrase) ?? ""
                while position < tokens.count && current != .special(";") {
                    if current == .special(",") {
                        position += 1
                        continue
                    }
                    let memberPhrase = readPhrase()
                    if var address = readMailbox(phrase: memberPhrase) {
                        address.group = group
                        result.append(address)
                    }
                }
                position += 1
            default:
                if let address = readMailbox(phrase: phrase) {
                    result.append(address)
                }
            }
        }
        return result
    }

    /// Reads words (atoms, quoted strings, and the dots and stray specials that appear in obsolete phrases).
    private mutating func readPhrase() -> [AddressToken] {
        var words: [AddressToken] = []
        while let token = current {
            switch token {
            case .atom, .quoted, .domainLiteral:
                words.append(token)
                position += 1
            case .special(let scalar) where scalar == "\\" || scalar == ")" || scalar == "]":
                position += 1
            default:
                return words
            }
        }
        return words
    }

    /// Reads the rest of one mailbox whose leading words were already read.
    private mutating func readMailbox(phrase: [AddressToken]) -> MailAddress? {
        switch current {
        case .special("<"):
            position += 1
            var inner: [AddressToken] = []
            while let token = current, token != .special(">") {
                if token == .special(",") || token == .special(";") {
                    break
                }
                inner.append(token)
                position += 1
            }
            if current == .special(">") {
                position += 1
            }
            // Words after the angle address but before the next separator are ignored.
            while let token = current, token != .special(","), token != .special(";") {
                if token == .special(":") || token == .special("<") {
                    break
                }
                position += 1
            }
            return MailAddress(name: displayName(phrase), address: addrSpec(stripRoute(inner)))
        case .special("@"):
            var spec = phrase
            while let token = current, token != .special(","), token != .special(";"),
                token != .special("<"), token != .special(":")
            {
                spec.append(token)
                position += 1
            }
            return MailAddress(name: nil, address: addrSpec(spec))
        default:
            if phrase.isEmpty {
                if position < tokens.count {
                    position += 1
                }
                return nil
            }
            return MailAddress(name: nil, address: addrSpec(phrase))
        }
    }

    /// Drops an obsolete source route ("@a,@b:") from an angle address.
    private func stripRoute(_ tokens: [AddressToken]) -> [AddressToken] {
        guard tokens.first == .special("@"), let colon = tokens.firstIndex(of: .special(":")) else {
            return tokens
        }
        return Array(tokens[(colon + 1)...])
    }

    private func addrSpec(_ tokens: [AddressToken]) -> String {
        var local = ""
        var domain = ""
        var seenAt = false
        for token in tokens {
            switch token {
            case .special("@") where !seenAt:
                seenAt = true
            case .atom(let text), .domainLiteral(let text):
                if seenAt { domain += text } else { local += text }
            case .quoted(let text):
                let needsQuotes = text.unicodeScalars.contains {
                    $0 == " " || $0 == "\t" || AddressTokenizer.specials.contains($0)
                }
                let quoted = needsQuotes ? "\"\(text)\"" : text
                if seenAt { domain += quoted } else { local += quoted }
            case .special(let scalar):
                if seenAt { domain.unicodeScalars.append(scalar) } else { local.unicodeScalars.append(scalar) }
            }
        }
        return seenAt ? "\(local)@\(domain)" : local
    }

    private func displayName(_ words: [AddressToken]) -> String? {
        var parts: [String] = []
        for word in words {
            switch word {
            case .atom(let text):
                parts.append(text.hasPrefix("=?") ? HeaderDecoding.decodeUnstructured(text) : text)
            case .quoted(let text):
                parts.append(HeaderDecoding.decodeUnstructured(text))
            case .domainLiteral(let text):
                parts.append(text)
            case .special:
                break
            }
        }
        let name = parts.joined(separator: " ")
        return name.isEmpty ? nil : name
    }
}
