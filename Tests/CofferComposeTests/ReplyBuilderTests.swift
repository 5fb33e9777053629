import CofferContent
import CofferMIME
import CofferSampleMail
import Foundation
import Testing

@testable import CofferCompose

/// Replies and forwards built from received messages: recipients, subject, thread, quoted text, and hostile
/// originals that must not reach the reply's header.
struct ReplyBuilderTests {
    static let me = MailAddress(name: "Me", address: "me@coffer.example")
    static let builder = ReplyBuilder(
        ownAddresses: ["me@coffer.example", "alias@Coffer.Example"],
        timeZone: TimeZone(identifier: "UTC")!
    )

    static func parse(_ text: String) throws -> MIMEMessage {
        try MIMEParser.parse(Array(text.replacingOccurrences(of: "\n", with: "\r\n").utf8))
    }

    static let thread = """
        From: Bob Example <bob@example.org>
        Reply-To: Bob's list <list@example.org>
        To: Me <me@COFFER.EXAMPLE>, Carol <carol@example.net>, alias@coffer.example
        Cc: dan@example.org, Carol <carol@EXAMPLE.net>, me@Coffer.Example, Me <ME@coffer.example>
        Subject: Re: RE: re:  Lunch on Friday
        Date: Wed, 26 Nov 2025 10:09:55 +0000
        Message-ID: <m3@example.org>
        References: <m1@example.org> <m2@example.org>
        In-Reply-To: <m2@example.org>
        Content-Type: text/plain; charset=utf-8

        Shall we meet at noon?

        > earlier quote
        Bob

        """

