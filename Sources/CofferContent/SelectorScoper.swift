/// Scopes a selector list to the message container, or refuses it.
///
/// Each complex selector may only use type, class, id, attribute and pseudo selectors with
/// the four combinators; anything else (at-keywords, URLs, blocks, `&`, stray tokens) drops the
/// whole rule. Leading `html`, `body` and `:root` compounds become the container itself;
/// every other selector gets `.coffer-message ` in front, unless it already starts with that
/// exact compound followed by a descendant or child combinator (so scoping is idempotent). Id
/// selectors get the same prefix as clobbering-prone `id` attributes.
enum SelectorScoper {
    private enum Part {
        case compound([CSSComponent])
        case combinator(String)
    }

    private static let scope = "." + CSSFilter.containerClass

    /// The scoped selector list as text, or `nil` to drop the rule.
    static func scope(_ prelude: [CSSComponent]) -> String? {
        var selectors: [[CSSComponent]] = [[]]
        for component in prelude {
            if case .token(.comma) = component {
                selectors.append([])
            } else {
                selectors[selectors.count - 1].append(component)
            }
        }
        var scoped: [String] = []
        for selector in selectors {
            guard let text = scopeComplex(selector) else { return nil }
            scoped.append(text)
        }
        return scoped.joined(separator: ", ")
    }

    private static func isValid(_ components: [CSSComponent], nested: Bool = false) -> Bool {
        for component in components {
            switch component {
            case .token(let token):
                switch token {
                case .ident, .hash, .whitespace, .colon: continue
                case .string, .number, .dimension, .percentage, .comma:
                    if nested { continue }
                    return false
                case .delim(let scalar):
                    if ".*>+~|=^$!".unicodeScalars.contains(scalar) { continue }
                    if scalar == "-" { continue }
                    return false
                default: return false
                }
            case .function(let name, let arguments):
                let folded = CSSParser.fold(name)
                if folded == "url" || folded == "src" || !isValid(arguments, nested: true) { return false }
            case .block(.openSquare, let inner):
                if !isValid(inner, nested: true) { return false }
            default:
                return false
            }
        }
        return true
    }

    private static func parts(of components: [CSSComponent]) -> [Part]? {
        var parts: [Part] = []
        var current: [CSSComponent] = []
        var pendingCombinator: String?
        func flush() {
            if !current.isEmpty {
                if !parts.isEmpty { parts.append(.combinator(pendingCombinator ?? " ")) }
                parts.append(.compound(current))
                current = []
                pendingCombinator = nil
            }
        }
        for component in components {
            switch component {
            case .token(.whitespace):
                flush()
            case .token(.delim(let scalar)) where scalar == ">" || scalar == "+" || scalar == "~":
                flush()
                if parts.isEmpty || pendingCombinator != nil { return nil }
                pendingCombinator = String(scalar)
            default:
                current.append(component)
            }
        }
        flush()
        if pendingCombinator != nil { return nil }
        return parts
    }

    private static func isRoot(_ compound: [CSSComponent]) -> Bool {
        if compound.count == 1, case .token(.ident(let name)) = compound[0] {
            let folded = CSSParser.fold(name)
            return folded == "html" || folded == "body"
        }
        if compound.count == 2, case .token(.colon) = compound[0], case .token(.ident(let name)) = compound[1] {
            return CSSParser.fold(name) == "root"
        }
        return false
    }

    private static func isScope(_ compound: [CSSComponent]) -> Bool {
        guard compound.count == 2, case .token(.delim(".")) = compound[0],
            case .token(.ident(let name)) = compound[1]
        else { return false }
        return name == CSSFilter.containerClass
    }

    private static func write(_ components: [CSSComponent], intoCompound writer: inout CSSWriter) {
        for component in components {
            if case .token(.hash(let name, let isID)) = component {
                writer.write(.hash(Clobbering.safeID(name), isID: isID))
            } else if case .function(let name, let arguments) = component {
                writer.write(.function(name))
                write(arguments, intoCompound: &writer)
                writer.write(.closeParen)
            } else {
                writer.write(component)
            }
        }
    }

    private static func scopeComplex(_ selector: [CSSComponent]) -> String? {
        guard isValid(selector), var parts = parts(of: selector), !parts.isEmpty else { return nil }
        var targetsContainer = false
        var strippedCombinator: String?
        while case .compound(let first) = parts[0], isRoot(first) {
            if parts.count == 1 {
                parts = []
                targetsContainer = true
                break
            }
            guard case .combinator(let combinator) = parts[1] else { return nil }
            if combinator == "+" || combinator == "~" { return nil }
            parts.removeFirst(2)
            strippedCombinator = combinator
        }
        if !targetsContainer, strippedCombinator == ">" { parts.insert(.combinator(">"), at: 0) }
        var writer = CSSWriter()
        if targetsContainer {
            writer.writeRaw(scope, as: .ident(CSSFilter.containerClass))
            return writer.text
        }
        var startIndex = 0
        if case .combinator(let combinator) = parts[0] {
            writer.writeRaw(scope + " " + combinator + " ", as: .whitespace(" "))
            startIndex = 1
        } else if case .compound(let first) = parts[0], isScope(first), parts.count == 1 || staysInside(parts[1]) {
            startIndex = 0
        } else {
            writer.writeRaw(scope + " ", as: .whitespace(" "))
        }
        for part in parts[startIndex...] {
            switch part {
            case .compound(let compound):
                write(compound, intoCompound: &writer)
            case .combinator(let combinator):
                writer.writeRaw(combinator == " " ? " " : " " + combinator + " ", as: .whitespace(" "))
            }
        }
        return writer.text
    }

    /// A descendant or child combinator: what follows stays inside the container.
    private static func staysInside(_ part: Part) -> Bool {
        if case .combinator(let combinator) = part { return combinator == " " || combinator == ">" }
        return false
    }
}
