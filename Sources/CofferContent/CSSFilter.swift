/// Filters CSS for the mail profile: `style` attributes and `<style>` sheets are parsed with
/// ``CSSParser``, checked on decoded tokens, and written back with ``CSSWriter``.
///
/// Rules:
/// - only allow-listed properties (plus custom properties and Outlook's `mso-*`) survive;
///   `behavior`, `-moz-binding` and `-o-link` are not on the list;
/// - values may only call allow-listed functions (no `expression()`, `attr()`, `progid:`),
///   and may not hold bad tokens, `{}` blocks, colons, `<` or stray backslashes;
/// - `position: fixed` is removed;
/// - every `url()`, `src()`, and string in `image()`/`image-set()`/`cross-fade()`, in a custom
///   property's value or in a `var()` argument (substitution can move it into `image-set()`) goes
///   through the remote-content policy: kept, embedded (`cid:`), replaced by `about:invalid` when
///   blocked, or the declaration is dropped (forbidden scheme, relative URL);
/// - any other string that reads as a remote URL is decided as one (blocked drops the declaration),
///   and one naming a script or file URL drops it; an identifier holding escaped punctuation
///   (`url\(`) drops it; the remote URLs of every dropped declaration are reported as blocked;
/// - in sheets, `@import`, `@charset`, `@namespace`, `@keyframes`, `@page`, `@supports` and
///   unknown at-rules are dropped; `@media` is kept with its rules filtered; `@font-face` is kept
///   only with a usable `src`; every selector is scoped to the message container.
struct CSSFilter {
    /// The class of the element that holds a message; every selector is scoped to it.
    static let containerClass = "coffer-message"
    static let blockedURL = "about:invalid"
    private static let maximumAtRuleDepth = 4

    let gate: ResourceGate

    // MARK: Allow-lists

    static let allowedProperties: Set<String> = [
        "align-content", "align-items", "align-self", "aspect-ratio", "background", "background-attachment",
        "background-blend-mode", "background-clip", "background-color", "background-image", "background-origin",
        "background-position", "background-position-x", "background-position-y", "background-repeat",
        "background-size", "border", "border-bottom", "border-bottom-color", "border-bottom-left-radius",
        "border-bottom-right-radius", "border-bottom-style", "border-bottom-width", "border-collapse",
        "border-color", "border-image", "border-image-outset", "border-image-repeat", "border-image-slice",
        "border-image-source", "border-image-width", "border-left", "border-left-color", "border-left-style",
        "border-left-width", "border-radius", "border-right", "border-right-color", "border-right-style",
        "border-right-width", "border-spacing", "border-style", "border-top", "border-top-color",
        "border-top-left-radius", "border-top-right-radius", "border-top-style", "border-top-width",
        "border-width", "bottom", "box-decoration-break", "box-shadow", "box-sizing", "break-after", "break-before",
        "break-inside", "caption-side", "clear", "clip", "clip-path", "color", "color-scheme", "column-count",
        "column-fill", "column-gap", "column-rule", "column-rule-color", "column-rule-style", "column-rule-width",
        "column-span", "column-width", "columns", "content", "counter-increment", "counter-reset", "cursor",
        "direction", "display", "empty-cells", "filter", "flex", "flex-basis", "flex-direction", "flex-flow",
        "flex-grow", "flex-shrink", "flex-wrap", "float", "font", "font-family", "font-feature-settings",
        "font-kerning", "font-size", "font-size-adjust", "font-smoothing", "font-stretch", "font-style",
        "font-variant", "font-variant-caps", "font-variant-ligatures", "font-variant-numeric", "font-weight", "gap",
        "grid", "grid-area", "grid-auto-columns", "grid-auto-flow", "grid-auto-rows", "grid-column",
        "grid-column-end", "grid-column-gap", "grid-column-start", "grid-gap", "grid-row", "grid-row-end",
        "grid-row-gap", "grid-row-start", "grid-template", "grid-template-areas", "grid-template-columns",
        "grid-template-rows", "height", "hyphens", "inset", "isolation", "justify-content", "justify-items",
        "justify-self", "left", "letter-spacing", "line-break", "line-height", "list-style", "list-style-image",
        "list-style-position", "list-style-type", "margin", "margin-block", "margin-block-end",
        "margin-block-start", "margin-bottom", "margin-inline", "margin-inline-end", "margin-inline-start",
        "margin-left", "margin-right", "margin-top", "mask", "mask-image", "max-height", "max-width",
        "min-height", "min-width", "mix-blend-mode", "object-fit", "object-position", "opacity", "order",
        "orphans", "outline", "outline-color", "outline-offset", "outline-style", "outline-width", "overflow",
        "overflow-wrap", "overflow-x", "overflow-y", "padding", "padding-block", "padding-block-end",
        "padding-block-start", "padding-bottom", "padding-inline", "padding-inline-end", "padding-inline-start",
        "padding-left", "padding-right", "padding-top", "page-break-after", "page-break-before",
        "page-break-inside", "pointer-events", "position", "quotes", "right", "row-gap", "tab-size",
        "table-layout", "tap-highlight-color", "text-align", "text-align-last", "text-decoration",
        "text-decoration-color", "text-decoration-line", "text-decoration-skip-ink", "text-decoration-style",
        "text-decoration-thickness", "text-emphasis", "text-emphasis-color", "text-fill-color", "text-indent",
        "text-justify", "text-orientation", "text-overflow", "text-rendering", "text-shadow", "text-size-adjust",
        "text-stroke", "text-stroke-color", "text-stroke-width", "text-transform", "text-underline-offset",
        "text-underline-position", "text-wrap", "top", "transform", "transform-origin", "unicode-bidi",
        "user-select", "vertical-align", "visibility", "white-space", "widows", "width", "word-break",
        "word-spacing", "word-wrap", "writing-mode", "z-index",
    ]

