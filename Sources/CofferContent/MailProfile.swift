import CofferHTML

/// The email profile: which elements and attributes survive.
enum MailProfile {
    /// What happens to an element.
    enum Action {
        /// Kept, with its allowed attributes.
        case keep
        /// Removed, its children kept in its place.
        case unwrap
        /// Removed with everything inside it.
        case drop
    }

    /// Elements kept (in the HTML namespace only; SVG and MathML are always dropped).
    static let keptElements: Set<String> = [
        "a", "abbr", "acronym", "address", "area", "article", "aside", "audio", "b", "bdi", "bdo", "big",
        "blockquote", "br", "caption", "center", "cite", "code", "col", "colgroup", "data", "dd", "del",
        "details", "dfn", "dir", "div", "dl", "dt", "em", "figcaption", "figure", "font", "footer", "h1", "h2",
        "h3", "h4", "h5", "h6", "header", "hgroup", "hr", "i", "img", "ins", "kbd", "li", "main", "map", "mark",
        "menu", "nav", "ol", "p", "picture", "pre", "q", "rp", "rt", "ruby", "s", "samp", "search", "section",
        "small", "source", "span", "strike", "strong", "sub", "summary", "sup", "table", "tbody", "td", "tfoot",
        "th", "thead", "time", "tr", "tt", "u", "ul", "var", "video", "wbr",
    ]

    /// Elements removed together with their content. Everything not listed here or in
    /// ``keptElements`` (forms, buttons, unknown and custom elements, …) is unwrapped.
    static let droppedElements: Set<String> = [
        "script", "noscript", "iframe", "frame", "frameset", "noframes", "object", "embed", "applet", "param",
        "noembed", "template", "title", "meta", "link", "base", "basefont", "bgsound", "input", "keygen",
        "datalist", "portal", "fencedframe", "track", "head", "math", "svg", "canvas", "dialog", "slot",
        "selectedcontent", "xml",
    ]

    /// Attributes allowed on every kept element.
    static let globalAttributes: Set<String> = [
        "id", "class", "style", "title", "dir", "lang", "align", "valign", "bgcolor", "width", "height", "role",
        "hidden", "translate",
    ]

    /// Attributes allowed on particular elements, beyond the global ones. URL-bearing ones
    /// (`href`, `src`, `srcset`, `background`, `poster`, `usemap`) are checked separately.
    static let elementAttributes: [String: Set<String>] = [
        "a": ["href", "name", "hreflang"],
        "area": ["href", "alt", "shape", "coords", "nohref"],
        "img": ["src", "srcset", "sizes", "alt", "border", "hspace", "vspace", "usemap", "ismap", "name"],
        "table": ["border", "cellpadding", "cellspacing", "background", "summary", "frame", "rules"],
        "td": ["background", "colspan", "rowspan", "headers", "scope", "abbr", "axis", "nowrap", "char", "charoff"],
        "th": ["background", "colspan", "rowspan", "headers", "scope", "abbr", "axis", "nowrap", "char", "charoff"],
        "tr": ["background", "char", "charoff"],
        "tbody": ["char", "charoff"],
        "thead": ["char", "charoff"],
        "tfoot": ["char", "charoff"],
        "col": ["span", "char", "charoff"],
        "colgroup": ["span", "char", "charoff"],
        "font": ["color", "face", "size"],
        "ol": ["start", "type", "reversed", "compact"],
        "ul": ["type", "compact"],
        "li": ["type", "value"],
        "dl": ["compact"],
        "dir": ["compact"],
        "menu": ["compact"],
        "del": ["datetime"],
        "ins": ["datetime"],
        "time": ["datetime"],
        "data": ["value"],
        "details": ["open"],
        "hr": ["noshade", "size", "color"],
        "br": ["clear"],
        "pre": ["wrap"],
        "map": ["name"],
        "video": ["src", "poster", "controls", "loop", "muted", "playsinline"],
        "audio": ["src", "controls", "loop", "muted"],
        "source": ["src", "srcset", "type", "media", "sizes"],
        "bdo": [],
        "caption": [],
    ]

    /// How the sanitizer treats an allowed attribute, decided by its name.
    enum AttributeRole {
        /// Kept as written.
        case plain
        /// `id` and `name`: made safe against DOM clobbering.
        case identifier
        /// `style`: filtered as CSS.
        case style
        /// `href`: a link.
        case href
        /// `usemap`: a fragment reference.
        case usemap
        /// `src`, `background`, `poster`: a resource that loads.
        case resource
        /// `srcset`: a list of resources.
        case srcset

        init(name: String) {
            switch name {
            case "id", "name": self = .identifier
            case "style": self = .style
            case "href": self = .href
            case "usemap": self = .usemap
            case "src", "background", "poster": self = .resource
            case "srcset": self = .srcset
            default: self = .plain
            }
        }
    }

    /// What happens to an HTML element and, if it is kept, the role of each attribute it may keep (the global ones
    /// and its own): one lookup per element and one per attribute instead of a set membership test for each list
    /// and a comparison of the name with every special one.
    struct ElementPolicy {
        var action: Action
        var attributes: NameTable<AttributeRole>
    }

    private static let noAttributes = NameTable<AttributeRole>([])

    /// The policy of every kept and dropped HTML element; any other HTML element is unwrapped.
    static let elementPolicies: NameTable<ElementPolicy> = {
        var policies: [String: ElementPolicy] = [:]
        for name in droppedElements { policies[name] = ElementPolicy(action: .drop, attributes: noAttributes) }
        for name in keptElements {
            let attributes = globalAttributes.union(elementAttributes[name] ?? [])
            let roles = NameTable(attributes.map { ($0, AttributeRole(name: $0)) })
            policies[name] = ElementPolicy(action: .keep, attributes: roles)
        }
        return NameTable(policies)
    }()

    /// The policy of an element: kept, dropped (also every SVG and MathML element) or unwrapped, with the roles of
    /// the attributes a kept element may keep.
    static func policy(for element: HTMLNodeName) -> ElementPolicy {
        guard element.isHTML else { return ElementPolicy(action: .drop, attributes: noAttributes) }
        return elementPolicies[element.name] ?? ElementPolicy(action: .unwrap, attributes: noAttributes)
    }

    /// Whether a `data-*` or `aria-*` attribute name is acceptable.
    static func isCustomAttribute(_ name: String) -> Bool {
        guard name.hasPrefix("data-") || name.hasPrefix("aria-"), name.utf8.count > 5 else { return false }
        return name.utf8.allSatisfy(isPlainNameByte)
    }

    /// A lowercase letter, a digit, `-`, `_` or `.`: the bytes of an attribute name that every reader takes as
    /// written.
    static func isPlainNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x61...0x7A, 0x30...0x39, 0x2D, 0x5F, 0x2E: true
        default: false
        }
    }
}

/// An element's name and whether it is in the HTML namespace.
struct HTMLNodeName {
    var name: String
    var isHTML: Bool
}