    @Test func aReplyGoesToReplyToWithOneRePrefixAndTheThread() throws {
        let draft = Self.builder.reply(to: try Self.parse(Self.thread))
        #expect(draft.to == [MailAddress(name: "Bob's list", address: "list@example.org")])
        #expect(draft.cc.isEmpty)
        #expect(draft.subject == "Re: Lunch on Friday")
        #expect(draft.inReplyTo == ["m3@example.org"])
        #expect(draft.references == ["m1@example.org", "m2@example.org", "m3@example.org"])
        #expect(
            draft.body
                == "\n\nOn Wed, 26 Nov 2025 at 10:09, Bob Example wrote:\n> Shall we meet at noon?\n>\n> > earlier quote\n> Bob\n"
        )
    }

    @Test func replyAllLeavesOutOwnAddressesAndListsEachOnce() throws {
        let draft = Self.builder.reply(to: try Self.parse(Self.thread), all: true)
        #expect(draft.to.map(\.address) == ["list@example.org", "carol@example.net"])
        // The local part is compared exactly (RFC 5321 leaves its case to the receiving server).
        #expect(draft.cc.map(\.address) == ["dan@example.org", "ME@coffer.example"])
    }

    @Test func aReplyToOnesOwnMessageGoesToItsRecipients() throws {
        let original = try Self.parse(
            "From: Me <me@coffer.example>\nTo: bob@example.org\nSubject: hi\nMessage-ID: <x@coffer.example>\n\nhello\n"
        )
        let draft = Self.builder.reply(to: original)
        #expect(draft.to.map(\.address) == ["bob@example.org"])
        #expect(draft.references == ["x@coffer.example"])
    }

    @Test func referencesAreBoundedAndKeepTheOriginal() throws {
        let ids = (1...50).map { "<r\($0)@example.org>" }.joined(separator: " ")
        let original = try Self.parse(
            "From: bob@example.org\nSubject: x\nMessage-ID: <last@example.org>\nReferences: \(ids)\n\nx\n"
        )
        let draft = Self.builder.reply(to: original)
        #expect(draft.references.count == 20)
        #expect(draft.references.last == "last@example.org")
        #expect(draft.references.first == "r32@example.org")
    }

    @Test func repliesToGeneratedMailAreWritableAndQuoteEveryLine() throws {
        let mail = SyntheticMail(seed: 3)
        for index in 0..<40 {
            let bytes = mail.message(index)
            let original = try MIMEParser.parse(bytes)
            let draft = Self.builder.reply(to: original, all: true)
            #expect(draft.subject == "Re: " + (original.subject ?? ""))
            #expect(draft.inReplyTo == [original.messageID!])
            // The generated To is one of the me<n>@coffer.example boxes, not ours: it stays in a reply-all.
            #expect(draft.to.first?.address == original.from.first?.address)
            let quoted = draft.body.split(separator: "\n").dropFirst()
            #expect(quoted.allSatisfy { $0.hasPrefix(">") })
            let lines = textLines(original.textBody!).filter { !$0.isEmpty }
            #expect(lines.count >= 6)
            #expect(lines.allSatisfy { quoted.contains(Substring("> " + $0)) })
            var withTo = draft
            withTo.to = withTo.to.isEmpty ? [MailAddress(name: nil, address: "x@example.org")] : withTo.to
            try withTo.checkSendable(from: Self.me)
        }
    }

    @Test func anHTMLOnlyOriginalIsQuotedAsTextWithoutATagOrURL() throws {
        let html = """
            <html><head><style>p { color: red }</style><script>alert(1)</script></head><body>
            <h1>Big news</h1><p>Hello <b>there</b>,<br>second line</p>
            <ul><li>one</li><li>two</li></ul>
            <p><a href="https://tracker.example/click?id=1">Click here</a>
            <img src="https://tracker.example/pixel.gif" alt="logo"></p>
            <table><tr><td>a</td><td>b</td></tr></table>
            <p>&lt;b&gt;literal&lt;/b&gt; &amp; more</p>
            </body></html>
            """
        let original = try Self.parse(
            "From: shop@example.com\nSubject: News\nMessage-ID: <h@example.com>\nContent-Type: text/html; charset=utf-8\n\n"
                + html
        )
        let draft = Self.builder.reply(to: original)
        let quote = draft.body.split(separator: "\n").dropFirst().joined(separator: "\n")
        #expect(
            quote
                == """
                > Big news
                >
                > Hello there,
                > second line
                >
                > - one
                > - two
                >
                > Click here [logo]
                >
                > a b
                >
                > <b>literal</b> & more
                """
        )
        #expect(!quote.contains("https:"))
        #expect(!quote.contains("alert"))
        #expect(!quote.contains("color"))
        #expect(!quote.contains("<p") && !quote.contains("<a") && !quote.contains("<img"))
    }

    @Test func aTextPartIsPreferredToTheHTMLPart() throws {
        let original = try Self.parse(
            """
            From: bob@example.org
            Subject: both
            Content-Type: multipart/alternative; boundary="b"

            --b
            Content-Type: text/plain; charset=utf-8

            plain words
            --b
            Content-Type: text/html; charset=utf-8

            <p>html words</p>
            --b--

            """
        )
        let body = Self.builder.reply(to: original).body
        #expect(body.contains("> plain words"))
        #expect(!body.contains("html words"))
    }

    /// A From or Subject with line breaks, raw or hidden in encoded words, must not add a field to the reply.
    @Test(arguments: [
        "From: =?utf-8?q?Bob=0D=0ABcc=3A_eve=40evil=2Eexample?= <bob@example.org>",
        "From: \"=?utf-8?b?Qm9iDQpCY2M6IGV2ZUBldmlsLmV4YW1wbGU=?=\" <bob@example.org>",
        "From: \"Bob\r\nBcc: eve@evil.example\" <bob@example.org>",
        "From: bob@example.org\nReply-To: =?utf-8?q?x=0ABcc=3A_eve=40evil=2Eexample?= <bob@example.org>",
        "From: bob@example.org\nSubject: =?utf-8?q?hi=0D=0ABcc=3A_eve=40evil=2Eexample?=",
        "From: bob@example.org\nSubject: =?utf-8?q?hi=E2=80=A8Bcc=3A_eve=40evil=2Eexample?=",
        "From: bob@example.org\nSubject: hi\nMessage-ID: <a@b>\r\nBcc: eve@evil.example>",
    ])
    func aHostileOriginalCannotAddAFieldToTheReply(header: String) throws {
        let original = try Self.parse(header + "\nMessage-ID: <hostile@example.org>\nTo: me@coffer.example\n\nhello\n")
        for draft in [Self.builder.reply(to: original), Self.builder.reply(to: original, all: true)] {
            let text = ComposeTemplate.render(draft, from: Self.me)
            let parsed = try ComposeTemplate.parse(text, from: Self.me, basedOn: draft)
            #expect(parsed.bcc.isEmpty)
            var sendable = parsed
            if sendable.to.isEmpty { sendable.to = [MailAddress(name: nil, address: "bob@example.org")] }
            try sendable.checkSendable(from: Self.me)
            let written = try MessageWriter.bytes(of: sendable.outgoingMessage(from: Self.me))
            #expect(!written.envelope.recipients.contains("eve@evil.example"))
            let head = String(decoding: written.bytes, as: UTF8.self).components(separatedBy: "\r\n\r\n")[0]
            let fieldNames = head.components(separatedBy: "\r\n").filter { !$0.hasPrefix(" ") && !$0.hasPrefix("\t") }
                .map { $0.prefix { $0 != ":" } }
            #expect(!fieldNames.contains("Bcc"))
            #expect(
                Set(fieldNames).isSubset(of: [
                    "Date", "From", "To", "Cc", "Subject", "Message-ID", "In-Reply-To", "References", "MIME-Version",
                    "Content-Type", "Content-Transfer-Encoding",
                ])
            )
        }
    }

    @Test func aHugeOriginalIsQuotedOnlyUpToTheLimit() throws {
        let line = String(repeating: "word ", count: 19) + "end"
        let body = Array(repeating: line, count: 100_000).joined(separator: "\n")
        let original = try Self.parse("From: bob@example.org\nSubject: big\n\n" + body)
        let draft = Self.builder.reply(to: original)
        #expect(draft.body.utf8.count < Self.builder.maxQuotedBytes + 4096)
        #expect(draft.body.hasSuffix("> " + ReplyBuilder.shortenedNotice + "\n"))
        let html = "<p>" + Array(repeating: line, count: 200_000).joined(separator: "</p><p>") + "</p>"
        let htmlOnly = try Self.parse("From: bob@example.org\nSubject: big\nContent-Type: text/html\n\n" + html)
        let small = ReplyBuilder(ownAddresses: [], maxQuotedBytes: 10_000, maxHTMLBytes: 100_000)
        let htmlDraft = small.reply(to: htmlOnly)
        #expect(htmlDraft.body.utf8.count < 12_000)
        #expect(htmlDraft.body.contains(ReplyBuilder.shortenedNotice))
    }

    @Test func aForwardCarriesTheSummaryAndTextInline() throws {
        let draft = Self.builder.forward(try Self.parse(Self.thread))
        #expect(draft.subject == "Fwd: Re: RE: re:  Lunch on Friday")
        #expect(draft.to.isEmpty && draft.inReplyTo.isEmpty)
        #expect(draft.body.contains("---------- Forwarded message ----------\nFrom: Bob Example <bob@example.org>\n"))
        #expect(draft.body.contains("Date: Wed, 26 Nov 2025 at 10:09\n"))
        #expect(draft.body.contains("\n\nShall we meet at noon?\n\n> earlier quote\nBob\n"))
        #expect(Self.builder.forward(try Self.parse("From: a@example.org\nSubject: Fwd: x\n\ny")).subject == "Fwd: x")
    }

    @Test func aForwardCanAttachTheOriginalWhole() throws {
        let bytes = SyntheticMail(seed: 9).message(4, attachment: true)
        let original = try MIMEParser.parse(bytes)
        var draft = Self.builder.forward(original, attaching: bytes)
        #expect(draft.forwardedOriginal?.bytes == bytes)
        #expect(draft.forwardedOriginal?.filename == (original.subject ?? "") + ".eml")
        #expect(ComposeTemplate.render(draft, from: Self.me).contains("# The original message is attached whole"))
        draft.to = [MailAddress(name: nil, address: "bob@example.org")]
        let message = draft.outgoingMessage(from: Self.me)
        #expect(message.attachments.count == 1)
        #expect(message.attachments.first?.contentType == "message/rfc822")
        // As received (CRLF) it is attached as it is, 7bit or 8bit (RFC 2046 5.2.1), and read back byte for byte.
        try draft.checkSendable(from: Self.me)
        let written = try MessageWriter.bytes(of: draft.outgoingMessage(from: Self.me)).bytes
        let enclosed = try #require(try MIMEParser.parse(written).attachments.first)
        #expect(enclosed.contentType.mimeType == "message/rfc822")
        #expect(enclosed.body == bytes)
        // With bare line feeds it could not travel unencoded: refused, not repaired.
        draft.forwardedOriginal?.bytes = Array(
            String(decoding: bytes, as: UTF8.self).replacingOccurrences(of: "\r\n", with: "\n").utf8
        )
        #expect(
            throws: CompositionError.unwritable(
                .enclosedMessageNotSendable(index: 1, reason: "a line feed without a carriage return")
            )
        ) {
            try draft.checkSendable(from: Self.me)
        }
    }

    @Test func theAttachedOriginalsFileNameCannotNameAPathOrAHiddenFile() throws {
        let hostile = try Self.parse("From: a@example.org\nSubject: ../..\\evil/name\n\nx")
        #expect(Self.builder.forward(hostile, attaching: []).forwardedOriginal?.filename == "_.._evil_name.eml")
        let untitled = try Self.parse("From: a@example.org\n\nx")
        #expect(Self.builder.forward(untitled, attaching: []).forwardedOriginal?.filename == "message.eml")
    }
}
