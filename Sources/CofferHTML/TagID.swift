/// Interned element names: one small integer for each name that the parser, the serializer and the sanitizer treat
/// specially, so that their checks compare integers instead of strings (html5ever's atoms do the same).
///
/// The id is a function of the name alone, not of the namespace: an SVG `title` and an HTML `title` share
/// ``title``, and every check pairs the id with the namespace as it paired the name before. A name outside the
/// table is ``other``; code that must tell two such names apart compares the names themselves.
public enum HTMLTagID: UInt8, Sendable, Hashable, CaseIterable {
    /// A name outside the table.
    case other
    /// The names in alphabetical order; each case is spelled as its name, except ``annotationXML`` for
    /// `annotation-xml`.
    case a, address, annotationXML, applet, area, article, aside, b, base, basefont, bgsound, big, blockquote, body, br
    case button, caption, center, code, col, colgroup, dd, desc, details, dialog, dir, div, dl, dt, em, embed, fieldset
    case figcaption, figure, font, footer, foreignObject, form, frame, frameset, h1, h2, h3, h4, h5, h6, head, header
    case hgroup, hr, html, i, iframe, image, img, input, keygen, li, link, listing, main, malignmark, marquee, math
    case menu, meta, mglyph, mi, mn, mo, ms, mtext, nav, nobr, noembed, noframes, noscript, object, ol, optgroup, option
    case p, param, plaintext, pre, rb, rp, rt, rtc, ruby, s, script, search, section, select, selectedcontent, small
    case source, span, strike, strong, style, sub, summary, sup, svg, table, tbody, td, template, textarea, tfoot, th
    case thead, title, tr, track, tt, u, ul, `var`, wbr, xmp

    /// The id of `name` (case-sensitive, as element names are stored: lowercase for HTML, adjusted for SVG).
    public init(name: String) {
        self = Self.byName[name] ?? .other
    }

    /// The name this id stands for; empty for ``other``.
    public var name: String { Self.names[Int(rawValue)] }

    /// Names in raw-value order.
    private static let names: [String] = [
        "",
        "a", "address", "annotation-xml", "applet", "area", "article", "aside", "b", "base", "basefont", "bgsound",
        "big", "blockquote", "body", "br", "button", "caption", "center", "code", "col", "colgroup", "dd", "desc",
        "details", "dialog", "dir", "div", "dl", "dt", "em", "embed", "fieldset", "figcaption", "figure", "font",
        "footer", "foreignObject", "form", "frame", "frameset", "h1", "h2", "h3", "h4", "h5", "h6", "head",
        "header", "hgroup", "hr", "html", "i", "iframe", "image", "img", "input", "keygen", "li", "link", "listing",
        "main", "malignmark", "marquee", "math", "menu", "meta", "mglyph", "mi", "mn", "mo", "ms", "mtext", "nav",
        "nobr", "noembed", "noframes", "noscript", "object", "ol", "optgroup", "option", "p", "param", "plaintext",
        "pre", "rb", "rp", "rt", "rtc", "ruby", "s", "script", "search", "section", "select", "selectedcontent",
        "small", "source", "span", "strike", "strong", "style", "sub", "summary", "sup", "svg", "table", "tbody",
        "td", "template", "textarea", "tfoot", "th", "thead", "title", "tr", "track", "tt", "u", "ul", "var", "wbr",
        "xmp",
    ]

    private static let byName = NameTable(allCases.lazy.filter { $0 != .other }.map { ($0.name, $0) })
}

/// A set of ``HTMLTagID``s as a bit set: membership is one shift and one mask.
struct HTMLTagSet: ExpressibleByArrayLiteral, Sendable {
    private var low: UInt64 = 0
    private var middle: UInt64 = 0
    private var high: UInt64 = 0
    private var top: UInt64 = 0

    init(arrayLiteral elements: HTMLTagID...) {
        for element in elements { insert(element) }
    }

    mutating func insert(_ id: HTMLTagID) {
        let bit = UInt64(1) << UInt64(id.rawValue & 63)
        switch id.rawValue >> 6 {
        case 0: low |= bit
        case 1: middle |= bit
        case 2: high |= bit
        default: top |= bit
        }
    }

    /// Whether `id` is in the set; ``HTMLTagID/other`` never is.
    @inline(__always) func contains(_ id: HTMLTagID) -> Bool {
        let bit = UInt64(1) << UInt64(id.rawValue & 63)
        switch id.rawValue >> 6 {
        case 0: return low & bit != 0
        case 1: return middle & bit != 0
        case 2: return high & bit != 0
        default: return top & bit != 0
        }
    }
}
