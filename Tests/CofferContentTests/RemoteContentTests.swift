import CofferContent
import CofferHTML
import Testing

@Suite("Remote content and embedded images")
struct RemoteContentTests {
    private let png = EmbeddedAttachment(mediaType: "image/png", data: Array("PNGDATA".utf8))

    private func resolver(_ id: String) -> EmbeddedAttachment? {
        switch id {
        case "logo@example.com": return png
        case "pic": return EmbeddedAttachment(mediaType: "IMAGE/JPEG; name=pic.jpg", data: [0xFF, 0xD8])
        case "vector": return EmbeddedAttachment(mediaType: "image/svg+xml", data: Array("<svg/>".utf8))
        default: return nil
        }
    }

    @Test func remoteImagesAreBlockedAndListed() {
        let result = MailSanitizer().sanitize(
            html: #"<p><img src="https://img.example/a.png" alt="a"><img src="//cdn.example/b.png" width="80"></p>"#
        )
        #expect(
            result.html
                == #"<p><img data-coffer-blocked-src="0" alt="a"><img data-coffer-blocked-src="1" width="80"></p>"#
        )
        #expect(result.blockedRemoteContentCount == 2)
        #expect(
            result.blockedRemoteContent == [
                RemoteResource(
                    kind: .image,
                    url: "https://img.example/a.png",
                    element: "img",
                    attribute: "src",
                    isTracker: false
                ),
                RemoteResource(
                    kind: .image,
                    url: "//cdn.example/b.png",
                    element: "img",
                    attribute: "src",
                    isTracker: false
                ),
            ]
        )
        #expect(result.blockedRemoteContent[1].host == "cdn.example")
        #expect(result.loadedRemoteContent.isEmpty)
        #expect(result.contentSecurityPolicy == .embeddedImagesOnly)
    }

    /// Every kind of loading attribute is blocked with an inert replacement.
    static let loadingAttributes: [(String, String, RemoteResource.Kind)] = [
        (
            #"<table background="https://x.example/bg.png"></table>"#,
            #"<table data-coffer-blocked-background="0"></table>"#, .backgroundImage
        ),
        (
            #"<table><tr><td background="http://x.example/bg.png">x</td></tr></table>"#,
            #"<table><tbody><tr><td data-coffer-blocked-background="0">x</td></tr></tbody></table>"#, .backgroundImage
        ),
        (
            #"<video poster="https://x.example/p.jpg"></video>"#, #"<video data-coffer-blocked-poster="0"></video>"#,
            .poster
        ),
        (#"<video src="https://x.example/v.mp4"></video>"#, #"<video data-coffer-blocked-src="0"></video>"#, .media),
        (
            #"<audio><source src="https://x.example/a.mp3"></audio>"#,
            #"<audio><source data-coffer-blocked-src="0"></audio>"#, .media
        ),
        (
            #"<picture><source srcset="https://x.example/a.webp"></picture>"#,
            #"<picture><source data-coffer-blocked-srcset="0"></picture>"#, .image
        ),
        (#"<img srcset=",,,,,https://x.example/a.png">"#, #"<img data-coffer-blocked-srcset="0">"#, .image),
        (#"<img src="\\x.example\a.png">"#, #"<img data-coffer-blocked-src="0">"#, .image),
        (#"<img src=" https://x.example/a.png ">"#, #"<img data-coffer-blocked-src="0">"#, .image),
        (#"<img src="HTTPS://x.example/a.png">"#, #"<img data-coffer-blocked-src="0">"#, .image),
        (
            #"<div style="background: url(https://x.example/a.png)">x</div>"#,
            #"<div style="background: url(about:invalid)">x</div>"#, .cssImage
        ),
        (
            #"<body background="https://x.example/bg.png"><p>x</p></body>"#,
            #"<div class="coffer-body" style="background-image: url(&quot;about:invalid&quot;);"><p>x</p></div>"#,
            .cssImage
        ),
    ]

    @Test(arguments: loadingAttributes)
    func loadingAttributeIsBlocked(input: String, expected: String, kind: RemoteResource.Kind) {
        let result = MailSanitizer().sanitize(html: input)
        #expect(result.html == expected)
        #expect(result.blockedRemoteContent.map(\.kind) == [kind])
    }

    @Test func attributesThatOnlyLeakAreRemoved() {
        let input = #"""
            <a href="https://x.example" ping="https://p.example">a</a>\#
            <img src="data:image/gif;base64,R0lGOD" longdesc="https://l.example" lowsrc="https://l.example" \#
            dynsrc="https://d.example" attributionsrc="https://a.example">
            """#
        let result = MailSanitizer().sanitize(html: input)
        #expect(
            result.html
                == #"<a href="https://x.example" target="_blank" rel="noopener noreferrer">a</a><img src="data:image/gif;base64,R0lGOD">"#
        )
        #expect(result.blockedRemoteContent.isEmpty)
    }

    @Test func srcsetCandidatesAreDecidedOneByOne() {
        let input = #"<img srcset="https://a.example/1.png 1x, cid:logo@example.com 2x, javascript:alert(1) 3x">"#
        let blocked = MailSanitizer().sanitize(html: input) { resolver($0) }
        #expect(blocked.html == #"<img srcset="data:image/png;base64,UE5HREFUQQ== 2x" data-coffer-blocked-srcset="0">"#)
        let allowed = MailSanitizer().allowingRemoteContent().sanitize(html: input) { resolver($0) }
        #expect(allowed.html == #"<img srcset="https://a.example/1.png 1x, data:image/png;base64,UE5HREFUQQ== 2x">"#)
    }

    @Test func autoShowImagesLoadsAllButTrackers() {
        let input = #"""
            <img src="https://img.example/hero.jpg" width="600">\#
            <img src="https://img.example/open.gif" width="1" height="1">\#
            <img src="https://img.example/hidden.gif" style="display:none">\#
            <img src="https://img.example/zero.gif" width="0">\#
            <img src="https://img.example/tiny.gif" style="width:1px;height:1px">\#
            <img src="https://x.list-manage.com/track/open.php?u=1">\#
            <img src="https://sub.mailtrack.io/t.png" width="300">
            """#
        let result = MailSanitizer().allowingRemoteContent().sanitize(html: input)
        #expect(result.loadedRemoteContent.map(\.url) == ["https://img.example/hero.jpg"])
        #expect(result.trackersBlocked.count == 6)
        #expect(result.blockedRemoteContent.allSatisfy { $0.isTracker })
        #expect(result.contentSecurityPolicy == .remoteContent)
        #expect(
            result.html.hasPrefix(
                #"<img src="https://img.example/hero.jpg" width="600"><img data-coffer-blocked-src="0""#
            )
        )

        var options = MailSanitizer.Options(remoteContent: .allow, blockTrackers: false)
        #expect(MailSanitizer(options: options).sanitize(html: input).blockedRemoteContent.isEmpty)
        options.trackerHosts = []
        options.blockTrackers = true
        #expect(MailSanitizer(options: options).sanitize(html: input).trackersBlocked.count == 4)
    }

    /// The gate remembers each host's verdict: every image from a host, first or repeated, subdomain or not, is
    /// judged as the first one was.
    @Test func everyImageFromAHostIsJudgedAlike() {
        let urls = [
            "https://x.list-manage.com/a.gif", "https://img.example/a.jpg", "https://x.list-manage.com/b.gif",
            "https://img.example/b.jpg", "https://y.x.list-manage.com/c.gif",
            "https://list-manage.com.img.example/d.jpg",
        ]
        let input = urls.map { #"<img src="\#($0)" width="600">"# }.joined()
        let result = MailSanitizer().allowingRemoteContent().sanitize(html: input)
        #expect(
            result.loadedRemoteContent.map(\.url) == [
                "https://img.example/a.jpg", "https://img.example/b.jpg", "https://list-manage.com.img.example/d.jpg",
            ]
        )
        #expect(
            result.trackersBlocked.map(\.url) == [
                "https://x.list-manage.com/a.gif", "https://x.list-manage.com/b.gif",
                "https://y.x.list-manage.com/c.gif",
            ]
        )
    }

    @Test func trackersAreReportedWhenBlockedToo() {
        let result = MailSanitizer().sanitize(html: #"<img src="https://t.example/o.gif" height="1" width="1">"#)
        #expect(result.trackersBlocked.map(\.url) == ["https://t.example/o.gif"])
    }

    @Test func restoringLoadsChosenResources() {
        let input = #"<img src="https://a.example/1.png"><img src="https://b.example/2.png">"#
        let sanitizer = MailSanitizer()
        let first = sanitizer.sanitize(html: input)
        #expect(first.blockedRemoteContentCount == 2)
        let some = sanitizer.restoringRemoteContent([first.blockedRemoteContent[1]]).sanitize(html: input)
        #expect(some.html == #"<img data-coffer-blocked-src="0"><img src="https://b.example/2.png">"#)
        #expect(some.loadedRemoteContent.map(\.url) == ["https://b.example/2.png"])
        let all = sanitizer.restoringRemoteContent(first.blockedRemoteContent).sanitize(html: input)
        #expect(all.html == #"<img src="https://a.example/1.png"><img src="https://b.example/2.png">"#)
        #expect(all.contentSecurityPolicy == .remoteContent)
    }

    @Test func contentIDsBecomeDataURLs() {
        let input = #"""
            <img src="cid:logo@example.com"><img src="CID:%3Clogo@example.com%3E"><img src="cid:pic">\#
            <img src="cid:vector"><img src="cid:unknown"><img src="cid:unknown">\#
            <div style="background: url(cid:logo@example.com)">x</div>
            """#
        let result = MailSanitizer().sanitize(html: input) { resolver($0) }
        #expect(
            result.html
                == #"<img src="data:image/png;base64,UE5HREFUQQ=="><img><img src="data:image/jpeg;base64,/9g="><img><img><img>"#
                + #"<div style="background: url(data:image/png;base64,UE5HREFUQQ==)">x</div>"#
        )
        #expect(result.embeddedImageCount == 3)
        #expect(result.missingContentIDs == ["<logo@example.com>", "unknown"])
        #expect(result.blockedRemoteContent.isEmpty)
    }

    /// Only raster images survive as `data:` URLs in images.
    static let dataURLs: [(String, Bool)] = [
        ("data:image/png;base64,iVBORw0KGgo=", true),
        ("data:image/jpeg,abc", true),
        ("data:IMAGE/GIF;base64,R0lGOD", true),
        ("data:image/webp;base64,UklGR", true),
        ("data:image/svg+xml,<svg onload=alert(1)>", false),
        ("data:text/html,<script>alert(1)</script>", false),
        ("data:,123", false),
        ("data:application/javascript,alert(1)", false),
    ]

    @Test(arguments: dataURLs)
    func dataURLsInImages(url: String, kept: Bool) {
        let html = MailSanitizer().sanitize(html: #"<img src="\#(url)">"#).html
        #expect(html.contains("src=") == kept, "\(html)")
    }

    @Test func pageCarriesNoRemoteURLWhenBlocked() {
        let input = #"<style>p{background:url(https://x.example/a)}</style><img src="https://x.example/b">"#
        let result = MailSanitizer().sanitize(html: input)
        let page = MailPage.render(result, title: "Hello")
        #expect(!page.contains("x.example"))
    }
}
