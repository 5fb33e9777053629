/// A tree of HTML elements and texts held in arrays and addressed by index.
///
/// The sanitizer builds its output here: the output is written once, proven stable and serialized, and a tree of
/// ``HTMLNode`` objects cost an allocation, a retain and a release per node at each of those steps and one object
/// freed per node at the end. Here a node is an index; its links and kind are plain values, read without reference
/// counting, and dropping the tree frees four arrays. Every element is in the HTML namespace (the sanitizer keeps no
/// other). It is the first step of the arena of nodes that the parser's tree is to move to (CONTRIBUTING.md).
package struct HTMLTree: Sendable {
    /// A node: its index in the tree's arrays.
    package typealias NodeID = Int32

    /// No node (the link of a node without that neighbour).
    package static let none: NodeID = -1

    /// The root, a document fragment.
    package static let root: NodeID = 0

    /// The kinds of node.
    package enum Kind: UInt8, Sendable {
        /// The root.
        case fragment
        /// An element in the HTML namespace.
        case element
        /// A text.
        case text
    }

    /// A node's kind, interned name and links: trivially copyable.
    struct Links: Sendable {
        var kind: Kind
        var tag: HTMLTagID
        var parent: NodeID
        var firstChild: NodeID = HTMLTree.none
        var lastChild: NodeID = HTMLTree.none
        var previous: NodeID = HTMLTree.none
        var next: NodeID = HTMLTree.none
        /// Where an element's attributes start in `attributeStore`, and how many there are.
        var attributeStart: Int32 = 0
        var attributeCount: Int32 = 0
    }

    private var links: [Links]
    /// An element's local name; empty for the other kinds.
    private var names: [String]
    /// Every element's attributes, in order, one element's after another's: an element's are a range here, not an
    /// array of its own (one allocation per element fewer).
    private var attributeStore: [HTMLAttribute] = []
    /// A text's data; empty for the other kinds.
    private var texts: [String]

    /// A tree holding only its root.
    package init() {
        links = [Links(kind: .fragment, tag: .other, parent: Self.none)]
        names = [""]
        texts = [""]
    }

    /// The kind of `node`.
    package func kind(_ node: NodeID) -> Kind { links[Int(node)].kind }

    /// The interned name of an element (``HTMLTagID/other`` for names outside the table and for other kinds).
    package func tag(_ node: NodeID) -> HTMLTagID { links[Int(node)].tag }

    /// The local name of an element; empty for other kinds.
    package func name(_ node: NodeID) -> String { names[Int(node)] }

    /// The attributes of an element.
    package func attributes(_ node: NodeID) -> ArraySlice<HTMLAttribute> {
        let record = links[Int(node)]
        return attributeStore[Int(record.attributeStart)..<Int(record.attributeStart + record.attributeCount)]
    }

    /// The data of a text.
    package func text(_ node: NodeID) -> String { texts[Int(node)] }

    /// The parent of `node`, or ``none`` for the root and a removed node.
    package func parent(_ node: NodeID) -> NodeID { links[Int(node)].parent }

    /// The first child of `node`, or ``none``.
    package func firstChild(_ node: NodeID) -> NodeID { links[Int(node)].firstChild }

    /// The last child of `node`, or ``none``.
    package func lastChild(_ node: NodeID) -> NodeID { links[Int(node)].lastChild }

    /// The next sibling of `node`, or ``none``.
    package func nextSibling(_ node: NodeID) -> NodeID { links[Int(node)].next }

    /// The previous sibling of `node`, or ``none``.
    package func previousSibling(_ node: NodeID) -> NodeID { links[Int(node)].previous }

    /// Appends an element named `name` (interned as `tag`) with `attributes` as the last child of `parent`; more
    /// attributes can follow through ``appendAttribute(_:to:)`` until the next node is appended.
    @discardableResult
    package mutating func appendElement(
        _ name: String,
        tag: HTMLTagID,
        attributes: [HTMLAttribute] = [],
        to parent: NodeID
    ) -> NodeID {
        let record = Links(
            kind: .element,
            tag: tag,
            parent: parent,
            attributeStart: Int32(attributeStore.count),
            attributeCount: Int32(attributes.count)
        )
        attributeStore.append(contentsOf: attributes)
        return append(record, name: name, text: "")
    }

    /// Appends `attribute` to `element`, which must be the node appended last.
    package mutating func appendAttribute(_ attribute: HTMLAttribute, to element: NodeID) {
        precondition(Int(element) == links.count - 1 && links[Int(element)].kind == .element, "not the last element")
        attributeStore.append(attribute)
        links[Int(element)].attributeCount += 1
    }

    /// Appends a text as the last child of `parent` (a text after a text stays a second node: see ``appendData``).
    @discardableResult
    package mutating func appendText(_ text: String, to parent: NodeID) -> NodeID {
        append(Links(kind: .text, tag: .other, parent: parent), name: "", text: text)
    }

    /// Appends `data` to the text `node`.
    package mutating func appendData(_ data: String, to node: NodeID) { texts[Int(node)] += data }

    /// Replaces the data of the text `node`.
    package mutating func setText(_ data: String, of node: NodeID) { texts[Int(node)] = data }

    /// Takes `node` (and its subtree) out of its parent's children; it stays in the arrays, out of reach.
    package mutating func remove(_ node: NodeID) {
        let record = links[Int(node)]
        guard record.parent != Self.none else { return }
        if record.previous != Self.none {
            links[Int(record.previous)].next = record.next
        } else {
            links[Int(record.parent)].firstChild = record.next
        }
        if record.next != Self.none {
            links[Int(record.next)].previous = record.previous
        } else {
            links[Int(record.parent)].lastChild = record.previous
        }
        links[Int(node)].parent = Self.none
        links[Int(node)].previous = Self.none
        links[Int(node)].next = Self.none
    }

    private mutating func append(_ record: Links, name: String, text: String) -> NodeID {
        let node = NodeID(links.count)
        var record = record
        let previous = links[Int(record.parent)].lastChild
        record.previous = previous
        links.append(record)
        names.append(name)
        texts.append(text)
        if previous != Self.none {
            links[Int(previous)].next = node
        } else {
            links[Int(record.parent)].firstChild = node
        }
        links[Int(record.parent)].lastChild = node
        return node
    }
}