    static let fontFaceProperties: Set<String> = [
        "font-family", "src", "font-style", "font-weight", "font-display", "unicode-range", "font-stretch",
        "font-variant", "font-feature-settings",
    ]

    static let allowedFunctions: Set<String> = [
        "rgb", "rgba", "hsl", "hsla", "hwb", "lab", "lch", "oklab", "oklch", "color", "color-mix", "light-dark",
        "calc", "min", "max", "clamp", "round", "mod", "rem", "abs", "sign", "var", "linear-gradient",
        "radial-gradient", "conic-gradient", "repeating-linear-gradient", "repeating-radial-gradient",
        "repeating-conic-gradient", "gradient", "from", "to", "color-stop", "local", "format", "tech", "type",
        "matrix", "matrix3d", "translate", "translatex", "translatey", "translatez", "translate3d", "scale",
        "scalex", "scaley", "scalez", "scale3d", "rotate", "rotatex", "rotatey", "rotatez", "rotate3d", "skew",
        "skewx", "skewy", "perspective", "blur", "brightness", "contrast", "drop-shadow", "grayscale",
        "hue-rotate", "invert", "opacity", "saturate", "sepia", "counter", "counters", "rect", "inset", "circle",
        "ellipse", "polygon", "cubic-bezier", "steps", "minmax", "repeat", "fit-content",
    ]

    /// Functions whose direct string arguments are URLs.
    static let imageFunctions: Set<String> = ["image", "image-set", "cross-fade"]

    /// Folds a name and removes one vendor prefix.
    static func unprefixed(_ folded: String) -> String {
        // Every prefix starts with `-`; most names do not.
        guard folded.utf8.first == UInt8(ascii: "-") else { return folded }
        for prefix in ["-webkit-", "-moz-", "-ms-", "-o-"] where folded.hasPrefix(prefix) {
            return String(folded.dropFirst(prefix.count))
        }
        return folded
    }

    static func isAllowedProperty(_ folded: String) -> Bool {
        if folded.hasPrefix("--") { return folded.count > 2 }
        if folded.hasPrefix("mso-") { return true }
        switch folded {
        case "behavior", "-ms-behavior", "-moz-binding", "binding", "-o-link", "-o-link-source":
            return false
        default:
            return allowedProperties.contains(unprefixed(folded))
        }
    }

    // MARK: Style attributes

    /// Filters a `style` attribute; `nil` when nothing is left. Its CSS images are tracking-pixel
    /// candidates when the element looks hidden (`looksHidden`, an `<img>`'s attributes) or the style
    /// itself hides it or makes it at most 1px (a 1×1 `<div>` with a background is a pixel too).
    func filterStyleAttribute(_ text: String, element: String, looksHidden: Bool = false) -> String? {
        let declarations = CSSParser.parseDeclarations(text)
        let hidden = looksHidden || Self.looksHidden(declarations)
        var output = filterDeclarations(declarations, element: element, fontFace: false, looksHidden: hidden)
        if output.utf8.allSatisfy({ " \t\n;".utf8.contains($0) }) { return nil }
        while let first = output.first, first == " " || first == "\t" || first == "\n" { output.removeFirst() }
        return output
    }

