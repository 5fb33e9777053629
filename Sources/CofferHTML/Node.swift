/// A namespace an element or attribute can live in.
public enum HTMLNamespace: UInt8, Sendable, Hashable {
    /// The HTML namespace, `http://www.w3.org/1999/xhtml`.
    case html
    /// The SVG namespace, `http://www.w3.org/2000/svg`.
    case svg
    /// The MathML namespace, `http://www.w3.org/1998/Math/MathML`.
    case mathml
    /// The XLink namespace, used by adjusted foreign attributes such as `xlink:href`.
    case xlink
    /// The XML namespace, used by `xml:lang` and `xml:space` on foreign elements.
    case xml
    /// The XMLNS namespace, used by `xmlns` and `xmlns:xlink` on foreign elements.
    case xmlns

    /// The namespace URI.
    public var uri: String {
        switch self {
        case .html: return "http://www.w3.org/1999/xhtml"
        case .svg: return "http://www.w3.org/2000/svg"
        case .mathml: return "http://www.w3.org/1998/Math/MathML"
        case .xlink: return "http://www.w3.org/1999/xlink"
        case .xml: return "http://www.w3.org/XML/1998/namespace"
        case .xmlns: return "http://www.w3.org/2000/xmlns/"
        }
    }
}

/// One attribute of an element, in source order.
public struct HTMLAttribute: Hashable, Sendable {
    /// The local name (lowercased for HTML elements; case-adjusted for SVG and MathML).
    public var name: String
    /// The attribute value with character references already decoded.
    public var value: String
    /// The namespace, set only for adjusted foreign attributes (`xlink:href`, `xml:lang`, `xmlns`).
    public var namespace: HTMLNamespace?
    /// The prefix of an adjusted foreign attribute (`xlink`, `xml` or `xmlns`), if any.
    public var prefix: String?

    /// Creates an attribute.
    public init(name: String, value: String, namespace: HTMLNamespace? = nil, prefix: String? = nil) {
        self.name = name
        self.value = value
        self.namespace = namespace
        self.prefix = prefix
    }

    /// The qualified name as serialized: `prefix:name`, or `name` without a prefix.
    public var qualifiedName: String {
        if let prefix { return prefix + ":" + name }
        return name
    }
}

/// The document's compatibility mode, decided by the DOCTYPE.
public enum HTMLQuirksMode: Sendable, Hashable {
    /// Standards mode.
    case noQuirks
    /// Limited-quirks mode.
    case limitedQuirks
    /// Quirks mode.
    case quirks
}

/// A node of the mutable DOM tree built by ``HTMLParser``.
///
/// One class covers every node kind; which properties are meaningful depends on ``kind``.
/// Children are ordered; ``parent`` is a back reference that a parent clears when it lets a
/// child go. Releasing a very deep tree is
/// iterative, so dropping a document with 100,000 nested elements cannot overflow the stack.
public final class HTMLNode {
    /// The kinds of node.
    public enum Kind: Sendable, Hashable {
        /// A document, the root of a parsed document.
        case document
        /// A document fragment: the root of a parsed fragment, or a template's contents.
        case documentFragment
        /// A DOCTYPE.
        case doctype
        /// An element.
        case element
        /// A text node.
        case text
        /// A comment.
        case comment
    }

    /// The kind of this node.
    public let kind: Kind
    /// The element's local name, or the DOCTYPE's name; empty for other kinds.
    public var name: String {
        didSet { id = kind == .element ? HTMLTagID(name: name) : .other }
    }
    /// The interned ``name`` of an element (``HTMLTagID/other`` for other kinds and for names outside the table).
    public private(set) var id: HTMLTagID
    /// The element's namespace (``HTMLNamespace/html`` for non-elements).
    public var namespace: HTMLNamespace
    /// The element's attributes in source order.
    public var attributes: [HTMLAttribute]
    /// The character data of a text or comment node.
    public var data: String
    /// The DOCTYPE's public identifier, if present.
    public var publicId: String?
    /// The DOCTYPE's system identifier, if present.
    public var systemId: String?
    /// The contents of a `template` element in the HTML namespace: a document fragment.
    public var templateContents: HTMLNode?
    /// The compatibility mode of a document node.
    public var quirksMode: HTMLQuirksMode = .noQuirks
    /// The parent node, or `nil` for a root or a detached node.
    ///
    /// Stored unowned: a parent keeps its children alive, clears their back references when
    /// they are removed, and clears them all when it is deinitialised, so the reference is
    /// never dangling. (A `weak` reference would move every node's reference counts to a
    /// side table and slow parsing down considerably.)
    public var parent: HTMLNode? { parentStorage }
    private unowned(unsafe) var parentStorage: HTMLNode?
    /// The child nodes in order.
    public private(set) var children: [HTMLNode] = []

