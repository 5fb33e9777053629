import CofferHTML
import Foundation
import Testing

@testable import CofferContent

/// ``ParseStability`` lets the sanitizer skip its reparse; a tree it accepts must be a fixed point, and a tree the
/// parser would rearrange must be refused.
@Suite("Parse stability proof")
struct ParseStabilityTests {
    /// The `#data` sections of every html5lib tree-construction file: the misnesting, foster-parenting and
    /// adoption-agency cases the parser's authors collected.
    static let treeConstructionInputs: [[UInt8]] = {
        let folder = TestSupport.fixtures.appendingPathComponent("html5lib-tests/tree-construction")
        let files = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        var inputs: [[UInt8]] = []
        for file in files.sorted() where file.hasSuffix(".dat") {
            guard let text = try? String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8) else {
                continue
            }
            var current: [Substring]?
            for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
                if line == "#data" {
                    current = []
                } else if line.hasPrefix("#errors"), let data = current {
                    inputs.append(Array(data.joined(separator: "\n").utf8))
                    current = nil
                } else {
                    current?.append(line)
                }
            }
        }
        return inputs
    }()

    @Test func theHTML5LibInputsAreRead() {
        #expect(Self.treeConstructionInputs.count > 1_000)
    }

    /// sanitize(sanitize(x)) == sanitize(x) over every html5lib tree-construction input, in both remote-content
    /// modes, now that most outputs are not parsed again.
    @Test func idempotenceOverHTML5LibInputs() {
        var proven = 0
        for sanitizer in [MailSanitizer(), MailSanitizer().allowingRemoteContent()] {
            for input in Self.treeConstructionInputs {
                let once = sanitizer.sanitize(html: input).html
                let twice = sanitizer.sanitize(html: once).html
                #expect(once == twice, "not idempotent: \(String(decoding: input, as: UTF8.self))")
                let pass = SanitizerPass(gate: ResourceGate(options: sanitizer.options, cidResolver: nil))
                if ParseStability.holds(for: pass.run(HTMLParser.parseDocument(input))) { proven += 1 }
            }
        }
        // The proof must carry most inputs, or the fast path is gone.
        #expect(proven > Self.treeConstructionInputs.count)
    }

    /// Trees the parser would rebuild differently from their serialization (built by hand, as an unwrapped element
    /// or a bug in the pass could leave them). A comment or an element of another namespace cannot be in the output
    /// at all: ``HTMLTree`` holds HTML elements and texts only.
    static let unstableTrees: [String] = [
        "p in p",
        "div in p",
        "table in p",
        "li in li",
        "dd in dt",
        "a in a",
        "h2 in h1",
        "text in a table",
        "div in a row",
        "row in a table",
        "cell outside a table",
        "col outside colgroup",
        "rt outside ruby",
        "child of a void element",
        "two adjacent texts",
        "an empty text",
        "carriage return in a text",
        "NUL in a text",
        "carriage return in an attribute",
        "odd attribute name",
        "a repeated attribute",
        "a repeated attribute among many",
        "end tag in a style",
        "an element the profile does not keep",
    ]

    static func tree(_ name: String) -> HTMLNode {
        switch name {
        case "p in p": element("p", [element("p", [text("x")])])
        case "div in p": element("p", [element("span", [element("div", [text("x")])])])
        case "table in p": element("p", [element("table")])
        case "li in li": element("ul", [element("li", [element("div", [element("li")])])])
        case "dd in dt": element("dl", [element("dt", [element("dd")])])
        case "a in a": element("a", [element("b", [element("a", [text("x")])])])
        case "h2 in h1": element("h1", [element("h2")])
        case "text in a table": element("table", [text("x")])
        case "div in a row": element("table", [element("tbody", [element("tr", [element("div")])])])
        case "row in a table": element("table", [element("tr", [element("td")])])
        case "cell outside a table": element("div", [element("td")])
        case "col outside colgroup": element("table", [element("col")])
        case "rt outside ruby": element("span", [element("rt")])
        case "child of a void element": element("img", [text("x")])
        case "two adjacent texts": element("div", [text("a"), text("b")])
        case "an empty text": element("div", [text("")])
        case "carriage return in a text": element("div", [text("a\rb")])
        case "NUL in a text": element("div", [text("a\u{0}b")])
        case "carriage return in an attribute": element("div", attributes: ["title": "a\rb"])
        case "odd attribute name": element("div", attributes: ["a\"b": "x"])
        case "a repeated attribute": element("div", attributes: ["title": "a", "title": "b"])
        case "a repeated attribute among many":
            HTMLNode.element("div", attributes: manyAttributes(20) + manyAttributes(3).suffix(1))
        case "end tag in a style": element("div", [element("style", [text("a{}</style><script>")])])
        case "an element the profile does not keep": element("form")
        default: fatalError("no tree named \(name)")
        }
    }

    @Test(arguments: unstableTrees)
    func refusesWhatAReparseWouldMove(_ name: String) {
        let fragment = HTMLNode.documentFragment()
        fragment.appendChild(Self.tree(name))
        #expect(!ParseStability.holds(for: outputTree(fragment)), "\(name)")
    }

    /// An element with many distinct attributes is proven (its repeat check goes through a set).
    @Test func acceptsManyDistinctAttributes() {
        let fragment = HTMLNode.documentFragment()
        fragment.appendChild(HTMLNode.element("div", attributes: manyAttributes(40)))
        #expect(ParseStability.holds(for: outputTree(fragment)))
    }

    /// Well-nested mail markup is proven without a reparse.
    @Test func acceptsWellNestedMail() {
        let table = element(
            "table",
            attributes: ["width": "600"],
            [
                text("\n"),
                element(
                    "tbody",
                    [element("tr", [element("td", [element("p", [element("a", [element("img")]), text("x")])])])]
                ),
            ]
        )
        let fragment = HTMLNode.documentFragment()
        fragment.appendChild(element("style", [text(".a{color:red}")]))
        fragment.appendChild(element("div", [element("ul", [element("li", [element("li")])]), table]))
        // An li directly in an li is refused; in a nested ul it is not.
        #expect(!ParseStability.holds(for: outputTree(fragment)))
        fragment.children[1].children[0].children[0].removeAllChildren()
        fragment.children[1].children[0].children[0].appendChild(element("ul", [element("li", [text("y")])]))
        #expect(ParseStability.holds(for: outputTree(fragment)))
    }
}

