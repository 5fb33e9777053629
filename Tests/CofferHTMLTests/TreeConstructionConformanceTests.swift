import CofferHTML
import Foundation
import Testing

/// One test case of an html5lib tree-construction `.dat` file.
struct TreeTestCase {
    var id: String
    var data: [UInt8] = []
    var fragmentContext: String?
    var scripting: Bool?
    var document: [UInt8] = []
}

/// Parses a `.dat` file into test cases.
func parseDatFile(_ bytes: [UInt8], name: String) -> [TreeTestCase] {
    let lines = bytes.split(separator: 0x0A, omittingEmptySubsequences: false).map { Array($0) }
    var cases: [TreeTestCase] = []
    var current: TreeTestCase?
    var section = ""
    var sectionLines: [[UInt8]] = []

    func finishSection(_ testCase: inout TreeTestCase) {
        var body = sectionLines
        switch section {
        case "#data":
            testCase.data = Array(body.joined(separator: [0x0A]))
        case "#document-fragment":
            testCase.fragmentContext = body.first.map { String(decoding: $0, as: UTF8.self) }
        case "#document":
            while let last = body.last, last.isEmpty { body.removeLast() }
            testCase.document = Array(body.joined(separator: [0x0A]))
        default:
            break
        }
        sectionLines = []
    }

    let headers: Set<String> = [
        "#errors", "#new-errors", "#document-fragment", "#script-on", "#script-off", "#document",
    ]
    for line in lines {
        let text = String(decoding: line, as: UTF8.self)
        if text == "#data" && (current == nil || section == "#document") {
            if var finished = current {
                finishSection(&finished)
                cases.append(finished)
            }
            current = TreeTestCase(id: "tree-construction/\(name)#\(cases.count + 1)")
            section = "#data"
            sectionLines = []
            continue
        }
        guard current != nil else { continue }
        if headers.contains(text) && section != "#document" {
            finishSection(&current!)
            section = text
            if text == "#script-on" { current?.scripting = true }
            if text == "#script-off" { current?.scripting = false }
            continue
        }
        sectionLines.append(line)
    }
    if var finished = current {
        finishSection(&finished)
        cases.append(finished)
    }
    return cases
}

/// Serializes a tree in the html5lib test format, iteratively.
func dumpTree(_ root: HTMLNode) -> String {
    var lines: [String] = []
    var stack: [(node: HTMLNode, depth: Int, isContent: Bool)] = root.children.reversed().map { ($0, 0, false) }
    while let (node, depth, isContent) = stack.popLast() {
        let indent = "| " + String(repeating: "  ", count: depth)
        if isContent {
            lines.append(indent + "content")
            stack.append(contentsOf: node.children.reversed().map { ($0, depth + 1, false) })
            continue
        }
        switch node.kind {
        case .doctype:
            if node.publicId != nil || node.systemId != nil {
                lines.append(indent + "<!DOCTYPE \(node.name) \"\(node.publicId ?? "")\" \"\(node.systemId ?? "")\">")
            } else {
                lines.append(indent + "<!DOCTYPE \(node.name)>")
            }
        case .comment:
            lines.append(indent + "<!-- \(node.data) -->")
        case .text:
            lines.append(indent + "\"\(node.data)\"")
        case .element:
            let prefix: String
            switch node.namespace {
            case .svg: prefix = "svg "
            case .mathml: prefix = "math "
            default: prefix = ""
            }
            lines.append(indent + "<\(prefix)\(node.name)>")
            let attributes = node.attributes.map { attribute -> (String, String) in
                let name: String
                switch attribute.namespace {
                case .xlink: name = "xlink " + attribute.name
                case .xml: name = "xml " + attribute.name
                case .xmlns: name = "xmlns " + attribute.name
                default: name = attribute.name
                }
                return (name, attribute.value)
            }.sorted { $0.0.utf8.lexicographicallyPrecedes($1.0.utf8) }
            for (name, value) in attributes {
                lines.append(indent + "  \(name)=\"\(value)\"")
            }
            var pushes: [(HTMLNode, Int, Bool)] = node.children.map { ($0, depth + 1, false) }
            if let contents = node.templateContents, node.namespace == .html {
                pushes.insert((contents, depth + 1, true), at: 0)
            }
            stack.append(contentsOf: pushes.reversed())
        case .document, .documentFragment:
            stack.append(contentsOf: node.children.reversed().map { ($0, depth, false) })
        }
    }
    return lines.joined(separator: "\n")
}

/// Runs one tree-construction case and returns the actual dump.
func runTreeCase(_ testCase: TreeTestCase) -> String {
    let scripting = testCase.scripting ?? false
    if let context = testCase.fragmentContext {
        let parts = context.split(separator: " ")
        var namespace = HTMLNamespace.html
        var name = context
        if parts.count == 2 {
            namespace = parts[0] == "svg" ? .svg : (parts[0] == "math" ? .mathml : .html)
            name = String(parts[1])
        }
        let fragment = HTMLParser.parseFragment(
            testCase.data,
            context: name,
            namespace: namespace,
            scripting: scripting
        )
        return dumpTree(fragment)
    }
    return dumpTree(HTMLParser.parseDocument(testCase.data, scripting: scripting))
}

/// Runs every html5lib tree-construction test, including the `scripted/` folder.
func runTreeConstructionConformance() -> ConformanceTally {
    var tally = ConformanceTally()
    let files =
        TestPaths.files(in: "tree-construction", ext: "dat").map { ($0, $0.lastPathComponent) }
        + TestPaths.files(in: "tree-construction/scripted", ext: "dat").map { ($0, "scripted/" + $0.lastPathComponent) }
    for (file, name) in files {
        guard let data = try? Data(contentsOf: file) else { continue }
        for testCase in parseDatFile([UInt8](data), name: name) {
            let actual = runTreeCase(testCase)
            let expected = String(decoding: testCase.document, as: UTF8.self)
            tally.record(
                testCase.id,
                passed: actual == expected,
                detail: "input: \(String(decoding: testCase.data, as: UTF8.self))\n"
                    + "context: \(testCase.fragmentContext ?? "-")\nexpected:\n\(expected)\nactual:\n\(actual)"
            )
        }
    }
    return tally
}

@Test func treeConstructionConformance() {
    let tally = runTreeConstructionConformance()
    print("tree-construction: \(tally.passed)/\(tally.total) passed")
    let unlisted = tally.unlisted(in: loadKnownFailures())
    for failure in unlisted.prefix(200) { print("FAIL \(failure.id): \(failure.detail)\n") }
    #expect(tally.total >= 1796)
    #expect(tally.rate >= 0.99)
    #expect(unlisted.isEmpty, "failing tests missing from docs/html5-conformance.md: \(unlisted.count)")
}
