/// Serializes ``HTMLNode`` trees to HTML.
///
/// ``serialize(_:scripting:)`` implements the WHATWG "serialize an HTML fragment" algorithm
/// (the `innerHTML` getter), including the 2025 rule that escapes `<` and `>` in attribute
/// values. ``serializeTokens(_:options:)`` is a configurable token-stream serializer with the
/// options of html5lib's serializer (optional tag omission, attribute quoting, and so on).
public enum HTMLSerializer {
    /// Elements that have no end tag and no children.
    static let voidElements: Set<String> = [
        "area", "base", "basefont", "bgsound", "br", "col", "embed", "frame", "hr", "img", "input", "keygen", "link",
        "meta", "param", "source", "track", "wbr",
    ]

    /// Elements whose text children are serialized without escaping.
    static let rawTextElements: Set<String> = [
        "style", "script", "xmp", "iframe", "noembed", "noframes", "plaintext",
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
        return rawTextElements.contains(node.name) || (scripting && node.name == "noscript")
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
                out.append(contentsOf: [0x3C, 0x2F])
                out.append(contentsOf: element.name.utf8)
                out.append(0x3E)
            case .enter(let node, let rawText):
                switch node.kind {
                case .element:
                    out.append(0x3C)
                    out.append(contentsOf: node.name.utf8)
                    for attribute in node.attributes {
                        out.append(0x20)
                        appendAttributeName(attribute, to: &out)
                        out.append(contentsOf: [0x3D, 0x22])
                        escape(attribute.value, attributeMode: true, into: &out)
                        out.append(0x22)
                    }
                    out.append(0x3E)
                    if node.namespace == .html && voidElements.contains(node.name) { continue }
                    stack.append(.close(node))
                    let source =
                        node.namespace == .html && node.templateContents != nil
                        ? (node.templateContents ?? node) : node
                    let childRaw = isRawTextParent(node, scripting: scripting)
                    for child in source.children.reversed() { stack.append(.enter(child, rawText: childRaw)) }
                case .text:
                    if rawText {
                        out.append(contentsOf: node.data.utf8)
                    } else {
                        escape(node.data, attributeMode: false, into: &out)
                    }
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
        out.append(contentsOf: attribute.name.utf8)
    }

    /// Escapes text (`&`, U+00A0, `<`, `>`) or an attribute value (`&`, U+00A0, `"`, `<`, `>`).
    static func escape(_ string: String, attributeMode: Bool, into out: inout [UInt8]) {
        var previous: UInt8 = 0
        for byte in string.utf8 {
            switch byte {
            case 0x26: out.append(contentsOf: [0x26, 0x61, 0x6D, 0x70, 0x3B])
            case 0x3C: out.append(contentsOf: [0x26, 0x6C, 0x74, 0x3B])
            case 0x3E: out.append(contentsOf: [0x26, 0x67, 0x74, 0x3B])
            case 0x22 where attributeMode: out.append(contentsOf: [0x26, 0x71, 0x75, 0x6F, 0x74, 0x3B])
            case 0xA0 where previous == 0xC2:
                out.removeLast()
                out.append(contentsOf: [0x26, 0x6E, 0x62, 0x73, 0x70, 0x3B])
            default: out.append(byte)
            }
            previous = byte
        }
    }
}
