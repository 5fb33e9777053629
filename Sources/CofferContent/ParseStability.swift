import CofferHTML

/// A proof, without parsing again, that the HTML parser builds the sanitizer's output tree back from its
/// serialization.
///
/// The sanitizer copies what the profile keeps out of a parsed tree, so its output is well nested: every element is
/// closed by its own end tag. What can still move on a reparse is what the tree construction stage rearranges when
/// a start tag meets the wrong parent: a block element closes an open `<p>`, a table part outside its table is
/// dropped, other content inside a table is foster-parented, a `<li>` closes an open `<li>`, an `<a>` closes an open
/// `<a>`, a heading closes a heading. ``holds(for:)`` walks the tree once and accepts it only when no element, text
/// or attribute is in a place where one of those rules (or the input stream's preprocessing: CR, NUL) applies. It
/// is conservative: when it says no, ``MailSanitizer`` parses and sanitizes its output again until it settles, as it
/// did on every call before. The fuzz target and the idempotence tests (DOMPurify's and the leak vectors, the
/// html5lib tree-construction inputs) check that a tree it accepts is a fixed point.
enum ParseStability {
    /// Whether `fragment` (the sanitizer's output) is certain to parse back to itself.
    static func holds(for fragment: HTMLNode) -> Bool {
        var ancestors: [String] = []
        var stack: [(node: HTMLNode, depth: Int)] = fragment.children.reversed().map { ($0, 0) }
        guard !hasAdjacentTexts(fragment) else { return false }
        while let (node, depth) = stack.popLast() {
            ancestors.removeSubrange(depth...)
            switch node.kind {
            case .text:
                guard isStableText(node.data, parent: ancestors.last) else { return false }
            case .element:
                guard node.namespace == .html, attributesAreStable(node.attributes) else { return false }
                if node.name == "style" {
                    guard ancestors.last != "colgroup", isStableStyle(node) else { return false }
                    continue
                }
                guard MailProfile.keptElements.contains(node.name), isStable(node.name, under: ancestors) else {
                    return false
                }
                if voidElements.contains(node.name) {
                    guard node.children.isEmpty else { return false }
                    continue
                }
                guard !hasAdjacentTexts(node) else { return false }
                ancestors.append(node.name)
                for child in node.children.reversed() { stack.append((child, depth + 1)) }
            case .comment, .doctype, .document, .documentFragment:
                return false
            }
        }
        return true
    }

    /// Adjacent texts merge on a reparse (the sanitizer merges them as it copies).
    private static func hasAdjacentTexts(_ node: HTMLNode) -> Bool {
        let children = node.children
        return zip(children, children.dropFirst()).contains { $0.kind == .text && $1.kind == .text }
    }

    /// Where an element may stand: the tree construction rules a start tag can trigger, for the elements the profile
    /// keeps.
    private static func isStable(_ name: String, under ancestors: [String]) -> Bool {
        let parent = ancestors.last
        // Table parts only where a table puts them; inside a table, only table parts (else they are foster-parented).
        if let parent, let allowed = tableChildren[parent] { return allowed.contains(name) }
        if let required = tableParents[name] { return parent.map(required.contains) ?? false }
        if name == "rt" || name == "rp" { return parent == "ruby" }
        if headings.contains(name) && parent.map(headings.contains) == true { return false }
        if name == "a" && ancestors.contains("a") { return false }
        if closesParagraph.contains(name) && hasInButtonScope("p", ancestors) { return false }
        if name == "li" && closesListItem(["li"], ancestors, stoppers: listStoppers) { return false }
        if (name == "dd" || name == "dt") && closesListItem(["dd", "dt"], ancestors, stoppers: definitionStoppers) {
            return false
        }
        return true
    }

    private static func hasInButtonScope(_ target: String, _ ancestors: [String]) -> Bool {
        for name in ancestors.reversed() {
            if name == target { return true }
            if buttonScopeBoundaries.contains(name) { return false }
        }
        return false
    }

