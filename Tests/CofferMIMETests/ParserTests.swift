import Foundation
import Testing

@testable import CofferMIME

private func parse(_ text: String) throws -> MIMEMessage {
    try MIMEParser.parse(Array(text.utf8))
}

@Suite struct HeaderTests {
    @Test func foldedHeadersAreUnfolded() throws {
        let message = try parse("Subject: a long\r\n  subject line\r\nX-Thing:\tvalue \r\n\r\nbody\r\n")
        #expect(message.subject == "a long  subject line")
        #expect(message.header("x-thing")?.value == "value ")
        #expect(message.header("Subject")?.rawValue == " a long\r\n  subject line")
    }

    /// Field names match ignoring ASCII case only: a Kelvin sign is not a "K", a non-letter differing by 0x20 is
    /// another character ("@" is not "`"), and a longer or shorter name never matches.
    @Test func fieldNamesMatchIgnoringASCIICaseOnly() throws {
        let message = try parse("X-@: c\r\nX-Thing2: d\r\nKEYWORDS: a\r\n\r\nbody\r\n")
        #expect(message.root.headers(named: "keywords").map(\.value) == ["a"])
        // The parser drops a field whose name is not ASCII; a field made by hand still never matches one.
        let kelvin = HeaderField(name: "\u{212A}eywords", rawValue: " b", value: "b")
        #expect(!kelvin.hasName("keywords") && !kelvin.hasName("Keywords") && kelvin.hasName("\u{212A}eywords"))
        #expect(message.header("x-`") == nil)
        #expect(message.header("X-@")?.value == "c")
        #expect(message.header("x-thing") == nil)
        #expect(message.header("x-thing2")?.value == "d")
        #expect(message.header("x-thing22") == nil)
    }

    @Test(arguments: [
        ("=?utf-8?q?caf=C3=A9?=", "café"),
        ("=?UTF-8?B?w6kgw6A=?=", "é à"),
        ("=?iso-8859-1?q?caf=E9?= au lait", "café au lait"),
        ("=?iso-8859-2?q?=B1?=", "ą"),
        ("=?iso-8859-15?q?=A4?=", "€"),
        ("=?windows-1252?q?=80?=", "€"),
        ("=?windows-1250?q?=9A?=", "š"),
        ("=?utf-8?q?a?= =?utf-8?q?b?=", "ab"),
        ("=?utf-8?q?a?=\r\n =?utf-8?q?_b?=", "a b"),
        ("x =?utf-8?q?a?=  y", "x a  y"),
        ("foo=?utf-8?q?x?=bar", "fooxbar"),
        ("=?utf-8?q?unterminated", "=?utf-8?q?unterminated"),
        ("=?utf-8?x?abc?=", "=?utf-8?x?abc?="),
        ("=?no-such-charset?q?abc?=", "abc"),
        // Invalid words are shown as written (RFC 2047 section 6.3), never as replacement characters.
        ("=?utf-8?q?caf=C3?=", "=?utf-8?q?caf=C3?="),
        ("=?utf-8?b?!!!!?=", "=?utf-8?b?!!!!?="),
        ("=?utf-8?b?w6kgw6A=x?=", "=?utf-8?b?w6kgw6A=x?="),
        ("=?utf-8?q?a=ZZ?=", "=?utf-8?q?a=ZZ?="),
        ("=?utf-8?q?a b?=", "=?utf-8?q?a b?="),
        ("=?us-ascii?q?caf=E9?=", "=?us-ascii?q?caf=E9?="),
        ("=?utf 8?q?abc?=", "=?utf 8?q?abc?="),
        ("=?ISO-8859-1*fr?Q?caf=E9?=", "café"),
        ("plain  text ", "plain  text"),
    ])
    func encodedWords(raw: String, expected: String) throws {
        let message = try parse("Subject: \(raw)\n\nbody\n")
        #expect(message.subject == expected)
    }

    /// An encoded word that runs across a comma, with or without spaces, must not swallow the addresses after it
    /// into a display name: every address the server will send to is listed.
    @Test(arguments: [
        "=?utf-8?q?Boss, attacker@evil.example, x?= <victim@example.com>",
        "=?utf-8?q?Boss,attacker@evil.example,x?= <victim@example.com>",
    ])
    func encodedWordCannotHideRecipients(to: String) throws {
        let message = try parse("To: \(to)\n\nbody\n")
        let addresses = message.to.map(\.address)
        #expect(addresses.contains("attacker@evil.example"))
        #expect(addresses.contains("victim@example.com"))
    }

    @Test func rawUTF8HeaderIsDecoded() throws {
        let message = try MIMEParser.parse(Array("Subject: Grüße\n\n".utf8))
        #expect(message.subject == "Grüße")
    }

