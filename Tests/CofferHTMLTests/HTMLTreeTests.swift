import Foundation
import Testing

@testable import CofferHTML

/// ``HTMLTree``, the sanitizer's output: its links, and a serialization byte for byte that of the same tree of
/// ``HTMLNode``s.
@Suite struct HTMLTreeTests {
    /// The HTML elements and texts of `root`'s subtree, copied into a new fragment and into an ``HTMLTree`` (what
    /// else is there, comments and foreign elements, is left out of both).
    static func copies(of root: HTMLNode) -> (nodes: HTMLNode, tree: HTMLTree) {
        let fragment = HTMLNode.documentFragment()
        var tree = HTMLTree()
        var stack: [(HTMLNode, HTMLNode, HTMLTree.NodeID)] = root.children.reversed().map {
            ($0, fragment, HTMLTree.root)
        }
        while let (node, parent, treeParent) = stack.popLast() {
            if node.kind == .element && node.namespace == .html && node.templateContents == nil {
                let element = HTMLNode.element(namedAs: node, attributes: node.attributes)
                parent.appendChild(element)
                let inTree = tree.appendElement(node.name, tag: node.id, attributes: node.attributes, to: treeParent)
                stack.append(contentsOf: node.children.reversed().map { ($0, element, inTree) })
            } else if node.kind == .text {
                parent.appendChild(HTMLNode.text(node.data))
                tree.appendText(node.data, to: treeParent)
            }
        }
        return (fragment, tree)
    }

    /// Every html5lib tree-construction input's body: voids, raw text, escapes in texts and attribute values.
    @Test func serializesAsTheSameTreeOfNodes() throws {
        let folder = TestPaths.html5lib.appendingPathComponent("tree-construction")
        var compared = 0
        for file in try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        where file.hasSuffix(".dat") {
            let text = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
            for section in text.components(separatedBy: "#data\n").dropFirst() {
                guard let data = section.components(separatedBy: "\n#errors").first else { continue }
                let document = HTMLParser.parseDocument(data)
                for html in document.children where html.isElement(.html) {
                    for part in html.children where part.isElement(.body) || part.isElement(.head) {
                        let (nodes, tree) = Self.copies(of: part)
                        #expect(HTMLSerializer.serialize(tree) == HTMLSerializer.serialize(nodes), "\(data)")
                        compared += 1
                    }
                }
            }
        }
        #expect(compared > 1_500)
    }

    /// An element's attributes are a range of one shared array: those appended after the element belong to it, and
    /// the next element's start after them.
    @Test func attributesAppendedLaterStayWithTheirElement() {
        var tree = HTMLTree()
        let first = tree.appendElement("a", tag: .a, attributes: [HTMLAttribute(name: "href", value: "#x")], to: 0)
        tree.appendAttribute(HTMLAttribute(name: "title", value: "t"), to: first)
        let text = tree.appendText("x", to: first)
        let second = tree.appendElement("b", tag: .b, to: 0)
        tree.appendAttribute(HTMLAttribute(name: "class", value: "c"), to: second)
        let third = tree.appendElement("i", tag: .i, to: 0)
        #expect(
            Array(tree.attributes(first)) == [
                HTMLAttribute(name: "href", value: "#x"), HTMLAttribute(name: "title", value: "t"),
            ]
        )
        #expect(tree.attributes(text).isEmpty)
        #expect(Array(tree.attributes(second)) == [HTMLAttribute(name: "class", value: "c")])
        #expect(tree.attributes(third).isEmpty)
        #expect(HTMLSerializer.serialize(tree) == "<a href=\"#x\" title=\"t\">x</a><b class=\"c\"></b><i></i>")
    }

    @Test func appendingAndRemovingKeepTheLinks() {
        var tree = HTMLTree()
        let div = tree.appendElement("div", tag: .div, attributes: [HTMLAttribute(name: "title", value: "a\"<")], to: 0)
        let a = tree.appendText("a", to: div)
        let br = tree.appendElement("br", tag: .br, attributes: [], to: div)
        let b = tree.appendText("b&\u{A0}", to: div)
        let style = tree.appendElement("style", tag: .style, attributes: [], to: HTMLTree.root)
        tree.appendText("p>b{}", to: style)
        #expect(tree.parent(a) == div && tree.firstChild(div) == a && tree.lastChild(div) == b)
        #expect(tree.nextSibling(a) == br && tree.previousSibling(b) == br)
        #expect(
            HTMLSerializer.serialize(tree)
                == "<div title=\"a&quot;&lt;\">a<br>b&amp;&nbsp;</div><style>p>b{}</style>"
        )
        tree.remove(br)
        #expect(tree.nextSibling(a) == b && tree.previousSibling(b) == a && tree.parent(br) == HTMLTree.none)
        tree.appendData("c", to: a)
        tree.remove(a)
        #expect(tree.firstChild(div) == b && tree.previousSibling(b) == HTMLTree.none)
        tree.remove(b)
        #expect(tree.firstChild(div) == HTMLTree.none && tree.lastChild(div) == HTMLTree.none)
        tree.remove(div)
        #expect(tree.firstChild(HTMLTree.root) == style)
        #expect(HTMLSerializer.serialize(tree) == "<style>p>b{}</style>")
    }
}