    init(
        kind: Kind,
        name: String = "",
        id: HTMLTagID? = nil,
        namespace: HTMLNamespace = .html,
        attributes: [HTMLAttribute] = [],
        data: String = ""
    ) {
        self.kind = kind
        self.name = name
        self.id = kind == .element ? id ?? HTMLTagID(name: name) : .other
        self.namespace = namespace
        self.attributes = attributes
        self.data = data
    }

    deinit {
        // Tear the subtree down iteratively so that a deeply nested tree cannot overflow the stack through recursive
        // deinitialisation: each node's children are taken out of it before it is released, so its own deinit
        // returns at once. The children arrays are moved whole (no retain and release per child), and a back
        // reference is cleared only on a node that outlives this teardown (held elsewhere): the others are destroyed
        // with their parent.
        if children.isEmpty && templateContents == nil { return }
        var batches: [[HTMLNode]] = []
        batches.append(children)
        children = []
        if let contents = templateContents {
            batches.append([contents])
            templateContents = nil
        }
        while var batch = batches.popLast() {
            while var node = batch.popLast() {
                guard isKnownUniquelyReferenced(&node) else {
                    node.parentStorage = nil
                    continue
                }
                if !node.children.isEmpty {
                    batches.append(node.children)
                    node.children = []
                }
                if let contents = node.templateContents {
                    batches.append([contents])
                    node.templateContents = nil
                }
            }
        }
    }

    /// Creates a document node.
    public static func document() -> HTMLNode { HTMLNode(kind: .document) }

    /// Creates a document fragment node.
    public static func documentFragment() -> HTMLNode { HTMLNode(kind: .documentFragment) }

    /// Creates an element; a `template` in the HTML namespace gets empty template contents.
    public static func element(
        _ name: String,
        namespace: HTMLNamespace = .html,
        attributes: [HTMLAttribute] = []
    ) -> HTMLNode {
        element(HTMLTag(name: name), namespace: namespace, attributes: attributes)
    }

    /// Creates an element in `namespace` with the name of `node` (an element), reusing its interned id.
    public static func element(
        namedAs node: HTMLNode,
        namespace: HTMLNamespace = .html,
        attributes: [HTMLAttribute] = []
    ) -> HTMLNode {
        let tag = HTMLTag(name: node.name, id: node.id)
        return element(tag, namespace: namespace, attributes: attributes)
    }

    /// Creates an element named as `tag` (whose id is already interned); a `template` in the HTML namespace gets
    /// empty template contents.
    static func element(_ tag: HTMLTag, namespace: HTMLNamespace, attributes: [HTMLAttribute]) -> HTMLNode {
        let node = HTMLNode(kind: .element, name: tag.name, id: tag.id, namespace: namespace, attributes: attributes)
        if namespace == .html && tag.id == .template {
            node.templateContents = HTMLNode(kind: .documentFragment)
        }
        return node
    }

    /// Creates a text node.
    public static func text(_ data: String) -> HTMLNode { HTMLNode(kind: .text, data: data) }

    /// Creates a comment node.
    public static func comment(_ data: String) -> HTMLNode { HTMLNode(kind: .comment, data: data) }

