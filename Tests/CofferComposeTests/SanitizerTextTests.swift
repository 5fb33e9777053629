import CofferContent
import Testing

/// `MailSanitizer.text(html:)`, the text rendering a reply quotes when the original has only HTML.
struct SanitizerTextTests {
    @Test func preformattedTextKeepsItsLinesAndSpaces() {
        let text = MailSanitizer().text(html: "<p>before</p><pre>a  b\n  c</pre><p>after</p>")
        #expect(text == "before\n\na  b\n  c\n\nafter")
    }

    @Test func scriptsStylesAndMarkupNeverReachTheText() {
        let html = """
            <style>.x { background: url(https://evil.example/a) }</style>
            <script>document.write('x')</script><noscript>enable js</noscript>
            <div style="display:none">hidden?</div><svg><text>vector</text></svg>
            <a href="https://evil.example/track">link text</a><img src="cid:logo" alt="Logo &amp; co">
            <!-- a comment --><template><p>template</p></template>
            """
        let text = MailSanitizer().text(html: html)
        // A noscript's content is what a reader without scripts sees, so it stays.
        #expect(text.contains("enable js"))
        for absent in ["https:", "evil", "document", "vector", "comment", "template", "<", ">"] {
            #expect(!text.contains(absent), "\(absent) in \(text)")
        }
        #expect(text.contains("link text[Logo & co]"))
    }

    @Test func deeplyNestedMarkupIsLaidOutWithoutRecursion() {
        let html = String(repeating: "<div>", count: 20_000) + "deep" + String(repeating: "</div>", count: 20_000)
        #expect(MailSanitizer().text(html: html).hasSuffix("deep"))
    }

    @Test func whitespaceCollapsesAndBlankLinesAreSingle() {
        let text = MailSanitizer().text(html: "<p>  a \n\t b  </p><p></p><p></p><br><br><br><div>c</div>")
        #expect(text == "a b\n\nc")
    }
}
