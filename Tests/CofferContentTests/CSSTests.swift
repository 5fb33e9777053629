import Testing

@testable import CofferContent

@Suite("CSS tokenizer and writer")
struct CSSTokenizerTests {
    @Test func escapesAreDecoded() {
        #expect(CSSTokenizer.tokenize(#"\65 xpression("#) == [.function("expression")])
        #expect(CSSTokenizer.tokenize(#"\000065xpression"#) == [.ident("expression")])
        #expect(CSSTokenizer.tokenize(#"url(java\73 cript:alert)"#) == [.url("javascript:alert")])
        #expect(CSSTokenizer.tokenize("url(java\\73 cript:alert(1))") == [.badURL, .closeParen])
        #expect(CSSTokenizer.tokenize(#"\75 \72 \6C (x)"#) == [.url("x")])
        #expect(CSSTokenizer.tokenize(#"'a\'b'"#) == [.string("a'b", singleQuoted: true)])
        #expect(CSSTokenizer.tokenize("\"a\\\nb\"") == [.string("ab", singleQuoted: false)])
    }

    @Test func tokensFollowTheSpec() {
        #expect(
            CSSTokenizer.tokenize("a:1.5em 10% -2 +.5e3 #f00 @media")
                == [
                    .ident("a"), .colon, .dimension("1.5", unit: "em"), .whitespace(" "), .percentage("10"),
                    .whitespace(" "), .number("-2"), .whitespace(" "), .number("+.5e3"), .whitespace(" "),
                    .hash("f00", isID: true), .whitespace(" "), .atKeyword("media"),
                ]
        )
        #expect(CSSTokenizer.tokenize("a/**/b") == [.ident("a"), .ident("b")])
        #expect(CSSTokenizer.tokenize("/* unterminated") == [])
        #expect(CSSTokenizer.tokenize("url( x y )") == [.badURL])
        #expect(
            CSSTokenizer.tokenize("url(\"x\")") == [.function("url"), .string("x", singleQuoted: false), .closeParen]
        )
        #expect(CSSTokenizer.tokenize("\"abc\ndef\"").first == .badString)
        #expect(CSSTokenizer.tokenize("<!-- -->") == [.cdo, .whitespace(" "), .cdc])
    }

    /// Writing tokens back and tokenizing again gives the same tokens.
    static let roundTrips: [String] = [
        "a/**/b", "1/**/e3", "x/**/(", #"\31 23"#, #"a\ b"#, "--custom", "-\\31 x", "url(a\\ b)", "'</style>'",
        "\"a\\\"b\"", "#123", "#-x", "1\\65 3", "a\\3c b", ".5e-2%", "@\\31 x", "\u{1}", "@-x", "- -a", "2n+1", "1 .5",
        "a+.5", "1.5", "n-1",
    ]

    /// What the writer writes: a name, string or URL with nothing to escape as it is, anything else escaped as
    /// CSSOM serializes it (a leading digit, `-` alone, punctuation, `<`, a quote, whitespace in a URL).
    static let writtenForms: [(CSSToken, String)] = [
        (.ident("color"), "color"), (.ident("-webkit-box"), "-webkit-box"), (.ident("_x"), "_x"), (.ident("é"), "é"),
        (.ident("1a"), #"\31 a"#), (.ident("-1a"), #"-\31 a"#), (.ident("-"), #"\-"#), (.ident("a<b"), #"a\3c b"#),
        (.ident("a b"), #"a\ b"#), (.hash("1a", isID: false), "#1a"), (.hash("a.b", isID: false), #"#a\.b"#),
        (.dimension("1", unit: "px"), "1px"), (.dimension("1", unit: "em"), "1em"),
        (.dimension("1", unit: "e3"), #"1\65 3"#), (.dimension("1", unit: "E-2x"), #"1\45 -2x"#),
        (.string("a'b", singleQuoted: false), #""a'b""#), (.string(#"a"b"#, singleQuoted: false), #""a\"b""#),
        (.string("</style>", singleQuoted: true), #"'\3c /style>'"#),
        (.string("a\u{1}", singleQuoted: true), #"'a\1 '"#),
        (.url("https://x.example/a.png"), "url(https://x.example/a.png)"), (.url("a b"), #"url(a\20 b)"#),
        (.url("a)"), #"url(a\29 )"#), (.url("é"), "url(é)"),
    ]

    @Test func writerEscapesOnlyWhatNeedsIt() {
        for (token, expected) in Self.writtenForms {
            var writer = CSSWriter()
            writer.write(token)
            #expect(writer.text == expected, "\(token)")
        }
    }

    @Test(arguments: roundTrips)
    func writerRoundTrips(source: String) {
        let tokens = CSSTokenizer.tokenize(source)
        var writer = CSSWriter()
        for token in tokens { writer.write(token) }
        #expect(CSSTokenizer.tokenize(writer.text) == tokens, "\(source) → \(writer.text)")
        #expect(!writer.text.contains("<"))
    }
}

@Suite("CSS filter")
struct CSSFilterTests {
    private func filter(_ style: String, mode: RemoteContentMode = .block) -> String? {
        let gate = ResourceGate(options: .init(remoteContent: mode), cidResolver: nil)
        return CSSFilter(gate: gate).filterStyleAttribute(style, element: "div")
    }

    private func sheet(_ css: String) -> String {
        let gate = ResourceGate(options: .init(), cidResolver: nil)
        return CSSFilter(gate: gate).filterStyleSheet(css)
    }

    /// Inline styles and what is left of them (`nil`: the attribute is removed).
    static let inlineCases: [(String, String?)] = [
        ("color: red; font-size: 12px", "color: red; font-size: 12px"),
        ("COLOR: Red", "COLOR: Red"),
        ("width: expression(alert(1))", nil),
        (#"width: \65 xpression(alert(1))"#, nil),
        ("width: ｅｘｐｒｅｓｓｉｏｎ(alert(1))", nil),
        ("width: expr/**/ession(alert(1))", nil),
        ("behavior: url(x.htc); color: red", "color: red"),
        (#"b\65 havior: url(x.htc)"#, nil),
        ("-ms-behavior: url(x.htc)", nil),
        ("-moz-binding: url(http://x.example/x.xml#xss)", nil),
        ("-o-link: 'javascript:alert(1)'; -o-link-source: current", nil),
        ("position: fixed; top: 0", "top: 0"),
        (#"position: f\69 xed"#, nil),
        ("position: absolute", "position: absolute"),
        ("background: url(javascript:alert(1))", nil),
        (#"background: url(java\73 cript:alert(1))"#, nil),
        ("background: url('java\\\nscript:alert(1)')", nil),
        ("background: url(\"vbscript:x\")", nil),
        ("background: url(data:text/html,x)", nil),
        ("background: url(relative.png)", nil),
        ("background: url(https://x.example/a.png) red", "background: url(about:invalid) red"),
        (#"background: \75 \72 \6C (https://x.example/a.png)"#, "background: url(about:invalid)"),
        ("background-image: image('https://x.example/a.png')", "background-image: image('about:invalid')"),
        ("background: url(data:image/png;base64,AAAA)", "background: url(data:image/png;base64,AAAA)"),
        ("content: attr(title)", nil),
        ("filter: progid:DXImageTransform.Microsoft.AlphaImageLoader(src='x')", nil),
        ("color: red; font-family: 'Helvetica Neue', Arial", "color: red; font-family: 'Helvetica Neue', Arial"),
        ("font-family: \"a</style>b\"", #"font-family: "a\3c /style>b""#),
        ("color: red !important", "color: red !important"),
        ("--brand: #f00; color: var(--brand)", "--brand: #f00; color: var(--brand)"),
        ("--leak: url(https://x.example/a)", "--leak: url(about:invalid)"),
        ("mso-line-height-rule: exactly", "mso-line-height-rule: exactly"),
        ("color: red; x: y; ;; color", "color: red;"),
        ("color: {red}", nil),
        ("color: red\\", nil),
        ("}color: red", nil),
        ("", nil),
    ]

    @Test(arguments: inlineCases)
    func inlineStyle(input: String, expected: String?) {
        #expect(filter(input) == expected)
    }

    @Test func remoteURLsLoadWhenAllowed() {
        #expect(
            filter("background: url(https://x.example/a.png)", mode: .allow)
                == "background: url(https://x.example/a.png)"
        )
    }

    /// Style sheets: filtered, scoped to the container, at-rules handled.
    static let sheetCases: [(String, String)] = [
        ("p { color: red }", ".coffer-message p{ color: red }"),
        ("* { color: red }", ".coffer-message *{ color: red }"),
        ("body { margin: 0 }", ".coffer-message{ margin: 0 }"),
        ("html body p, :root > div { margin: 0 }", ".coffer-message p, .coffer-message > div{ margin: 0 }"),
        ("body + p { margin: 0 }", ""),
        (".coffer-message p { margin: 0 }", ".coffer-message p{ margin: 0 }"),
        (
            "a:hover, td[align=\"center\"], ul li:nth-child(2n+1) { color: red }",
            #".coffer-message a:hover, .coffer-message td[align="center"], .coffer-message ul li:nth-child(2n+1){ color: red }"#
        ),
        ("@import url(https://x.example/a.css); p { color: red }", " .coffer-message p{ color: red }"),
        ("@import 'x.css'; @charset 'utf-8'; @namespace x url(y);", ""),
        (
            "@media screen and (max-width: 600px) { .a { width: 100% } }",
            "@media screen and (max-width: 600px) { .coffer-message .a{ width: 100% }}"
        ),
        ("@media url(x) { p { color: red } }", ""),
        (
            "@font-face { font-family: f; src: url(https://x.example/f.woff) format('woff') }",
            "@font-face{ font-family: f; src: url(about:invalid) format('woff') }"
        ),
        ("@font-face { font-family: f }", ""),
        ("@keyframes k { from { color: red } }", ""),
        ("p { position: fixed; color: red }", ".coffer-message p{ color: red }"),
        ("p { behavior: url(x) }", ""),
        ("p[foo=bar{}*{-o-link:'javascript:alert(1)'}{}*{color:red}]{color:green}", ""),
        ("<!-- p { color: red } -->", " .coffer-message p{ color: red }"),
        ("p { color: red } </style><script>alert(1)</script>", ".coffer-message p{ color: red }"),
        ("& p { color: red }", ""),
        ("p { & a { color: red } color: blue }", ""),
    ]

    @Test(arguments: sheetCases)
    func styleSheet(input: String, expected: String) {
        #expect(sheet(input) == expected)
    }

    @Test func blockedURLsAreReported() {
        let gate = ResourceGate(options: .init(), cidResolver: nil)
        let css = CSSFilter(gate: gate)
        _ = css.filterStyleSheet(
            "p { background: url(https://a.example/1.png) } @font-face { src: url(//f.example/f) }"
        )
        #expect(gate.blocked.map(\.url) == ["https://a.example/1.png", "//f.example/f"])
        #expect(gate.blocked.map(\.kind) == [.cssImage, .font])
        #expect(gate.blocked.map(\.attribute) == ["background", "src"])
    }
}

@Suite("URL policy")
struct URLPolicyTests {
    /// The host a tracker list is matched against: lowercased (full-width forms folded), without user
    /// information, port or trailing dots, and without the invisible characters a probe ignores.
    static let hosts: [(String, String)] = [
        ("https://Tracker.Example./p.gif", "tracker.example"), ("//user:pw@t.example:8080/x", "t.example"),
        (#"https:\\t.example?x"#, "t.example"), ("https://t.ex\u{200B}ample/", "t.example"),
        ("https://a@b@t.example#x", "t.example"), ("https://bücher.example/", "bücher.example"),
        ("https://ＴＲＡＣＫＥＲ.example/", "tracker.example"), ("https://[::1]:80/", "[::1]:80"),
        ("https://t.example:\u{301}80/", "t.example"), ("mailto:x@y.example", ""), ("https:/t.example", ""),
    ]

    @Test func hostOfARemoteURL() {
        for (url, host) in Self.hosts { #expect(URLPolicy.host(of: url) == host, "\(url)") }
    }

    @Test func aProtocolRelativeURLGetsHTTPS() {
        #expect(URLPolicy.absolute("//t.example/a") == "https://t.example/a")
        #expect(URLPolicy.absolute(#"\\t.example/é"#) == "https://t.example/é")
        #expect(URLPolicy.absolute("https://t.example/") == "https://t.example/")
        #expect(URLPolicy.absolute("/") == "/")
    }
}
