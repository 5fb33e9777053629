import CofferContent
import CofferHTML
import Foundation

/// Paths and helpers shared by the tests.
enum TestSupport {
    /// The repository root: three levels above this file (symlinks resolved, so a development
    /// package that links the test folder finds the same root).
    static let repositoryRoot: URL = URL(fileURLWithPath: #filePath).resolvingSymlinksInPath()
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The DOMPurify and HTTP-leak fixtures in the repository, each with its LICENSE and SOURCE.
    static let fixtures = repositoryRoot.appendingPathComponent("Tests/Fixtures")

    struct DOMPurifyCase: Sendable {
        var index: Int
        var title: String
        var payload: String
        var expected: [String]
    }

    static let domPurifyCases: [DOMPurifyCase] = {
        let url = fixtures.appendingPathComponent("dompurify/expect.json")
        guard let data = try? Data(contentsOf: url),
            let array = try? JSONSerialization.jsonObject(with: data) as? [[String: Any]]
        else { return [] }
        return array.enumerated().map { index, entry in
            let expected: [String]
            if let list = entry["expected"] as? [String] {
                expected = list
            } else {
                expected = [(entry["expected"] as? String) ?? ""]
            }
            return DOMPurifyCase(
                index: index,
                title: (entry["title"] as? String) ?? "",
                payload: (entry["payload"] as? String) ?? "",
                expected: expected
            )
        }
    }()

    struct LeakVector: Sendable {
        var id: String
        var payload: String
    }

    static let leakVectors: [LeakVector] = {
        let url = fixtures.appendingPathComponent("httpleaks/httpleaks.json")
        guard let data = try? Data(contentsOf: url),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let vectors = object["vectors"] as? [[String: Any]]
        else { return [] }
        return vectors.map { entry in
            LeakVector(id: (entry["id"] as? String) ?? "", payload: (entry["payload_html"] as? String) ?? "")
        }
    }()

    /// The case numbers listed in `docs/SANITIZER.md` as deliberate differences, from lines
    /// of the form `- #12 …`.
    static let listedDifferences: Set<Int> = {
        let url = repositoryRoot.appendingPathComponent("docs/SANITIZER.md")
        guard let text = try? String(contentsOf: url, encoding: .utf8) else { return [] }
        var result: Set<Int> = []
        for line in text.split(separator: "\n") where line.hasPrefix("- #") {
            let digits = line.dropFirst(3).prefix { $0.isNumber }
            if let number = Int(digits) { result.insert(number) }
        }
        return result
    }()

    /// Every element of a fragment (template contents included), collected iteratively.
    static func elements(of root: HTMLNode) -> [HTMLNode] {
        var result: [HTMLNode] = []
        var stack: [HTMLNode] = [root]
        while let node = stack.popLast() {
            if node.kind == .element { result.append(node) }
            stack.append(contentsOf: node.children)
            if let contents = node.templateContents { stack.append(contents) }
        }
        return result
    }

    /// Problems a sanitized fragment must never have, found on the re-parsed tree (parsed the
    /// way a browser would: as the content of the message container, with scripting on).
    static func safetyViolations(_ html: String) -> [String] {
        var problems: [String] = []
        let trees = [
            HTMLParser.parseFragment(html, context: "div", scripting: true),
            HTMLParser.parseFragment(html, context: "div", scripting: false),
        ]
        for tree in trees {
            for element in elements(of: tree) {
                if element.namespace != .html { problems.append("foreign element <\(element.name)>") }
                let dangerous: Set<String> = [
                    "script", "iframe", "object", "embed", "frame", "frameset", "base", "meta", "link", "form",
                    "input", "noscript", "template", "svg", "math",
                ]
                if dangerous.contains(element.name) { problems.append("element <\(element.name)>") }
                for attribute in element.attributes {
                    let name = attribute.qualifiedName.lowercased()
                    if name.hasPrefix("on") { problems.append("event handler \(name)") }
                    let probe = String(
                        attribute.value.unicodeScalars.filter { $0.value > 0x20 && !(0x7F...0xA0).contains($0.value) }
                            .map(Character.init)
                    ).lowercased()
                    for scheme in ["javascript:", "vbscript:", "data:text/html", "livescript:", "mocha:"]
                    where probe.contains(scheme) && name != "title" && name != "alt" && !name.hasPrefix("data-")
                        && !name.hasPrefix("aria-") && name != "value"
                    {
                        problems.append("\(scheme) in \(name)")
                    }
                }
            }
        }
        return problems
    }

    /// Whether `text` contains a URL to a remote host: `http:`, `https:`, `ftp:`, `//host`.
    static func remoteURLs(in text: String) -> [String] {
        let lowered = text.lowercased()
        var found: [String] = []
        for marker in ["http:", "https:", "ftp:", "ftps:", "ws:", "wss:", "//", "\\\\", "leaking.via"]
        where lowered.contains(marker) {
            found.append(marker)
        }
        return found
    }

    /// Decodes CSS escapes (`\75 `, `\(`) so hidden schemes show.
    static func decodeCSSEscapes(_ text: String) -> String {
        var result = String.UnicodeScalarView()
        let scalars = Array(text.unicodeScalars)
        var index = 0
        while index < scalars.count {
            let scalar = scalars[index]
            guard scalar == "\\", index + 1 < scalars.count else {
                result.append(scalar)
                index += 1
                continue
            }
            var hex = ""
            var cursor = index + 1
            while cursor < scalars.count, hex.count < 6, scalars[cursor].properties.isASCIIHexDigit {
                hex.unicodeScalars.append(scalars[cursor])
                cursor += 1
            }
            if hex.isEmpty {
                result.append(scalars[index + 1])
                index += 2
            } else {
                if cursor < scalars.count, scalars[cursor] == " " { cursor += 1 }
                result.append(Unicode.Scalar(UInt32(hex, radix: 16) ?? 0xFFFD) ?? "\u{FFFD}")
                index = cursor
            }
        }
        return String(result)
    }
}
