import CofferContent
import CofferHTML
import Foundation
import Testing

@Suite("Shared fixtures")
struct FixtureTests {
    /// DOMPurify's own expectations, compared with remote content allowed (DOMPurify does not
    /// block remote URLs, so this is the closest profile). A case must match one expected output
    /// exactly or be listed in docs/SANITIZER.md; a listed case that matches is stale and fails.
    @Test func domPurifyFixtures() {
        let cases = TestSupport.domPurifyCases
        #expect(cases.count == 223)
        let listed = TestSupport.listedDifferences
        let comparable = MailSanitizer(options: .init(remoteContent: .allow, blockTrackers: false))
        let blocking = MailSanitizer()
        var exact = 0
        var differences = 0
        var report = ""
        for fixture in cases {
            let output = comparable.sanitize(html: fixture.payload).html
            let matches = fixture.expected.contains(output)
            if matches {
                exact += 1
                #expect(!listed.contains(fixture.index), "case #\(fixture.index) matches but is listed")
            } else {
                differences += 1
                #expect(listed.contains(fixture.index), "case #\(fixture.index) differs and is not listed")
                report += "#\(fixture.index) \(fixture.title)\n  got: \(output)\n  exp: \(fixture.expected[0])\n"
            }
            for html in [output, blocking.sanitize(html: fixture.payload).html] {
                let problems = TestSupport.safetyViolations(html)
                #expect(problems.isEmpty, "case #\(fixture.index): \(problems) in \(html)")
            }
        }
        if let path = ProcessInfo.processInfo.environment["COFFER_DOMPURIFY_REPORT"] {
            try? report.write(toFile: path, atomically: true, encoding: .utf8)
        }
        print("dompurify: \(exact) exact, \(differences) listed differences")
    }

    /// With remote content blocked, no URL to a remote host survives in any attribute or in
    /// any CSS text of the re-parsed output, even after CSS escapes are decoded.
    @Test func httpLeakVectors() {
        let vectors = TestSupport.leakVectors
        #expect(vectors.count == 117)
        let sanitizer = MailSanitizer()
        var clean = 0
        var blocked = 0
        for vector in vectors {
            let result = sanitizer.sanitize(html: vector.payload)
            blocked += result.blockedRemoteContentCount
            let tree = HTMLParser.parseFragment(result.html, context: "div", scripting: true)
            var leaks: [String] = []
            for element in TestSupport.elements(of: tree) {
                for attribute in element.attributes {
                    let value = TestSupport.decodeCSSEscapes(attribute.value)
                    let found = TestSupport.remoteURLs(in: value)
                    if !found.isEmpty { leaks.append("\(element.name)[\(attribute.qualifiedName)]=\(attribute.value)") }
                }
                if element.name == "style" {
                    let css = TestSupport.decodeCSSEscapes(element.textContent)
                    if !TestSupport.remoteURLs(in: css).isEmpty { leaks.append("style: \(css)") }
                }
            }
            #expect(leaks.isEmpty, "\(vector.id): \(leaks)")
            if leaks.isEmpty { clean += 1 }
            #expect(TestSupport.safetyViolations(result.html).isEmpty, "\(vector.id)")
        }
        print("httpleaks: \(clean)/\(vectors.count) vectors leak nothing; \(blocked) remote resources blocked")
    }

    /// sanitize(sanitize(x)) == sanitize(x) over every fixture, in both remote-content modes.
    @Test func idempotenceOverFixtures() {
        let payloads = TestSupport.domPurifyCases.map(\.payload) + TestSupport.leakVectors.map(\.payload)
        for sanitizer in [MailSanitizer(), MailSanitizer().allowingRemoteContent()] {
            for payload in payloads {
                let once = sanitizer.sanitize(html: payload).html
                let twice = sanitizer.sanitize(html: once).html
                #expect(once == twice, "not idempotent: \(payload)")
            }
        }
    }
}
