import CofferContent
import CofferHTML
import Foundation
import Testing

/// Remote-content blocking must hold with no Content Security Policy at all: a URL string in a custom
/// property, brought into `image-set()` by `var()`, or a URL left behind by an escaped `url\(`, must neither
/// survive sanitizing (after CSS escapes are decoded) nor escape the remote-content report.
@Suite("CSS custom properties and escapes")
struct CSSSubstitutionTests {
    struct Vector: Sendable, CustomTestStringConvertible {
        var id: String
        var html: String
        var blocked: Int
        var tracker: Bool
        var testDescription: String { id }
    }

    /// `Tests/Fixtures/css-substitution/vectors.json`, also rendered in Chromium without the CSP by
    /// `Tests/browser/render_vectors.py`.
    static let vectors: [Vector] = {
        let url = TestSupport.fixtures.appendingPathComponent("css-substitution/vectors.json")
        guard let data = try? Data(contentsOf: url),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let list = object["vectors"] as? [[String: Any]]
        else { return [] }
        return list.map { entry in
            Vector(
                id: (entry["id"] as? String) ?? "",
                html: (entry["html"] as? String) ?? "",
                blocked: (entry["blocked"] as? Int) ?? -1,
                tracker: (entry["tracker"] as? Bool) ?? false
            )
        }
    }()

    /// What the output may not hold, after CSS escapes are decoded.
    private static func leaks(in html: String) -> [String] {
        let decoded = TestSupport.decodeCSSEscapes(html).lowercased()
        var found = TestSupport.remoteURLs(in: decoded)
        for marker in ["leak.example", "list-manage.com", "javascript:"] where decoded.contains(marker) {
            found.append(marker)
        }
        return found
    }

    @Test func theVectorsAreLoaded() {
        #expect(Self.vectors.count == 23)
        #expect(Self.vectors.allSatisfy { !$0.html.isEmpty && $0.blocked >= 0 })
    }

    @Test(arguments: vectors)
    func blockedWithoutALeakAndCounted(vector: Vector) {
        let result = MailSanitizer().sanitize(html: vector.html)
        #expect(Self.leaks(in: result.html).isEmpty, "\(result.html)")
        #expect(TestSupport.safetyViolations(result.html).isEmpty, "\(result.html)")
        #expect(result.blockedRemoteContentCount == vector.blocked, "\(result.blockedRemoteContent)")
        #expect(result.blockedRemoteContent.allSatisfy { $0.kind == .cssImage })
        #expect(result.loadedRemoteContent.isEmpty)
        let again = MailSanitizer().sanitize(html: result.html)
        #expect(again.html == result.html)
    }

