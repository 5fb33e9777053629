/// Serializes ``HTMLNode`` trees to HTML.
///
/// ``serialize(_:scripting:)`` implements the WHATWG "serialize an HTML fragment" algorithm
/// (the `innerHTML` getter), including the 2025 rule that escapes `<` and `>` in attribute
/// values. ``serializeTokens(_:options:)`` is a configurable token-stream serializer with the
/// options of html5lib's serializer (optional tag omission, attribute quoting, and so on).
public enum HTMLSerializer {
    /// Elements that have no end tag and no children.
    static let voidElements: HTMLTagSet = [
        .area, .base, .basefont, .bgsound, .br, .col, .embed, .frame, .hr, .img, .input, .keygen, .link,
        .meta, .param, .source, .track, .wbr,
    ]

    /// Elements whose text children are serialized without escaping.
    static let rawTextElements: HTMLTagSet = [
        .style, .script, .xmp, .iframe, .noembed, .noframes, .plaintext,
    ]

    /// Serializes the children of `node` (for a `template`, the children of its contents).
    ///
    /// - Parameters:
    ///   - node: A document, fragment or element.
    ///   - scripting: Whether `noscript` text is raw, as when the document was parsed with scripting.
    /// - Returns: The HTML serialization.
    public static func serialize(_ node: HTMLNode, scripting: Bool = false) -> String {
        var out: [UInt8] = []
        let root =
            node.kind == .element && node.namespace == .html && node.templateContents != nil
            ? (node.templateContents ?? node) : node
        serializeChildren(of: root, into: &out, scripting: scripting)
        return String(decoding: out, as: UTF8.self)
    }

    /// Serializes `node` itself together with its descendants (the `outerHTML` getter).
    public static func serializeOuter(_ node: HTMLNode, scripting: Bool = false) -> String {
        let wrapper = HTMLNode.documentFragment()
        var out: [UInt8] = []
        serializeNodes([node], parentForRawText: wrapper, into: &out, scripting: scripting)
        return String(decoding: out, as: UTF8.self)
    }

    private static func serializeChildren(of node: HTMLNode, into out: inout [UInt8], scripting: Bool) {
        serializeNodes(node.children, parentForRawText: node, into: &out, scripting: scripting)
    }

    private enum Step {
        case enter(HTMLNode, rawText: Bool)
        case close(HTMLNode)
    }

    private static func isRawTextParent(_ node: HTMLNode, scripting: Bool) -> Bool {
        guard node.kind == .element && node.namespace == .html else { return false }
        return rawTextElements.contains(node.id) || (scripting && node.id == .noscript)
    }

    /// Serializes `nodes` iteratively, so that arbitrarily deep trees are safe.
    private static func serializeNodes(
        _ nodes: [HTMLNode],
        parentForRawText parent: HTMLNode,
        into out: inout [UInt8],
        scripting: Bool
    ) {
        let raw = isRawTextParent(parent, scripting: scripting)
        var stack: [Step] = nodes.reversed().map { .enter($0, rawText: raw) }
        while let step = stack.popLast() {
            switch step {
            case .close(let element):
                appendEndTag(element.name, to: &out)
            case .enter(let node, let rawText):
                switch node.kind {
                case .element:
                    appendStartTag(node.name, attributes: node.attributes[...], to: &out)
                    if node.namespace == .html && voidElements.contains(node.id) { continue }
                    stack.append(.close(node))
                    let source =
                        node.namespace == .html && node.templateContents != nil
                        ? (node.templateContents ?? node) : node
                    let childRaw = isRawTextParent(node, scripting: scripting)
                    for child in source.children.reversed() { stack.append(.enter(child, rawText: childRaw)) }
                case .text:
                    appendText(node.data, raw: rawText, to: &out)
                case .comment:
                    out.append(contentsOf: Array("<!--".utf8))
                    out.append(contentsOf: node.data.utf8)
                    out.append(contentsOf: Array("-->".utf8))
                case .doctype:
                    out.append(contentsOf: Array("<!DOCTYPE ".utf8))
                    out.append(contentsOf: node.name.utf8)
                    out.append(0x3E)
                case .document, .documentFragment:
                    for child in node.children.reversed() { stack.append(.enter(child, rawText: false)) }
                }
            }
        }
    }

