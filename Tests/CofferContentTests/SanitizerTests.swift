import CofferContent
import CofferHTML
import Testing

/// Sanitizes with remote content blocked and checks the result is idempotent and safe.
private func clean(_ html: String, sanitizer: MailSanitizer = MailSanitizer()) -> String {
    let output = sanitizer.sanitize(html: html).html
    #expect(sanitizer.sanitize(html: output).html == output, "not idempotent: \(html)")
    #expect(TestSupport.safetyViolations(output).isEmpty, "unsafe: \(output)")
    return output
}

@Suite("Sanitizer: attacks")
struct AttackTests {
    /// Mutation XSS and namespace-confusion classics: the payload's `<img onerror>` must never
    /// become an element.
    static let mutationCases: [String] = [
        #"<noscript><p title="</noscript><img src=x onerror=alert(1)>">"#,
        #"<svg><style><img src=x onerror=alert(1)></style></svg>"#,
        #"<svg></p><style><a id="</style><img src=1 onerror=alert(1)>">"#,
        #"<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>"#,
        #"<math><mtext><table><mglyph><style><!--</style><img title="--&gt;&lt;img src=1 onerror=alert(1)&gt;">"#,
        #"<form><math><mtext></form><form><mglyph><style></math><img src onerror=alert(1)>"#,
        #"<math><annotation-xml encoding="text/html"><style><img src=x onerror=alert(1)></style></annotation-xml></math>"#,
        #"<svg><foreignobject><p><style><p title="</style><iframe onload&#x3d;alert(1)<!--"></style>"#,
        #"<xmp><svg><b><style><b title='</style><img>'>"#,
        #"<noembed><svg><b><style><b title='</style><img>'>"#,
        #"<template><style></template><img src=x onerror=alert(1)></style>"#,
        #"<textarea></textarea><!--</textarea><img src=x onerror=alert(1)>-->"#,
        #"<style><img src="</style><img src=x onerror=alert(1)//">"#,
        #"<title><img src="</title><img src=x onerror=alert(1)//">"#,
        #"<iframe><img src="</iframe><img src=x onerror=alert(1)//">"#,
        #"<select><template><img src=x onerror=alert(1)></template></select>"#,
        #"<a href="x"><svg><a xlink:href="javascript:alert(1)"><text>x</text></a></svg></a>"#,
        #"<!--><img src=x onerror=alert(1)>-->"#,
        #"<?xml version="1.0"?><img src=x onerror=alert(1)>"#,
        #"<plaintext><img src=x onerror=alert(1)>"#,
    ]