private func element(
    _ name: String,
    attributes: KeyValuePairs<String, String> = [:],
    _ children: [HTMLNode] = []
) -> HTMLNode {
    let node = HTMLNode.element(name, attributes: attributes.map { HTMLAttribute(name: $0.key, value: $0.value) })
    for child in children { node.appendChild(child) }
    return node
}

private func text(_ data: String) -> HTMLNode { HTMLNode.text(data) }

/// `data-a0="x"` … `data-a<count - 1>="x"`.
private func manyAttributes(_ count: Int) -> [HTMLAttribute] {
    (0..<count).map { HTMLAttribute(name: "data-a\($0)", value: "x") }
}

/// The same tree as the sanitizer's output type: its elements and texts, the only kinds the output has.
private func outputTree(_ fragment: HTMLNode) -> HTMLTree {
    var tree = HTMLTree()
    var stack: [(HTMLNode, HTMLTree.NodeID)] = fragment.children.reversed().map { ($0, HTMLTree.root) }
    while let (node, parent) = stack.popLast() {
        switch node.kind {
        case .element:
            let element = tree.appendElement(node.name, tag: node.id, attributes: node.attributes, to: parent)
            stack.append(contentsOf: node.children.reversed().map { ($0, element) })
        case .text:
            tree.appendText(node.data, to: parent)
        default:
            Issue.record("the output tree holds elements and texts only, not \(node.kind)")
        }
    }
    return tree
}