    /// Serializes an ``HTMLTree`` (whose elements are all in the HTML namespace), by the rules of
    /// ``serialize(_:scripting:)`` without scripting: the same bytes as the same tree of ``HTMLNode``s.
    package static func serialize(_ tree: HTMLTree) -> String {
        enum Step {
            case enter(HTMLTree.NodeID, rawText: Bool)
            case close(HTMLTree.NodeID)
        }
        var out: [UInt8] = []
        var stack: [Step] = []
        func pushChildren(of node: HTMLTree.NodeID, rawText: Bool) {
            var child = tree.lastChild(node)
            while child != HTMLTree.none {
                stack.append(.enter(child, rawText: rawText))
                child = tree.previousSibling(child)
            }
        }
        pushChildren(of: HTMLTree.root, rawText: false)
        while let step = stack.popLast() {
            switch step {
            case .close(let element):
                appendEndTag(tree.name(element), to: &out)
            case .enter(let node, let rawText):
                switch tree.kind(node) {
                case .element:
                    appendStartTag(tree.name(node), attributes: tree.attributes(node), to: &out)
                    let tag = tree.tag(node)
                    if voidElements.contains(tag) { continue }
                    stack.append(.close(node))
                    pushChildren(of: node, rawText: rawTextElements.contains(tag))
                case .text:
                    appendText(tree.text(node), raw: rawText, to: &out)
                case .fragment:
                    pushChildren(of: node, rawText: false)
                }
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    // The pieces both tree walks write.

    private static func appendStartTag(
        _ name: String,
        attributes: ArraySlice<HTMLAttribute>,
        to out: inout [UInt8]
    ) {
        out.append(0x3C)
        appendUTF8(name, to: &out)
        // Read in place: a loop over copies would retain and release each attribute's strings.
        attributes.withUnsafeBufferPointer { list in
            for index in list.indices {
                out.append(0x20)
                appendAttributeName(list[index], to: &out)
                out.append(contentsOf: [0x3D, 0x22])
                escape(list[index].value, attributeMode: true, into: &out)
                out.append(0x22)
            }
        }
        out.append(0x3E)
    }

    private static func appendEndTag(_ name: String, to out: inout [UInt8]) {
        out.append(contentsOf: [0x3C, 0x2F])
        appendUTF8(name, to: &out)
        out.append(0x3E)
    }

    /// Appends a string's bytes in one copy (appending its `utf8` view goes through the generic sequence path).
    private static func appendUTF8(_ string: String, to out: inout [UInt8]) {
        var string = string
        string.withUTF8 { out.append(contentsOf: $0) }
    }

    private static func appendText(_ data: String, raw: Bool, to out: inout [UInt8]) {
        if raw {
            appendUTF8(data, to: &out)
        } else {
            escape(data, attributeMode: false, into: &out)
        }
    }

    private static func appendAttributeName(_ attribute: HTMLAttribute, to out: inout [UInt8]) {
        switch attribute.namespace {
        case .xml:
            out.append(contentsOf: Array("xml:".utf8))
        case .xmlns:
            if attribute.name != "xmlns" { out.append(contentsOf: Array("xmlns:".utf8)) }
        case .xlink:
            out.append(contentsOf: Array("xlink:".utf8))
        default:
            if let prefix = attribute.prefix {
                out.append(contentsOf: prefix.utf8)
                out.append(0x3A)
            }
        }
        appendUTF8(attribute.name, to: &out)
    }

    private enum Escapes {
        static let amp = Array("&amp;".utf8)
        static let lt = Array("&lt;".utf8)
        static let gt = Array("&gt;".utf8)
        static let quot = Array("&quot;".utf8)
        static let nbsp = Array("&nbsp;".utf8)
    }

    /// Escapes text (`&`, U+00A0, `<`, `>`) or an attribute value (`&`, U+00A0, `"`, `<`, `>`).
    ///
    /// Runs of bytes that need no escape are appended in one copy each: most text and attribute values in mail have
    /// none of these bytes.
    static func escape(_ string: String, attributeMode: Bool, into out: inout [UInt8]) {
        var string = string
        string.withUTF8 { bytes in
            var start = 0
            var index = 0
            while index < bytes.count {
                let byte = bytes[index]
                let replacement: [UInt8]
                switch byte {
                case 0x26: replacement = Escapes.amp
                case 0x3C: replacement = Escapes.lt
                case 0x3E: replacement = Escapes.gt
                case 0x22 where attributeMode: replacement = Escapes.quot
                case 0xC2 where index + 1 < bytes.count && bytes[index + 1] == 0xA0: replacement = Escapes.nbsp
                default:
                    index += 1
                    continue
                }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<index]))
                out.append(contentsOf: replacement)
                index += byte == 0xC2 ? 2 : 1
                start = index
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<index]))
        }
    }
}