    /// Keeps the allowed declarations and writes them back.
    func filterDeclarations(
        _ declarations: [CSSDeclaration],
        element: String,
        fontFace: Bool,
        looksHidden: Bool = false
    ) -> String {
        var output = ""
        for declaration in declarations {
            guard
                let value = filterDeclaration(
                    declaration,
                    element: element,
                    fontFace: fontFace,
                    looksHidden: looksHidden
                )
            else { continue }
            output += declaration.leading
            CSSWriter.appendIdentifier(declaration.name, to: &output)
            output += ":"
            output += value
            if declaration.terminated { output += ";" }
        }
        return output
    }

    /// The written value of an allowed declaration, or `nil` to drop it. The remote URLs of a dropped
    /// declaration are reported as blocked.
    func filterDeclaration(
        _ declaration: CSSDeclaration,
        element: String,
        fontFace: Bool,
        looksHidden: Bool = false
    ) -> String? {
        let name = declaration.foldedName
        let kind: RemoteResource.Kind = fontFace ? .font : .cssImage
        let mark = gate.mark
        func drop() -> String? {
            gate.rollBack(to: mark)
            recordRemoteURLs(
                in: declaration.value,
                property: name,
                element: element,
                kind: kind,
                looksHidden: looksHidden
            )
            return nil
        }
        if fontFace {
            guard Self.fontFaceProperties.contains(name) else { return drop() }
        } else {
            guard Self.isAllowedProperty(name) else { return drop() }
        }
        var value = declaration.value
        if value.allSatisfy(\.isWhitespace) { return nil }
        guard
            filterValue(
                &value,
                property: name,
                element: element,
                kind: kind,
                looksHidden: looksHidden,
                strings: name.hasPrefix("--") ? .urlAtAnyDepth : .text
            )
        else { return drop() }
        if Self.unprefixed(name) == "position" && Self.containsIdent(value, "fixed") { return drop() }
        var writer = CSSWriter()
        writer.write(value)
        return writer.text
    }

    /// Reports every remote URL of a dropped declaration as blocked: `url()` tokens and every string
    /// that reads as a remote URL.
    private func recordRemoteURLs(
        in components: [CSSComponent],
        property: String,
        element: String,
        kind: RemoteResource.Kind,
        looksHidden: Bool
    ) {
        for component in components {
            switch component {
            case .token(.url(let raw)), .token(.string(let raw, _)):
                gate.recordBlocked(raw, kind: kind, element: element, attribute: property, looksHidden: looksHidden)
            case .function(_, let inner), .block(_, let inner):
                recordRemoteURLs(in: inner, property: property, element: element, kind: kind, looksHidden: looksHidden)
            case .token, .tooDeep:
                continue
            }
        }
    }

    static func containsIdent(_ components: [CSSComponent], _ name: String) -> Bool {
        for component in components {
            switch component {
            case .token(.ident(let ident)): if CSSParser.fold(ident) == name { return true }
            case .function(_, let inner), .block(_, let inner): if containsIdent(inner, name) { return true }
            default: break
            }
        }
        return false
    }

    private func decideURL(
        _ raw: String,
        property: String,
        element: String,
        kind: RemoteResource.Kind,
        looksHidden: Bool
    ) -> String? {
        switch gate.decide(raw, kind: kind, element: element, attribute: property, looksHidden: looksHidden) {
        case .keep(let value): return value
        case .blocked: return Self.blockedURL
        case .drop: return nil
        }
    }

    /// Where the strings of a value are URLs.
    enum StringRole {
        /// Text (`content`, `font-family`, `quotes`): kept, unless it reads as a remote URL (decided as
        /// one; blocked drops the declaration) or a script or file URL (dropped).
        case text
        /// URLs in this list only: the direct arguments of `image()`, `image-set()`, `cross-fade()`.
        case urlHere
        /// URLs at any depth: a custom property's value and the arguments of `var()`, which substitution
        /// can move into `image-set()` anywhere.
        case urlAtAnyDepth
    }

    /// Schemes a string may not name even as text: a URL that runs script or reads files.
    static let textForbiddenSchemes: Set<String> = [
        "javascript", "vbscript", "livescript", "mocha", "file", "ftp", "ftps", "ws", "wss",
    ]

