import CofferContent
import CofferHTML
import Testing

@Suite("Content Security Policy and page")
struct PolicyTests {
    static let metaContents: [(ContentSecurityPolicy, String)] = [
        (.unsanitized, "default-src 'none'; base-uri 'none'; form-action 'none'"),
        (
            .embeddedImagesOnly,
            "default-src 'none'; style-src 'unsafe-inline'; img-src data:; font-src data:; media-src data:; "
                + "base-uri 'none'; form-action 'none'"
        ),
        (
            .remoteContent,
            "default-src 'none'; style-src 'unsafe-inline'; img-src data: https: http:; font-src data: https: http:; "
                + "media-src data: https: http:; base-uri 'none'; form-action 'none'"
        ),
        (
            .composer(nonce: "r4nd0m+/="),
            "default-src 'none'; script-src 'nonce-r4nd0m+/='; style-src 'unsafe-inline'; img-src data:; "
                + "base-uri 'none'; form-action 'none'"
        ),
    ]

    @Test(arguments: metaContents)
    func exactMetaContent(policy: ContentSecurityPolicy, expected: String) {
        #expect(policy.metaContent == expected)
        #expect(policy.metaTag == "<meta http-equiv=\"Content-Security-Policy\" content=\"\(expected)\">")
    }

    static let headerValues: [(ContentSecurityPolicy, String)] = [
        (.unsanitized, "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; sandbox"),
        (
            .embeddedImagesOnly,
            "default-src 'none'; style-src 'unsafe-inline'; img-src data:; font-src data:; media-src data:; "
                + "base-uri 'none'; form-action 'none'; frame-ancestors 'none'; "
                + "sandbox allow-popups allow-popups-to-escape-sandbox"
        ),
        (
            .remoteContent,
            "default-src 'none'; style-src 'unsafe-inline'; img-src data: https: http:; font-src data: https: http:; "
                + "media-src data: https: http:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; "
                + "sandbox allow-popups allow-popups-to-escape-sandbox"
        ),
        (
            .composer(nonce: "abc"),
            "default-src 'none'; script-src 'nonce-abc'; style-src 'unsafe-inline'; img-src data:; "
                + "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
        ),
    ]

    @Test(arguments: headerValues)
    func exactHeaderValue(policy: ContentSecurityPolicy, expected: String) {
        #expect(policy.headerValue == expected)
    }

    @Test func onlyTheComposerAllowsScript() {
        for policy in [ContentSecurityPolicy.unsanitized, .embeddedImagesOnly, .remoteContent] {
            #expect(!policy.headerValue.contains("script-src"))
            #expect(!policy.headerValue.contains("unsafe-eval"))
            #expect(policy.headerValue.hasPrefix("default-src 'none'"))
        }
        let directives = ContentSecurityPolicy.composer(nonce: "n").headerValue.split(separator: ";").map {
            $0.trimmingPrefix(" ")
        }
        #expect(directives.filter { $0.hasPrefix("script-src") } == ["script-src 'nonce-n'"])
    }

    @Test func nonceCannotBreakOutOfThePolicy() {
        let policy = ContentSecurityPolicy.composer(nonce: "a'; script-src * \"><script>")
        #expect(policy.metaContent.hasPrefix("default-src 'none'; script-src 'nonce-ascript-srcscript'; "))
    }

    @Test func pageHasThePolicyAsFirstHeadElement() {
        let message = MailSanitizer().sanitize(html: "<p>Hi <b>there</b></p>")
        let page = MailPage.render(message, title: "Re: <script>alert(1)</script> & more")
        #expect(page.hasPrefix("<!DOCTYPE html>\n<html><head><meta http-equiv=\"Content-Security-Policy\""))
        let document = HTMLParser.parseDocument(page)
        let html = document.children.first { $0.isElement("html") }
        let head = html?.children.first { $0.isElement("head") }
        let first = head?.children.first
        #expect(first?.isElement("meta") == true)
        #expect(first?.attribute("http-equiv") == "Content-Security-Policy")
        #expect(first?.attribute("content") == ContentSecurityPolicy.embeddedImagesOnly.metaContent)
        let title = head?.children.first { $0.isElement("title") }
        #expect(title?.textContent == "Re: <script>alert(1)</script> & more")
        #expect(page.contains("<div class=\"coffer-message\"><p>Hi <b>there</b></p></div>"))
        #expect(head?.children.contains { $0.isElement("script") } == false)
    }

    @Test func pagePolicyFollowsTheMessage() {
        let remote = MailSanitizer().allowingRemoteContent().sanitize(html: #"<img src="https://x.example/a.png">"#)
        #expect(MailPage.render(remote).contains(ContentSecurityPolicy.remoteContent.metaTag))
        let local = MailSanitizer().sanitize(html: #"<img src="https://x.example/a.png">"#)
        #expect(MailPage.render(local).contains(ContentSecurityPolicy.embeddedImagesOnly.metaTag))
        #expect(MailPage.render(local, policy: .unsanitized).contains(ContentSecurityPolicy.unsanitized.metaTag))
    }
}