    @Test(arguments: mutationCases)
    func mutationXSS(payload: String) {
        for sanitizer in [MailSanitizer(), MailSanitizer().allowingRemoteContent()] {
            let output = clean(payload, sanitizer: sanitizer)
            let tree = HTMLParser.parseFragment(output, context: "div", scripting: true)
            for element in TestSupport.elements(of: tree) {
                #expect(element.attributes.allSatisfy { !$0.name.hasPrefix("on") })
                #expect(
                    !["script", "iframe", "svg", "math", "style"].contains(element.name) || element.name == "style"
                )
            }
            #expect(!output.lowercased().contains("<img src=x"))
            #expect(!output.contains("onerror=") || output.contains("&lt;") || output.contains("title="))
        }
    }

    /// Link values that must lose their `href`.
    static let hostileLinks: [String] = [
        "javascript:alert(1)",
        "JavaScript:alert(1)",
        "javascript&colon;alert(1)",
        "java\tscript:alert(1)",
        "java\nscript:alert(1)",
        "java&#x09;script:alert(1)",
        " \u{1}javascript:alert(1)",
        "&#x2028;javascript:alert(1)",
        "&#xA0;javascript:alert(1)",
        "&#xFEFF;javascript:alert(1)",
        "&#106;&#97;&#118;&#97;&#115;&#99;&#114;&#105;&#112;&#116;&#58;alert(1)",
        "&#x6A;&#x61;&#x76;&#x61;&#x73;&#x63;&#x72;&#x69;&#x70;&#x74;&#x3A;alert(1)",
        "&#0000106avascript:alert(1)",
        "jav&#x0D;ascript:alert(1)",
        "vbscript:msgbox(1)",
        "livescript:alert(1)",
        "data:text/html,<script>alert(1)</script>",
        "data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==",
        "data:image/svg+xml,<svg onload=alert(1)>",
        "file:///etc/passwd",
        "ftp://example.com/x",
        "cid:part@x",
        "about:blank",
        "x-unknown:foo",
        "relative/page.html",
        "/etc/passwd",
        "?q=1",
    ]

    @Test(arguments: hostileLinks)
    func hostileLinkLosesHref(value: String) {
        #expect(clean(#"<a href="\#(value)">x</a>"#) == "<a>x</a>")
        #expect(clean(#"<area href="\#(value)">"#) == "<area>")
    }

    /// Links that stay, with the target and rel every kept link gets.
    static let allowedLinks: [(String, String)] = [
        (
            "https://example.com/a?b=c&d",
            #"<a href="https://example.com/a?b=c&amp;d" target="_blank" rel="noopener noreferrer">x</a>"#
        ),
        ("http://example.com", #"<a href="http://example.com" target="_blank" rel="noopener noreferrer">x</a>"#),
        ("  https://example.com  ", #"<a href="https://example.com" target="_blank" rel="noopener noreferrer">x</a>"#),
        ("mailto:a@example.com", #"<a href="mailto:a@example.com" target="_blank" rel="noopener noreferrer">x</a>"#),
        ("tel:+15551234", #"<a href="tel:+15551234" target="_blank" rel="noopener noreferrer">x</a>"#),
        ("#section", ##"<a href="#section">x</a>"##),
        ("//example.com/x", #"<a href="https://example.com/x" target="_blank" rel="noopener noreferrer">x</a>"#),
        ("\\\\example.com\\x", #"<a href="https://example.com\x" target="_blank" rel="noopener noreferrer">x</a>"#),
    ]

    @Test(arguments: allowedLinks)
    func allowedLink(value: String, expected: String) {
        #expect(clean(#"<a href="\#(value)" target="_self" rel="opener">x</a>"#) == expected)
    }

    /// Elements dropped with their content, and markup that disappears.
    static let droppedMarkup: [(String, String)] = [
        ("<p>a<script>alert(1)</script>b</p>", "<p>ab</p>"),
        ("<p>a<iframe src=https://x.example></iframe>b</p>", "<p>ab</p>"),
        ("<p>a<object data=x><param name=a value=b></object>b</p>", "<p>ab</p>"),
        ("<p>a<embed src=x>b</p>", "<p>ab</p>"),
        ("<base href=https://evil.example/><p>x</p>", "<p>x</p>"),
        ("<meta http-equiv=refresh content='0;url=https://evil.example'><p>x</p>", "<p>x</p>"),
        ("<link rel=stylesheet href=https://evil.example/x.css><p>x</p>", "<p>x</p>"),
        ("<p>a<!-- comment -->b</p>", "<p>ab</p>"),
        ("<p>a<?php echo 1 ?>b</p>", "<p>ab</p>"),
        ("<p>a<svg><circle r=1></circle>t</svg>b</p>", "<p>ab</p>"),
        ("<p>a<math><mi>x</mi></math>b</p>", "<p>ab</p>"),
        ("<p>a<template>t</template>b</p>", "<p>ab</p>"),
        ("<p>a<noscript>n</noscript>b</p>", "<p>ab</p>"),
        ("<form action=https://evil.example><input name=q value=v><button formaction=x>Go</button></form>", "Go"),
        ("<select><option>one</option></select><textarea>two</textarea>", "onetwo"),
        ("<p onclick=alert(1) onmouseover=alert(2) ONLOAD=x>x</p>", "<p>x</p>"),
        ("<custom-element foo=bar>text</custom-element>", "text"),
        ("<frameset><frame src=x></frameset>", ""),
    ]

    @Test(arguments: droppedMarkup)
    func droppedElements(input: String, expected: String) {
        #expect(clean(input) == expected)
    }

    @Test func formAndNamespaceConfusion() {
        let cases = [
            "<form><math><mtext></form><form><mglyph><svg><mtext><style><path id=\"</style><img onerror=alert(1) src>\">",
            "<math><mi><mglyph><svg><mtext><textarea><path id=\"</textarea><img onerror=alert(1) src=1>\">",
            "<svg><p><style><g title=\"</style><img src=x onerror=alert(1)>\">",
            "<form id=a><input form=a formaction=javascript:alert(1)><button form=a formaction=javascript:alert(1)>x",
        ]
        for payload in cases {
            let output = clean(payload)
            #expect(!output.contains("<form"))
            #expect(!output.contains("formaction"))
            #expect(!output.contains("onerror"))
        }
    }
}

@Suite("Sanitizer: mail profile")
struct ProfileTests {
    @Test func keepsTablesAndPresentationalAttributes() {
        let input = ##"""
            <table width="600" border="0" cellpadding="4" cellspacing="0" align="center" bgcolor="#ffffff">\##
            <tr><td valign="top" colspan="2" nowrap style="padding: 4px">a</td></tr></table>\##
            <center><font color="red" face="Arial" size="2">hi</font></center>
            """##
        let expected = ##"""
            <table width="600" border="0" cellpadding="4" cellspacing="0" align="center" bgcolor="#ffffff">\##
            <tbody><tr><td valign="top" colspan="2" nowrap="" style="padding: 4px">a</td></tr></tbody></table>\##
            <center><font color="red" face="Arial" size="2">hi</font></center>
            """##
        #expect(clean(input) == expected)
    }

    @Test func keepsClassIdInlineStyleAndMaps() {
        let input = ##"""
            <div class="a b" id="main" style="color: red" title="t" dir="rtl" lang="he" data-x="1" aria-label="l">x</div>\##
            <map name="m"><area href="https://a.example" shape="rect" coords="0,0,1,1" ping="https://p.example"></map>\##
            <img src="data:image/png;base64,AAAA" usemap="#m" alt="a" width="10" height="20">
            """##
        let expected = ##"""
            <div class="a b" id="main" style="color: red" title="t" dir="rtl" lang="he" data-x="1" aria-label="l">x</div>\##
            <map name="m"><area href="https://a.example" shape="rect" coords="0,0,1,1" target="_blank" \##
            rel="noopener noreferrer"></map><img src="data:image/png;base64,AAAA" usemap="#m" alt="a" width="10" height="20">
            """##
        #expect(clean(input) == expected)
    }

    @Test func stylesInHeadAreKeptAndScoped() {
        let input = "<html><head><style>p { color: red }</style></head><body><p>x</p></body></html>"
        #expect(clean(input) == "<style>.coffer-message p{ color: red }</style><p>x</p>")
    }

    @Test func bodyAttributesBecomeAWrapper() {
        let input = ##"<body bgcolor="#f0f0f0" text="black" style="margin:0" onload="x()"><p>x</p></body>"##
        let expected =
            ##"<div class="coffer-body" style="background-color: #f0f0f0; color: black; margin:0"><p>x</p></div>"##
        #expect(clean(input) == expected)
    }

    /// Clobbering-prone `id` and `name` values get a prefix; so do references to them.
    static let clobbering: [(String, String)] = [
        (
            #"<img src="data:image/png;base64,AA" name="cookie">"#,
            #"<img src="data:image/png;base64,AA" name="coffer-cookie">"#
        ),
        (#"<p id="location">x</p>"#, #"<p id="coffer-location">x</p>"#),
        (#"<a name="getElementById">x</a>"#, #"<a name="coffer-getElementById">x</a>"#),
        (#"<p id="__proto__">x</p>"#, #"<p id="coffer-__proto__">x</p>"#),
        (##"<a href="#location">x</a>"##, ##"<a href="#coffer-location">x</a>"##),
        (
            ##"<map name="submit"></map><img src="data:image/png;base64,AA" usemap="#submit">"##,
            ##"<map name="coffer-submit"></map><img src="data:image/png;base64,AA" usemap="#coffer-submit">"##
        ),
        ("<style>#cookie { color: red }</style>", "<style>.coffer-message #coffer-cookie{ color: red }</style>"),
        (#"<p id="intro">x</p>"#, #"<p id="intro">x</p>"#),
    ]

    @Test(arguments: clobbering)
    func clobberingProneNamesArePrefixed(input: String, expected: String) {
        #expect(clean(input) == expected)
    }

    @Test func outputNeverStartsWithWhitespaceAndIsStable() {
        #expect(clean("  \n <p>x</p>") == "<p>x</p>")
        #expect(clean("<style>p{color:red}</style>\n  text") == "<style>.coffer-message p{color:red}</style>text")
    }

    @Test func unwrappingSettlesIntoAStableTree() {
        #expect(clean("<pre>\n\nx</pre>") == "<pre>\n\nx</pre>")
        #expect(clean("<p><form><div>x</div></form></p>") == "<p></p><div>x</div><p></p>")
        #expect(clean("<p><button><p>x</p></button></p>") == "<p></p><p>x</p><p></p>")
        #expect(clean("<ul><li>a<custom><li>b</custom></ul>") == "<ul><li>a</li><li>b</li></ul>")
    }

    @Test func deeplyNestedInputIsSafe() {
        let depth = 20_000
        let input = String(repeating: "<div>", count: depth) + "x" + String(repeating: "</div>", count: depth)
        let output = MailSanitizer().sanitize(html: input).html
        #expect(output.hasSuffix("</div>"))
        let styles = "<div style=\"" + String(repeating: "a:calc(", count: 5000) + "\">x</div>"
        #expect(MailSanitizer().sanitize(html: styles).html == "<div>x</div>")
        let sheet = "<style>" + String(repeating: "@media screen{", count: 5000) + "p{color:red}</style>"
        #expect(MailSanitizer().sanitize(html: sheet).html == "")
    }

    @Test func largeInputIsLinear() {
        let row = "<tr><td style=\"color:#333;padding:2px\" class=\"c\">cell &amp; text</td></tr>\n"
        let input = "<table>" + String(repeating: row, count: 20_000) + "</table>"
        let clock = ContinuousClock()
        let start = clock.now
        let output = MailSanitizer().sanitize(html: input).html
        #expect(output.count > input.count / 2)
        #expect(clock.now - start < .seconds(30))
    }
}
