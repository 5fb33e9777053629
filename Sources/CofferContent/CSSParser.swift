/// A component value of CSS Syntax Level 3: a preserved token, a function or a simple block.
enum CSSComponent: Sendable {
    case token(CSSToken)
    /// A function: its name (escapes decoded) and its arguments.
    case function(String, [CSSComponent])
    /// A simple block opened by `(`, `[` or `{` (the opening token) and its contents.
    case block(CSSToken, [CSSComponent])
    /// Input nested deeper than the parser accepts; whatever holds it is dropped.
    case tooDeep

    var isWhitespace: Bool {
        if case .token(let token) = self { return token.isWhitespace }
        return false
    }
}

/// A rule of a style sheet.
struct CSSRule: Sendable {
    enum Kind: Sendable {
        /// A style rule: the selector prelude and the contents of its `{}` block.
        case qualified(prelude: [CSSComponent], block: [CSSComponent])
        /// An at-rule: its name, prelude and the contents of its block if it has one.
        case at(name: String, prelude: [CSSComponent], block: [CSSComponent]?)
    }

    /// Whitespace that preceded the rule in the source.
    var leading: String
    var kind: Kind
}

/// One declaration of a declaration list, with enough of its source shape to write it back
/// the way it was written (whitespace kept, comments dropped).
struct CSSDeclaration: Sendable {
    /// Whitespace before the property name.
    var leading: String
    /// The property name as written (escapes decoded).
    var name: String
    /// Everything after the colon, whitespace included.
    var value: [CSSComponent]
    /// Whether a semicolon followed the declaration.
    var terminated: Bool

    /// The property name folded for comparisons: ASCII-lowercased, full-width forms mapped to
    /// ASCII (old Internet Explorer folded them too).
    var foldedName: String { CSSParser.fold(name) }
}

/// The parsing algorithms of CSS Syntax Level 3 that a filter needs: a style sheet into rules
/// and a block into declarations. Nesting is limited to ``maximumDepth`` so that recursion is
/// bounded; anything deeper becomes ``CSSComponent/tooDeep``.
struct CSSParser {
    static let maximumDepth = 32

    private let tokens: [CSSToken]
    private var position = 0

    init(tokens: [CSSToken]) {
        self.tokens = tokens
    }

    /// Folds an identifier for comparisons: ASCII lowercase, and full-width ASCII forms
    /// (U+FF01 to U+FF5E) mapped to ASCII.
    static func fold(_ name: String) -> String {
        // ASCII, the common case: only A–Z change, and a name without them is returned as it is.
        if !ByteScan.containsNonASCII(name) {
            guard name.utf8.contains(where: { $0 >= 0x41 && $0 <= 0x5A }) else { return name }
            return String(unsafeUninitializedCapacity: name.utf8.count) { buffer in
                for (index, byte) in name.utf8.enumerated() {
                    buffer[index] = byte >= 0x41 && byte <= 0x5A ? byte + 0x20 : byte
                }
                return name.utf8.count
            }
        }
        var result = String.UnicodeScalarView()
        for scalar in name.unicodeScalars {
            var value = scalar.value
            if value >= 0xFF01 && value <= 0xFF5E { value -= 0xFEE0 }
            if value >= 0x41 && value <= 0x5A { value += 0x20 }
            result.append(Unicode.Scalar(value) ?? scalar)
        }
        return String(result)
    }

    /// Parses a style sheet (the contents of a `<style>` element).
    static func parseStyleSheet(_ text: String) -> [CSSRule] {
        var parser = CSSParser(tokens: CSSTokenizer.tokenize(text))
        return parser.consumeRuleList(topLevel: true)
    }

    /// Parses a declaration list (the contents of a `style` attribute).
    static func parseDeclarations(_ text: String) -> [CSSDeclaration] {
        var parser = CSSParser(tokens: CSSTokenizer.tokenize(text))
        var components: [CSSComponent] = []
        while parser.position < parser.tokens.count {
            components.append(parser.consumeComponent(depth: 0))
        }
        return declarations(in: components)
    }