    /// Whether a decoded identifier holds a character only an escape can put there (ASCII punctuation
    /// but `-` and `_`, or a control): `url\(`, `https\3a \2f \2f …`.
    static func hasEscapedPunctuation(_ name: String) -> Bool {
        for byte in name.utf8 where byte < 0x80 {
            switch byte {
            case 0x30...0x39, 0x41...0x5A, 0x61...0x7A, UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: " "):
                continue
            default:
                return true
            }
        }
        return false
    }

    /// Checks and rewrites a value in place; `false` to drop the declaration.
    func filterValue(
        _ components: inout [CSSComponent],
        property: String,
        element: String,
        kind: RemoteResource.Kind,
        looksHidden: Bool,
        strings: StringRole = .text
    ) -> Bool {
        let nested: StringRole = strings == .urlAtAnyDepth ? .urlAtAnyDepth : .text
        for index in components.indices {
            switch components[index] {
            case .tooDeep:
                return false
            case .token(let token):
                switch token {
                case .url(let raw):
                    guard
                        let url = decideURL(
                            raw,
                            property: property,
                            element: element,
                            kind: kind,
                            looksHidden: looksHidden
                        )
                    else { return false }
                    components[index] = .token(.url(url))
                case .string(let raw, let single):
                    if strings == .text {
                        switch URLPolicy.classify(URLPolicy.clean(raw)) {
                        case .remote:
                            // Text that names a remote URL: reported like one; blocked, the declaration goes.
                            let decision = gate.decide(
                                raw,
                                kind: kind,
                                element: element,
                                attribute: property,
                                looksHidden: looksHidden
                            )
                            guard case .keep = decision else { return false }
                        case .other(let scheme) where Self.textForbiddenSchemes.contains(scheme):
                            return false
                        case .data(let mediaType) where mediaType == "text/html":
                            return false
                        default:
                            break
                        }
                        continue
                    }
                    guard
                        let url = decideURL(
                            raw,
                            property: property,
                            element: element,
                            kind: kind,
                            looksHidden: looksHidden
                        )
                    else { return false }
                    components[index] = .token(.string(url, singleQuoted: single))
                case .ident(let name), .hash(let name, _), .dimension(_, let name):
                    if Self.hasEscapedPunctuation(name) { return false }
                case .badString, .badURL, .cdo, .cdc, .atKeyword, .colon, .semicolon, .openCurly, .closeCurly,
                    .openSquare, .closeSquare, .openParen, .closeParen:
                    return false
                case .delim(let scalar):
                    if scalar == "\\" || scalar == "<" || scalar == "@" { return false }
                default:
                    break
                }
            case .block(let opening, var inner):
                if opening == .openCurly { return false }
                guard
                    filterValue(
                        &inner,
                        property: property,
                        element: element,
                        kind: kind,
                        looksHidden: looksHidden,
                        strings: nested
                    )
                else { return false }
                components[index] = .block(opening, inner)
            case .function(let name, var arguments):
                let folded = Self.unprefixed(CSSParser.fold(name))
                if folded == "url" || folded == "src" {
                    // The function form: one string, nothing else but whitespace.
                    let meaningful = arguments.filter { !$0.isWhitespace }
                    guard meaningful.count == 1, case .token(.string(let raw, let single)) = meaningful[0] else {
                        return false
                    }
                    guard
                        let url = decideURL(
                            raw,
                            property: property,
                            element: element,
                            kind: kind,
                            looksHidden: looksHidden
                        )
                    else { return false }
                    components[index] = .function(name, [.token(.string(url, singleQuoted: single))])
                    continue
                }
                let inner: StringRole
                if folded == "var" {
                    inner = .urlAtAnyDepth
                } else if Self.imageFunctions.contains(folded) {
                    inner = strings == .urlAtAnyDepth ? .urlAtAnyDepth : .urlHere
                } else if Self.allowedFunctions.contains(folded) {
                    inner = nested
                } else {
                    return false
                }
                guard
                    filterValue(
                        &arguments,
                        property: property,
                        element: element,
                        kind: kind,
                        looksHidden: looksHidden,
                        strings: inner
                    )
                else { return false }
                components[index] = .function(name, arguments)
            }
        }
        return true
    }

    // MARK: Style sheets

    /// Filters a style sheet and scopes it to the message container.
    func filterStyleSheet(_ text: String, element: String = "style") -> String {
        let rules = CSSParser.parseStyleSheet(text)
        return filterRules(rules, element: element, depth: 0)
    }

    private func filterRules(_ rules: [CSSRule], element: String, depth: Int) -> String {
        var output = ""
        for rule in rules {
            switch rule.kind {
            case .qualified(let prelude, let block):
                guard let selector = SelectorScoper.scope(prelude) else { continue }
                let declarations = CSSParser.declarations(in: block)
                let body = filterDeclarations(declarations, element: element, fontFace: false)
                if body.utf8.allSatisfy({ " \t\n;".utf8.contains($0) }) { continue }
                output += rule.leading + selector + "{" + body + "}"
            case .at(let name, let prelude, let block):
                guard let block, depth < Self.maximumAtRuleDepth else { continue }
                switch CSSParser.fold(name) {
                case "media":
                    guard let query = Self.mediaQuery(prelude) else { continue }
                    let inner = filterRules(CSSParser.rules(in: block), element: element, depth: depth + 1)
                    if inner.utf8.allSatisfy({ " \t\n".utf8.contains($0) }) { continue }
                    output += rule.leading + "@media" + query + "{" + inner + "}"
                case "font-face":
                    guard prelude.allSatisfy(\.isWhitespace) else { continue }
                    var body = ""
                    var hasSource = false
                    for declaration in CSSParser.declarations(in: block) {
                        guard let value = filterDeclaration(declaration, element: element, fontFace: true) else {
                            continue
                        }
                        if declaration.foldedName == "src" { hasSource = true }
                        body += declaration.leading
                        CSSWriter.appendIdentifier(declaration.name, to: &body)
                        body += ":" + value
                        if declaration.terminated { body += ";" }
                    }
                    guard hasSource else { continue }
                    output += rule.leading + "@font-face{" + body + "}"
                default:
                    continue
                }
            }
        }
        return output
    }

    /// A media query list written back, or `nil` if it holds anything but identifiers,
    /// numbers, commas and `(feature: value)` blocks.
    static func mediaQuery(_ prelude: [CSSComponent]) -> String? {
        func valid(_ components: [CSSComponent], nested: Bool) -> Bool {
            for component in components {
                switch component {
                case .token(let token):
                    switch token {
                    case .ident, .whitespace, .comma, .number, .dimension, .percentage: continue
                    case .colon: if !nested { return false }
                    case .delim(let scalar):
                        if !(nested && (scalar == "/" || scalar == ">" || scalar == "=")) { return false }
                    default: return false
                    }
                case .block(.openParen, let inner):
                    if !valid(inner, nested: true) { return false }
                default:
                    return false
                }
            }
            return true
        }
        guard valid(prelude, nested: false) else { return nil }
        var writer = CSSWriter()
        writer.write(prelude)
        var text = writer.text
        if !text.hasPrefix(" ") { text = " " + text }
        return text
    }

    // MARK: Tracking-pixel hints

    /// Whether inline CSS hides an element or makes it tiny: `display: none`,
    /// `visibility: hidden`, `opacity: 0`, or a width or height of at most one pixel.
    static func looksHidden(style: String) -> Bool {
        looksHidden(CSSParser.parseDeclarations(style))
    }

    /// ``looksHidden(style:)`` on parsed declarations.
    static func looksHidden(_ declarations: [CSSDeclaration]) -> Bool {
        for declaration in declarations {
            let meaningful = declaration.value.filter { !$0.isWhitespace }
            guard let first = meaningful.first, case .token(let token) = first else { continue }
            switch (declaration.foldedName, token) {
            case ("display", .ident(let value)) where CSSParser.fold(value) == "none": return true
            case ("visibility", .ident(let value)) where CSSParser.fold(value) == "hidden": return true
            case ("opacity", .number(let value)) where (Double(value) ?? 1) <= 0.01: return true
            case ("width", .dimension(let value, let unit)), ("height", .dimension(let value, let unit)),
                ("max-width", .dimension(let value, let unit)), ("max-height", .dimension(let value, let unit)):
                if CSSParser.fold(unit) == "px", (Double(value) ?? 2) <= 1 { return true }
            case ("width", .number(let value)), ("height", .number(let value)), ("max-width", .number(let value)),
                ("max-height", .number(let value)):
                if (Double(value) ?? 2) <= 1 { return true }
            default:
                continue
            }
        }
        return false
    }
}