    @Test(arguments: vectors)
    func countedWhenRemoteContentIsAllowed(vector: Vector) {
        let result = MailSanitizer().allowingRemoteContent().sanitize(html: vector.html)
        #expect(TestSupport.safetyViolations(result.html).isEmpty, "\(result.html)")
        if vector.tracker {
            #expect(Self.leaks(in: result.html).isEmpty, "\(result.html)")
            #expect(result.trackersBlocked.count == vector.blocked, "\(result.blockedRemoteContent)")
            #expect(result.loadedRemoteContent.isEmpty)
        } else {
            // Loaded and listed, or (in a declaration dropped for another reason) blocked and listed.
            #expect(
                result.loadedRemoteContent.count + result.blockedRemoteContent.count == vector.blocked,
                "\(result.html)"
            )
        }
        if result.loadedRemoteContent.isEmpty {
            #expect(Self.leaks(in: result.html).isEmpty, "\(result.html)")
        }
    }

    /// A dropped declaration loads nothing: its remote URLs are listed as blocked, in both modes, once.
    @Test func remoteURLsOfADroppedDeclarationAreBlocked() {
        let input =
            #"<p style="background:url(https://x.example/a.png) expression(alert(1));color:red;"#
            + #"cursor:url(https://x.example/b.cur),auto">x</p>"#
        for sanitizer in [MailSanitizer(), MailSanitizer().allowingRemoteContent()] {
            let result = sanitizer.sanitize(html: input)
            #expect(result.blockedRemoteContent.map(\.url).first == "https://x.example/a.png")
            #expect(result.blockedRemoteContent.filter { $0.url == "https://x.example/a.png" }.count == 1)
            #expect(!result.loadedRemoteContent.contains { $0.url == "https://x.example/a.png" })
            #expect(result.blockedRemoteContent.count + result.loadedRemoteContent.count == 2)
        }
    }

    /// Each occurrence of a repeated style is counted (results are reused only when no URL was seen).
    @Test func repeatedDroppedDeclarationsAreEachCounted() {
        let style = #"<p style="behavior:url(https://x.example/a.htc);color:red">x</p>"#
        let plain = #"<p style="zoom:2;color:red">x</p>"#
        let result = MailSanitizer().sanitize(html: style + plain + style + plain)
        #expect(result.blockedRemoteContent.map(\.url) == ["https://x.example/a.htc", "https://x.example/a.htc"])
        #expect(result.html == String(repeating: #"<p style="color:red">x</p>"#, count: 4))
    }

    /// A tiny or hidden element's own CSS image is a tracking pixel, as the same `<img>` is.
    @Test func cssPixelsOnAnyElementAreTrackers() {
        let input =
            #"<div style="width:1px;height:1px;background:url(https://t.example/1.gif)"></div>"#
            + #"<p style="display:none;background-image:url(https://t.example/2.gif)"></p>"#
            + #"<div style="width:600px;background:url(https://img.example/hero.png)">x</div>"#
        let result = MailSanitizer().allowingRemoteContent().sanitize(html: input)
        #expect(result.trackersBlocked.map(\.url) == ["https://t.example/1.gif", "https://t.example/2.gif"])
        #expect(result.loadedRemoteContent.map(\.url) == ["https://img.example/hero.png"])
    }

    /// A string in a custom property is a URL the user can restore like any other.
    @Test func restoringLoadsTheSubstitutedURL() {
        let input = #"<div style="--u:'https://img.example/a.png';background-image:image-set(var(--u) 1x)">x</div>"#
        let first = MailSanitizer().sanitize(html: input)
        #expect(first.blockedRemoteContent.map(\.url) == ["https://img.example/a.png"])
        #expect(first.blockedRemoteContent.map(\.attribute) == ["--u"])
        let restored = MailSanitizer().restoringRemoteContent(first.blockedRemoteContent).sanitize(html: input)
        #expect(
            restored.html
                == #"<div style="--u:'https://img.example/a.png';background-image:image-set(var(--u) 1x)">x</div>"#
        )
        #expect(restored.loadedRemoteContent.count == 1)
    }

    /// Custom properties of colors, sizes and names keep working; strings where text belongs stay.
    @Test func legitimateCustomPropertiesStay() {
        let kept = [
            "--brand:#c00;--gap:4px;color:var(--brand);padding:var(--gap, 2px)",
            "--w:calc(100% - 2 * var(--gap));width:var(--w)",
            "--stack:Helvetica, Arial, sans-serif;font-family:var(--stack)",
            "font-family:'Helvetica Neue', Arial",
            "quotes:'«' '»'",
            "background-image:var(--hero, linear-gradient(#fff, #eee))",
            "background-image:image-set(var(--none, url(data:image/png;base64,iVBORw0KGgo=)) 1x)",
        ]
        for style in kept {
            let result = MailSanitizer().sanitize(html: #"<p style="\#(style)">x</p>"#)
            #expect(result.html == #"<p style="\#(style)">x</p>"#)
            #expect(result.blockedRemoteContent.isEmpty)
        }
        let sheet = MailSanitizer().sanitize(html: #"<style>p::before{content:"→ ";color:var(--c)}</style>"#)
        #expect(sheet.html == #"<style>.coffer-message p::before{content:"→ ";color:var(--c)}</style>"#)
    }

    /// What goes: a string in a custom property or a `var()` fallback is read as a URL, so a font name
    /// there is a relative URL and drops the declaration; an identifier that holds an escaped URL
    /// character drops its declaration; neither is reported (nothing remote was named).
    @Test func stringsThatCouldBecomeURLsAreDropped() {
        let cases = [
            ("--font:'Helvetica Neue';color:red", "color:red"),
            ("font-family:var(--f, 'Helvetica Neue');color:red", "color:red"),
            (#"--u:'javascript:alert(1)';color:red"#, "color:red"),
            (#"color:red;font-family:a\28 b"#, "color:red;"),
            ("content:'javascript:alert(1)';color:red", "color:red"),
        ]
        for (style, expected) in cases {
            let result = MailSanitizer().sanitize(html: #"<p style="\#(style)">x</p>"#)
            #expect(result.html == #"<p style="\#(expected)">x</p>"#, "\(style)")
            #expect(result.blockedRemoteContent.isEmpty)
        }
    }
}