    /// The `li` (and `dd`/`dt`) start tag's loop: it closes a matching open element unless a special element other
    /// than `address`, `div` or `p` stands between. Only list and table elements stop it here, which is stricter.
    private static func closesListItem(_ targets: Set<String>, _ ancestors: [String], stoppers: Set<String>) -> Bool {
        for name in ancestors.reversed() {
            if targets.contains(name) { return true }
            if stoppers.contains(name) { return false }
        }
        return false
    }

    private static func isStableText(_ text: String, parent: String?) -> Bool {
        if text.isEmpty { return false }
        let inTable = parent.map { tableChildren[$0] != nil } ?? false
        for byte in text.utf8 {
            // The input stream turns CR into LF; the tree builder drops or replaces NUL.
            if byte == 0x0D || byte == 0x00 { return false }
            if inTable && !(byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0C) { return false }
        }
        return true
    }

    /// A `<style>` holds one text that cannot end the raw text early.
    private static func isStableStyle(_ style: HTMLNode) -> Bool {
        guard style.children.count <= 1 else { return false }
        guard let text = style.children.first else { return true }
        guard text.kind == .text else { return false }
        let bytes = Array(text.data.utf8)
        for (index, byte) in bytes.enumerated() {
            if byte == 0x0D || byte == 0x00 { return false }
            if byte == 0x3C && index + 1 < bytes.count && bytes[index + 1] == 0x2F { return false }
        }
        return true
    }

    /// Names a tokenizer reads back as written, each once, and values the input stream does not change.
    private static func attributesAreStable(_ attributes: [HTMLAttribute]) -> Bool {
        for (index, attribute) in attributes.enumerated() {
            guard attribute.namespace == nil, attribute.prefix == nil, !attribute.name.isEmpty else { return false }
            for byte in attribute.name.utf8 {
                switch byte {
                case 0x61...0x7A, 0x30...0x39, 0x2D, 0x5F, 0x2E: continue
                default: return false
                }
            }
            for byte in attribute.value.utf8 where byte == 0x0D || byte == 0x00 { return false }
            for other in attributes[..<index] where other.name == attribute.name { return false }
        }
        return true
    }

    private static let voidElements: Set<String> = ["area", "br", "col", "hr", "img", "source", "wbr"]
    private static let headings: Set<String> = ["h1", "h2", "h3", "h4", "h5", "h6"]
    /// What each table context keeps in place (`style` is processed by the "in head" rules there).
    private static let tableChildren: [String: Set<String>] = [
        "table": ["caption", "colgroup", "thead", "tbody", "tfoot", "style"],
        "thead": ["tr", "style"], "tbody": ["tr", "style"], "tfoot": ["tr", "style"],
        "tr": ["td", "th", "style"],
        "colgroup": ["col"],
    ]
    private static let tableParents: [String: Set<String>] = [
        "caption": ["table"], "colgroup": ["table"], "thead": ["table"], "tbody": ["table"], "tfoot": ["table"],
        "tr": ["thead", "tbody", "tfoot"], "td": ["tr"], "th": ["tr"], "col": ["colgroup"],
    ]
    /// Start tags that close a `<p>` in button scope (`table` only in no-quirks mode; counted always).
    private static let closesParagraph: Set<String> = [
        "address", "article", "aside", "blockquote", "center", "details", "dialog", "dir", "div", "dl", "fieldset",
        "figcaption", "figure", "footer", "header", "hgroup", "main", "menu", "nav", "ol", "p", "search", "section",
        "summary", "ul", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "listing", "form", "hr", "table", "li", "dd",
        "dt", "xmp", "plaintext",
    ]
    /// The kept elements that end the button scope.
    private static let buttonScopeBoundaries: Set<String> = ["button", "caption", "table", "td", "th"]
    private static let listStoppers: Set<String> = ["ul", "ol", "menu", "dir", "table", "td", "th", "caption"]
    private static let definitionStoppers: Set<String> = [
        "dl", "ul", "ol", "menu", "dir", "table", "td", "th", "caption",
    ]
}