    /// Creates a DOCTYPE node.
    public static func doctype(_ name: String, publicId: String? = nil, systemId: String? = nil) -> HTMLNode {
        let node = HTMLNode(kind: .doctype, name: name)
        node.publicId = publicId
        node.systemId = systemId
        return node
    }

    /// Whether this is an element with the given local name in the given namespace.
    public func isElement(_ name: String, in namespace: HTMLNamespace = .html) -> Bool {
        kind == .element && self.namespace == namespace && self.name == name
    }

    /// Whether this is an element with the given interned name (not ``HTMLTagID/other``) in the given namespace.
    public func isElement(_ id: HTMLTagID, in namespace: HTMLNamespace = .html) -> Bool {
        kind == .element && self.namespace == namespace && self.id == id
    }

    /// The value of the attribute with the given local name and no namespace, if present.
    public func attribute(_ name: String) -> String? {
        for attribute in attributes where attribute.name == name && attribute.namespace == nil {
            return attribute.value
        }
        return nil
    }

    /// The first child, if any.
    public var firstChild: HTMLNode? { children.first }

    /// The last child, if any.
    public var lastChild: HTMLNode? { children.last }

    /// The position of `child` among this node's children.
    public func index(of child: HTMLNode) -> Int? {
        // Searching from the end is fastest for the tree builder, which works near the end.
        var index = children.count - 1
        while index >= 0 {
            if children[index] === child { return index }
            index -= 1
        }
        return nil
    }

    /// Appends `child`, detaching it from its current parent first.
    public func appendChild(_ child: HTMLNode) {
        child.remove()
        child.parentStorage = self
        children.append(child)
    }

    /// Inserts `child` before `reference` (appends when `reference` is `nil` or not a child).
    public func insertChild(_ child: HTMLNode, before reference: HTMLNode?) {
        child.remove()
        guard let reference, let index = index(of: reference) else {
            child.parentStorage = self
            children.append(child)
            return
        }
        child.parentStorage = self
        children.insert(child, at: index)
    }

    /// Inserts `child` at position `index` among the children (clamped to the valid range).
    public func insertChild(_ child: HTMLNode, at index: Int) {
        child.remove()
        child.parentStorage = self
        children.insert(child, at: max(0, min(index, children.count)))
    }

    /// Removes `child` from this node's children.
    public func removeChild(_ child: HTMLNode) {
        guard child.parent === self, let index = index(of: child) else { return }
        children.remove(at: index)
        child.parentStorage = nil
    }

    /// Removes all children.
    public func removeAllChildren() {
        for child in children { child.parentStorage = nil }
        children.removeAll()
    }

    /// Detaches this node from its parent.
    public func remove() {
        guard let parent else { return }
        parent.removeChild(self)
    }

    /// Moves all children of this node to the end of `newParent`'s children.
    public func moveChildren(to newParent: HTMLNode) {
        let moving = children
        children = []
        for child in moving {
            child.parentStorage = newParent
            newParent.children.append(child)
        }
    }

    /// All descendants in document order (pre-order), collected without recursion. Template
    /// contents are not included; walk ``templateContents`` separately.
    public var descendants: [HTMLNode] {
        var result: [HTMLNode] = []
        var stack: [HTMLNode] = children.reversed()
        while let node = stack.popLast() {
            result.append(node)
            stack.append(contentsOf: node.children.reversed())
        }
        return result
    }

    /// The concatenated data of all descendant text nodes, in document order.
    public var textContent: String {
        var result = ""
        var stack: [HTMLNode] = [self]
        while let node = stack.popLast() {
            if node.kind == .text {
                result += node.data
            } else {
                stack.append(contentsOf: node.children.reversed())
            }
        }
        return result
    }

    /// A shallow copy: same kind, name, namespace, attributes and data, without children.
    public func cloneShallow() -> HTMLNode {
        let node = HTMLNode(kind: kind, name: name, id: id, namespace: namespace, attributes: attributes, data: data)
        node.publicId = publicId
        node.systemId = systemId
        node.quirksMode = quirksMode
        if templateContents != nil { node.templateContents = HTMLNode(kind: .documentFragment) }
        return node
    }
}
