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
    /// Whether `tree` (the sanitizer's output) is certain to parse back to itself.
    static func holds(for tree: HTMLTree) -> Bool {
        guard !hasAdjacentTexts(tree, HTMLTree.root) else { return false }
        var scopes: [Scope] = [Scope()]
        var stack: [(node: HTMLTree.NodeID, depth: Int)] = []
        var names = SeenNames()
        func pushChildren(of node: HTMLTree.NodeID, depth: Int) {
            var child = tree.lastChild(node)
            while child != HTMLTree.none {
                stack.append((child, depth))
                child = tree.previousSibling(child)
            }
        }
        pushChildren(of: HTMLTree.root, depth: 0)
        while let (node, depth) = stack.popLast() {
            scopes.removeSubrange((depth + 1)...)
            let parent = scopes[depth]
            switch tree.kind(node) {
            case .text:
                guard isStableText(tree.text(node), inTable: parent.context != .none) else { return false }
            case .element:
                guard let info = elements[tree.name(node)] else { return false }
                guard attributesAreStable(tree.attributes(node), names: &names) else { return false }
                if tree.tag(node) == .style {
                    guard parent.context != .columnGroup, isStableStyle(tree, node) else { return false }
                    continue
                }
                guard parent.accepts(info) else { return false }
                if info.flags.contains(.void) {
                    guard tree.firstChild(node) == HTMLTree.none else { return false }
                    continue
                }
                guard !hasAdjacentTexts(tree, node) else { return false }
                scopes.append(parent.entering(info))
                pushChildren(of: node, depth: depth + 1)
            case .fragment:
                return false
            }
        }
        return true
    }

    /// Adjacent texts merge on a reparse (the sanitizer merges them as it copies).
    private static func hasAdjacentTexts(_ tree: HTMLTree, _ node: HTMLTree.NodeID) -> Bool {
        var child = tree.firstChild(node)
        var previousIsText = false
        while child != HTMLTree.none {
            let isText = tree.kind(child) == .text
            if isText && previousIsText { return true }
            previousIsText = isText
            child = tree.nextSibling(child)
        }
        return false
    }

    /// What an element's start tag does in tree construction, for the elements the profile keeps.
    struct Info {
        struct Flags: OptionSet {
            let rawValue: UInt16
            static let void = Flags(rawValue: 1 << 0)
            static let heading = Flags(rawValue: 1 << 1)
            /// Closes a `<p>` in button scope (`table` only in no-quirks mode; counted always).
            static let closesParagraph = Flags(rawValue: 1 << 2)
            static let paragraph = Flags(rawValue: 1 << 3)
            /// Ends the button scope.
            static let scopeBoundary = Flags(rawValue: 1 << 4)
            static let listItem = Flags(rawValue: 1 << 5)
            static let definitionItem = Flags(rawValue: 1 << 6)
            /// Stops the `li` start tag's search for an open `li` (only list and table elements: stricter than the
            /// parser, whose search stops at any special element other than `address`, `div` and `p`).
            static let listStopper = Flags(rawValue: 1 << 7)
            static let definitionStopper = Flags(rawValue: 1 << 8)
            static let anchor = Flags(rawValue: 1 << 9)
            static let ruby = Flags(rawValue: 1 << 10)
            static let rubyText = Flags(rawValue: 1 << 11)
        }
        var flags: Flags = []
        /// The table context it opens for its children.
        var context: TableContext = .none
        /// The table context it must stand in, if it is a table part.
        var requires: TableContext = .none
    }

    enum TableContext { case none, table, section, row, columnGroup }

    /// What the open elements above a node mean for its start tag, carried down the walk.
    struct Scope {
        var context: TableContext = .none
        var isHeading = false
        var isRuby = false
        var anchorOpen = false
        var paragraphInButtonScope = false
        var listItemOpen = false
        var definitionItemOpen = false

        /// Whether `child` stays where it is on a reparse.
        func accepts(_ child: Info) -> Bool {
            // Inside a table only its parts stay (anything else is foster-parented); a part stays only there.
            guard child.requires == context else { return false }
            if child.flags.contains(.rubyText) && !isRuby { return false }
            if child.flags.contains(.heading) && isHeading { return false }
            if child.flags.contains(.anchor) && anchorOpen { return false }
            if child.flags.contains(.closesParagraph) && paragraphInButtonScope { return false }
            if child.flags.contains(.listItem) && listItemOpen { return false }
            if child.flags.contains(.definitionItem) && definitionItemOpen { return false }
            return true
        }

        /// The scope of `child`'s children.
        func entering(_ child: Info) -> Scope {
            let flags = child.flags
            return Scope(
                context: child.context,
                isHeading: flags.contains(.heading),
                isRuby: flags.contains(.ruby),
                anchorOpen: anchorOpen || flags.contains(.anchor),
                paragraphInButtonScope: flags.contains(.paragraph)
                    || (paragraphInButtonScope && !flags.contains(.scopeBoundary)),
                listItemOpen: flags.contains(.listItem) || (listItemOpen && !flags.contains(.listStopper)),
                definitionItemOpen: flags.contains(.definitionItem)
                    || (definitionItemOpen && !flags.contains(.definitionStopper))
            )
        }
    }

    /// Every element the profile keeps, and `style`; any other name is refused.
    static let elements: NameTable<Info> = {
        var elements: [String: Info] = [:]
        for name in MailProfile.keptElements { elements[name] = Info() }
        // Names the profile does not keep (form, button, …) are listed for the rules' sake and stay refused.
        func add(_ names: [String], _ flags: Info.Flags) {
            for name in names { elements[name]?.flags.formUnion(flags) }
        }
        add(["area", "br", "col", "hr", "img", "source", "wbr"], .void)
        add(["h1", "h2", "h3", "h4", "h5", "h6"], .heading)
        add(
            [
                "address", "article", "aside", "blockquote", "center", "details", "dialog", "dir", "div", "dl",
                "fieldset", "figcaption", "figure", "footer", "header", "hgroup", "main", "menu", "nav", "ol", "p",
                "search", "section", "summary", "ul", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "listing", "form",
                "hr", "table", "li", "dd", "dt", "xmp", "plaintext",
            ],
            .closesParagraph
        )
        add(["p"], .paragraph)
        add(["button", "caption", "table", "td", "th"], .scopeBoundary)
        add(["li"], .listItem)
        add(["dd", "dt"], .definitionItem)
        add(["ul", "ol", "menu", "dir", "table", "td", "th", "caption"], .listStopper)
        add(["dl", "ul", "ol", "menu", "dir", "table", "td", "th", "caption"], .definitionStopper)
        add(["a"], .anchor)
        add(["ruby"], .ruby)
        add(["rt", "rp"], .rubyText)
        for (name, context) in [
            ("table", TableContext.table), ("thead", .section), ("tbody", .section), ("tfoot", .section),
            ("tr", .row), ("colgroup", .columnGroup),
        ] {
            elements[name]?.context = context
        }
        for (name, context) in [
            ("caption", TableContext.table), ("colgroup", .table), ("thead", .table), ("tbody", .table),
            ("tfoot", .table), ("tr", .section), ("td", .row), ("th", .row), ("col", .columnGroup),
        ] {
            elements[name]?.requires = context
        }
        // `style` is processed by the "in head" rules in a table context too; `colgroup` is checked on its own.
        elements["style"] = Info()
        return NameTable(elements)
    }()

    private static func isStableText(_ text: String, inTable: Bool) -> Bool {
        if text.isEmpty { return false }
        // In a table, only whitespace stays where it is (other text is foster-parented).
        if inTable { return text.utf8.allSatisfy { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0C } }
        // The input stream turns CR into LF; the tree builder drops or replaces NUL.
        return !ByteScan.contains(text, anyOf: 0x0D, 0, 0)
    }

    /// A `<style>` holds one text that cannot end the raw text early.
    private static func isStableStyle(_ tree: HTMLTree, _ style: HTMLTree.NodeID) -> Bool {
        let text = tree.firstChild(style)
        guard text != HTMLTree.none else { return true }
        guard tree.nextSibling(text) == HTMLTree.none, tree.kind(text) == .text else { return false }
        var previous: UInt8 = 0
        for byte in tree.text(text).utf8 {
            if byte == 0x0D || byte == 0x00 || (previous == 0x3C && byte == 0x2F) { return false }
            previous = byte
        }
        return true
    }

    /// Names a tokenizer reads back as written, each once, and values the input stream does not change (no CR, no
    /// NUL). `names` is scratch storage, reused from element to element.
    private static func attributesAreStable(_ attributes: ArraySlice<HTMLAttribute>, names: inout SeenNames) -> Bool {
        names.removeAll()
        // Read in place: a closure or a loop over copies would retain and release each attribute's strings.
        return attributes.withUnsafeBufferPointer { list in
            for index in list.indices {
                guard list[index].namespace == nil, list[index].prefix == nil, isPlainName(list[index].name),
                    !ByteScan.contains(list[index].value, anyOf: 0x0D, 0, 0),
                    list.count == 1 || names.insert(list[index].name)
                else { return false }
            }
            return true
        }
    }

    /// A nonempty name of ``MailProfile/isPlainNameByte(_:)``: one the tokenizer reads back unchanged.
    private static func isPlainName(_ name: String) -> Bool {
        var name = name
        return name.withUTF8 { !$0.isEmpty && $0.allSatisfy(MailProfile.isPlainNameByte) }
    }
}