    @Test func addressLists() throws {
        let message = try parse(
            """
            From: "Doe, John" <john@example.com>
            To: Team: a@x.org, "B" <b@y.org>;, c@z.org, =?utf-8?q?J=C3=B6rg?= <j@x.org>
            Cc: joe@example.com (Joe Bloggs), John  Q.   Public <jqp@example.com>
            Bcc: undisclosed-recipients:;

            body
            """
        )
        #expect(message.from == [MailAddress(name: "Doe, John", address: "john@example.com")])
        #expect(
            message.to == [
                MailAddress(name: nil, address: "a@x.org", group: "Team"),
                MailAddress(name: "B", address: "b@y.org", group: "Team"),
                MailAddress(name: nil, address: "c@z.org"),
                MailAddress(name: "Jörg", address: "j@x.org"),
            ]
        )
        #expect(
            message.cc == [
                MailAddress(name: nil, address: "joe@example.com"),
                MailAddress(name: "John Q. Public", address: "jqp@example.com"),
            ]
        )
        #expect(message.bcc.isEmpty)
    }

    @Test(arguments: [
        ("Tue, 1 Jul 2003 10:52:37 +0200", 1_057_049_557.0),
        ("1 Jul 2003 10:52:37 -0000", 1_057_056_757.0),
        ("Tue, 1 Jul 03 10:52 GMT", 1_057_056_720.0),
        ("Tue, 01 Jul 2003 10:52:37 +0200 (CEST)", 1_057_049_557.0),
        ("Tue Jul  1 10:52:37 2003", 1_057_056_757.0),
        ("1 Jul 2003 10:52:37 EDT", 1_057_071_157.0),
        ("1 Jul 2003 10.52.37 +0100", 1_057_053_157.0),
        ("Tuesday, 01-Jul-03 10:52:37 GMT", 1_057_056_757.0),
    ])
    func dates(raw: String, expected: Double) throws {
        let message = try parse("Date: \(raw)\n\nbody\n")
        #expect(message.date?.timeIntervalSince1970 == expected)
    }

    @Test(arguments: ["garbage", "32 Jul 2003 10:52:37 +0000", "1 Jul 2003 25:00:00 +0000", ""])
    func invalidDates(raw: String) throws {
        let message = try parse("Date: \(raw)\n\nbody\n")
        #expect(message.date == nil)
    }

    @Test func messageIDs() throws {
        let message = try parse(
            "Message-ID:  <abc@x>  \nIn-Reply-To: <c@z> (x)\nReferences: <a@x>\n <b@y>\t<c@z>\n\nbody\n"
        )
        #expect(message.messageID == "abc@x")
        #expect(message.inReplyTo == ["c@z"])
        #expect(message.references == ["a@x", "b@y", "c@z"])
    }

    @Test func unixFromLineIsSkipped() throws {
        let message = try parse("From someone@example.com Tue Jul  1 10:52:37 2003\nSubject: s\n\nbody\n")
        #expect(message.subject == "s")
        #expect(message.headers.count == 1)
    }
}

@Suite struct StructureTests {
    static let nested = """
        From: a@example.com
        Subject: nested
        MIME-Version: 1.0
        Content-Type: multipart/mixed; boundary="outer"

        preamble
        --outer
        Content-Type: multipart/alternative; boundary=inner

        --inner
        Content-Type: text/plain; charset=iso-8859-1
        Content-Transfer-Encoding: quoted-printable

        caf=E9 =
        soft
        --inner
        Content-Type: multipart/related; boundary="rel"

        --rel
        Content-Type: text/html; charset=utf-8
        Content-Transfer-Encoding: base64

        PGI+aGk8L2I+
        --rel
        Content-Type: image/png
        Content-ID: <logo@x>
        Content-Transfer-Encoding: base64

        iVBORw0KGgo=
        --rel--
        --inner--
        --outer
        Content-Type: application/pdf; name="ignored.pdf"
        Content-Disposition: attachment; filename*=utf-8''r%C3%A9sum%C3%A9.pdf
        Content-Transfer-Encoding: base64

        JVBERi0x
        --outer--
        epilogue
        """