    /// Parses the contents of a block as rules (the body of `@media`).
    static func rules(in components: [CSSComponent]) -> [CSSRule] {
        var rules: [CSSRule] = []
        var leading = ""
        var index = 0
        while index < components.count {
            let component = components[index]
            if case .token(let token) = component {
                switch token {
                case .whitespace(let text):
                    leading += text
                    index += 1
                    continue
                case .atKeyword(let name):
                    index += 1
                    var prelude: [CSSComponent] = []
                    var block: [CSSComponent]?
                    while index < components.count {
                        let part = components[index]
                        index += 1
                        if case .token(.semicolon) = part { break }
                        if case .block(.openCurly, let contents) = part {
                            block = contents
                            break
                        }
                        prelude.append(part)
                    }
                    rules.append(CSSRule(leading: leading, kind: .at(name: name, prelude: prelude, block: block)))
                    leading = ""
                    continue
                default:
                    break
                }
            }
            var prelude: [CSSComponent] = []
            var block: [CSSComponent]?
            while index < components.count {
                let part = components[index]
                index += 1
                if case .block(.openCurly, let contents) = part {
                    block = contents
                    break
                }
                prelude.append(part)
            }
            if let block {
                rules.append(CSSRule(leading: leading, kind: .qualified(prelude: prelude, block: block)))
            }
            leading = ""
        }
        return rules
    }

    /// Splits the contents of a block into declarations; at-rules and anything that does not
    /// start with an identifier are dropped up to the next semicolon.
    static func declarations(in components: [CSSComponent]) -> [CSSDeclaration] {
        var result: [CSSDeclaration] = []
        var leading = ""
        var index = 0
        while index < components.count {
            let component = components[index]
            switch component {
            case .token(.whitespace(let text)):
                leading += text
                index += 1
            case .token(.semicolon):
                leading = ""
                index += 1
            case .token(.ident(let name)):
                index += 1
                var parts: [CSSComponent] = []
                var terminated = false
                while index < components.count {
                    let part = components[index]
                    index += 1
                    if case .token(.semicolon) = part {
                        terminated = true
                        break
                    }
                    parts.append(part)
                }
                var cursor = 0
                while cursor < parts.count && parts[cursor].isWhitespace { cursor += 1 }
                if cursor < parts.count, case .token(.colon) = parts[cursor] {
                    let value = Array(parts[(cursor + 1)...])
                    result.append(CSSDeclaration(leading: leading, name: name, value: value, terminated: terminated))
                }
                leading = ""
            default:
                // An at-rule or garbage: skip to the end of the declaration.
                index += 1
                while index < components.count {
                    let part = components[index]
                    index += 1
                    if case .token(.semicolon) = part { break }
                    if case .block(.openCurly, _) = part, case .token(.atKeyword) = component { break }
                }
                leading = ""
            }
        }
        return result
    }

    private mutating func consumeRuleList(topLevel: Bool) -> [CSSRule] {
        var components: [CSSComponent] = []
        while position < tokens.count {
            let token = tokens[position]
            if topLevel && (token == .cdo || token == .cdc) {
                position += 1
                continue
            }
            components.append(consumeComponent(depth: 0))
        }
        return Self.rules(in: components)
    }

    private mutating func consumeComponent(depth: Int) -> CSSComponent {
        let token = tokens[position]
        position += 1
        switch token {
        case .openCurly, .openSquare, .openParen:
            return consumeBlock(opening: token, depth: depth + 1)
        case .function(let name):
            let contents = consumeContents(closing: .closeParen, depth: depth + 1)
            guard let contents else { return .tooDeep }
            return .function(name, contents)
        default:
            return .token(token)
        }
    }

    private mutating func consumeBlock(opening: CSSToken, depth: Int) -> CSSComponent {
        let closing: CSSToken
        switch opening {
        case .openCurly: closing = .closeCurly
        case .openSquare: closing = .closeSquare
        default: closing = .closeParen
        }
        guard let contents = consumeContents(closing: closing, depth: depth) else { return .tooDeep }
        return .block(opening, contents)
    }

    /// Consumes component values up to `closing` (or the end). Returns `nil` when the nesting
    /// is too deep; the tokens up to the matching close are skipped.
    private mutating func consumeContents(closing: CSSToken, depth: Int) -> [CSSComponent]? {
        if depth > Self.maximumDepth {
            skipNested(closing: closing)
            return nil
        }
        var contents: [CSSComponent] = []
        while position < tokens.count {
            if tokens[position] == closing {
                position += 1
                return contents
            }
            contents.append(consumeComponent(depth: depth))
        }
        return contents
    }

    /// Skips to the token that closes the current block, counting nesting iteratively.
    private mutating func skipNested(closing: CSSToken) {
        var stack: [CSSToken] = [closing]
        while position < tokens.count, let expected = stack.last {
            let token = tokens[position]
            position += 1
            if token == expected {
                stack.removeLast()
                continue
            }
            switch token {
            case .openCurly: stack.append(.closeCurly)
            case .openSquare: stack.append(.closeSquare)
            case .openParen, .function: stack.append(.closeParen)
            default: break
            }
        }
    }
}