    @Test func nestedMultipartTree() throws {
        let message = try parse(Self.nested)
        let types = message.root.allParts.map(\.contentType.mimeType)
        #expect(
            types == [
                "multipart/mixed", "multipart/alternative", "text/plain", "multipart/related", "text/html",
                "image/png", "application/pdf",
            ]
        )
        #expect(message.textBody == "café soft")
        #expect(message.htmlBody == "<b>hi</b>")
        let attachments = message.attachments
        #expect(attachments.count == 2)
        #expect(attachments[0].contentID == "logo@x")
        #expect(attachments[0].body == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        #expect(attachments[1].filename == "résumé.pdf")
        #expect(attachments[1].body == Array("%PDF-1".utf8))
        #expect(message.defects.isEmpty)
    }

    @Test func rfc2231Continuations() throws {
        let message = try parse(
            """
            Content-Type: application/octet-stream
            Content-Disposition: attachment; filename*0*=utf-8''f%C3%BC; filename*1="rest .txt"

            x
            """
        )
        #expect(message.root.filename == "fürest .txt")
    }

    @Test func encodedWordFilename() throws {
        let message = try parse("Content-Type: application/pdf; name=\"=?utf-8?b?w6kucGRm?=\"\n\nx\n")
        #expect(message.root.filename == "é.pdf")
    }

    @Test func enclosedMessage() throws {
        let message = try parse(
            """
            Content-Type: multipart/mixed; boundary=b

            --b
            Content-Type: text/plain

            see attached
            --b
            Content-Type: message/rfc822

            Subject: inner
            Content-Type: text/plain; charset=utf-8

            inner body
            --b--
            """
        )
        let types = message.root.allParts.map(\.contentType.mimeType)
        #expect(types == ["multipart/mixed", "text/plain", "message/rfc822", "text/plain"])
        #expect(message.textBody == "see attached")
        #expect(message.attachments.isEmpty)
        let enclosed = message.root.children[1]
        #expect(enclosed.children.first?.header("Subject")?.value == "inner")
        #expect(enclosed.children.first?.text == "inner body")
    }

    @Test func digestDefaultsToMessage() throws {
        let message = try parse("Content-Type: multipart/digest; boundary=b\n\n--b\n\nFrom: x@y\n\nhi\n--b--\n")
        #expect(
            message.root.allParts.map(\.contentType.mimeType) == ["multipart/digest", "message/rfc822", "text/plain"]
        )
    }

    @Test func crlfBodiesKeepTheirLineEndings() throws {
        let text = "Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\nline1\r\nline2\r\n--b--\r\n"
        let message = try parse(text)
        #expect(message.textBody == "line1\r\nline2")
    }

    @Test func charsets() throws {
        let cases: [(String, [UInt8], String)] = [
            ("us-ascii", [0x61, 0xE9], "a\u{FFFD}"),
            ("ISO-8859-1", [0xE9], "é"),
            ("iso-8859-2", [0xB1, 0xE6], "ąć"),
            ("iso-8859-15", [0xA4, 0xBD], "€œ"),
            ("windows-1250", [0x8A, 0x9A], "Šš"),
            ("windows-1252", [0x80, 0x93, 0x94], "€“”"),
            ("koi8-r", [0xF0, 0xD2, 0xC9], "При"),
            ("x-unknown-charset", [0x68, 0xC3, 0xA9, 0xFF], "hé\u{FFFD}"),
        ]
        for (charset, bytes, expected) in cases {
            let header = Array("Content-Type: text/plain; charset=\"\(charset)\"\n\n".utf8)
            let message = try MIMEParser.parse(header + bytes)
            #expect(message.textBody == expected, "charset \(charset)")
        }
    }

    @Test func undeclaredCharsetFallsBack() throws {
        let utf8 = try MIMEParser.parse(Array("Subject: x\n\ncaf\u{E9}".utf8))
        #expect(utf8.textBody == "café")
        let latin = try MIMEParser.parse(Array("Subject: x\n\ncaf".utf8) + [0xE9])
        #expect(latin.textBody == "café")
    }

    @Test func transferDecoders() {
        #expect(TransferDecoding.base64(Array("aGVs\nbG8=".utf8)) == Array("hello".utf8))
        #expect(TransferDecoding.base64(Array("aGVsbG8".utf8)) == Array("hello".utf8))
        #expect(TransferDecoding.base64(Array("a!G*V@sbG8=trailing".utf8)) == Array("hello".utf8))
        let qp = TransferDecoding.quotedPrintable(Array("a=\r\nb=3d=3D=\nc= \r\nd=zz==e ok  \r\nx=".utf8))
        #expect(qp == Array("ab==c= \r\nd=zz=e ok  \r\nx".utf8))
    }

    @Test func deliberateDeparturesFromPython() throws {
        let encoding = try parse(
            "Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: quoted-printable  \n\ncaf=C3=A9\n"
        )
        #expect(encoding.textBody == "café\n")
        let filename = try parse(
            "Content-Type: application/pdf\nContent-Disposition: attachment; filename=old.pdf;"
                + " filename*=utf-8''n%C3%A9w.pdf\n\nx\n"
        )
        #expect(filename.root.filename == "néw.pdf")
        let base64 = try parse("Content-Type: text/plain\nContent-Transfer-Encoding: base64\n\naGVsbG8gd\n")
        #expect(base64.textBody == "hello ")
    }
}
