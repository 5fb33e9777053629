import CofferMIME
import Testing

@testable import CofferCompose

/// The editor's template: what is rendered parses back to the same draft, every malformed line is a clear error,
/// and nothing typed in the body or smuggled into a value becomes a header.
struct ComposeTemplateTests {
    static let alice = MailAddress(name: "Alice Example", address: "alice@example.com")

    static let draft = ComposeDraft(
        to: [
            MailAddress(name: "Bob", address: "bob@example.org"), MailAddress(name: nil, address: "carol@example.net"),
        ],
        cc: [MailAddress(name: "Smith, Dan", address: "dan@example.org")],
        bcc: [MailAddress(name: "Jürgen Müller", address: "j@example.de")],
        subject: "Grüße: the plan",
        body: "Hi Bob,\n\n# not a comment: the body keeps it\nBcc: eve@evil.example\n",
        attachmentPaths: ["/home/alice/report.pdf", "notes with spaces.txt"],
        inReplyTo: ["parent@example.org"],
        references: ["root@example.org", "parent@example.org"]
    )

    @Test func aRenderedDraftParsesBackToTheSameDraft() throws {
        let text = ComposeTemplate.render(Self.draft, from: Self.alice)
        let parsed = try ComposeTemplate.parse(text, from: Self.alice, basedOn: Self.draft)
        #expect(parsed == Self.draft)
        // The thread rides along without an editable line.
        #expect(!text.contains("parent@example.org"))
        #expect(text.hasPrefix("# "))
        #expect(
            text.contains("\nFrom: \"Alice Example\" <alice@example.com>\n")
                || text.contains("\nFrom: Alice Example <alice@example.com>\n")
        )
    }

    @Test func anEmptyDraftRendersEmptyFieldsAndParsesBack() throws {
        let text = ComposeTemplate.render(ComposeDraft(), from: Self.alice)
        #expect(text.contains("\nTo: \nCc: \nBcc: \nSubject: \nAttach: \n\n"))
        let parsed = try ComposeTemplate.parse(text, from: Self.alice)
        #expect(parsed == ComposeDraft())
        // A draft may have no recipient; sending may not.
        #expect(throws: CompositionError.noRecipients) { try parsed.checkSendable(from: Self.alice) }
    }

    @Test func bodyLinesThatLookLikeHeadersStayInTheBody() throws {
        let text = "To: bob@example.org\nSubject: hi\n\nBcc: eve@evil.example\nTo: mallory@evil.example\n# kept\n"
        let parsed = try ComposeTemplate.parse(text, from: Self.alice)
        #expect(parsed.bcc.isEmpty)
        #expect(parsed.to == [MailAddress(name: nil, address: "bob@example.org")])
        #expect(parsed.body == "Bcc: eve@evil.example\nTo: mallory@evil.example\n# kept\n")
        let written = String(
            decoding: try MessageWriter.bytes(of: parsed.outgoingMessage(from: Self.alice)).bytes,
            as: UTF8.self
        )
        let head = written[..<written.range(of: "\r\n\r\n")!.lowerBound]
        #expect(!head.contains("evil.example"))
        let envelope = try MessageWriter(parsed.outgoingMessage(from: Self.alice)).envelope
        #expect(envelope.recipients == ["bob@example.org"])
    }

    @Test func repeatedAndContinuedFieldsAddUp() throws {
        let text = """
            # comment
            to: bob@example.org,
              carol@example.net
            To: dan@example.org
            Subject: a long
              subject
            Attach: /a
              /b c
            ATTACH: /d

            body
            """
        let parsed = try ComposeTemplate.parse(text, from: Self.alice)
        #expect(parsed.to.map(\.address) == ["bob@example.org", "carol@example.net", "dan@example.org"])
        #expect(parsed.subject == "a long subject")
        #expect(parsed.attachmentPaths == ["/a", "/b c", "/d"])
        #expect(parsed.body == "body\n")
    }

    @Test func aFileSavedWithCRLFParsesAsWithLF() throws {
        let text = "To: bob@example.org\r\nSubject: hi\r\n\r\nline 1\r\nline 2\r\n\r\n\r\n"
        let parsed = try ComposeTemplate.parse(text, from: Self.alice)
        #expect(parsed.subject == "hi")
        #expect(parsed.body == "line 1\nline 2\n")
    }

    @Test func aTemplateWithoutBodyHasAnEmptyBody() throws {
        let parsed = try ComposeTemplate.parse("To: bob@example.org\nSubject: hi", from: Self.alice)
        #expect(parsed.body == "")
        #expect(parsed.subject == "hi")
    }

    @Test func theFromLineMayStayOrGoButNotChange() throws {
        _ = try ComposeTemplate.parse("From: alice@EXAMPLE.COM\nTo: b@example.org\n\nx", from: Self.alice)
        // The domain's case does not matter; the local part's does.
        _ = try ComposeTemplate.parse("From: Alice <alice@Example.COM>\n\nx", from: Self.alice)
        _ = try ComposeTemplate.parse("To: b@example.org\n\nx", from: Self.alice)
        #expect(throws: CompositionError.fromChanged(line: 1)) {
            try ComposeTemplate.parse("From: mallory@example.com\n\nx", from: Self.alice)
        }
        #expect(throws: CompositionError.fromChanged(line: 1)) {
            try ComposeTemplate.parse("From: ALICE@example.com\n\nx", from: Self.alice)
        }
        #expect(throws: CompositionError.fromChanged(line: 1)) {
            try ComposeTemplate.parse("From: alice@example.com, bob@example.org\n\nx", from: Self.alice)
        }
        #expect(throws: CompositionError.repeatedField(field: "From", line: 2)) {
            try ComposeTemplate.parse("From: alice@example.com\nFrom: alice@example.com\n\nx", from: Self.alice)
        }
    }

    /// Every parse error, with the line it names.
    @Test(arguments: [
        ("To: bob@example.org\nHello Bob,\nhow are you?\n", CompositionError.missingBlankLine(line: 2)),
        ("  continued\nTo: b@example.org\n\n", .missingBlankLine(line: 1)),
        ("To: b@example.org\nReply-To: eve@evil.example\n\nbody", .unknownField(line: 2, name: "Reply-To")),
        ("X-Mailer: evil\n\n", .unknownField(line: 1, name: "X-Mailer")),
        ("Dear Bob: hello\n\n", .missingBlankLine(line: 1)),
        ("Subject: a\nSubject: b\n\n", .repeatedField(field: "Subject", line: 2)),
        ("To: bob@\n\n", .invalidAddress(field: "To", line: 1, text: "bob@")),
        ("Cc: b@example.org, not an address\n\n", .invalidAddress(field: "Cc", line: 1, text: "not an address")),
        (
            "Bcc: b@example.org c@example.org\n\n",
            .invalidAddress(field: "Bcc", line: 1, text: "b@example.org c@example.org")
        ),
        ("To: bob@exämple.org\n\n", .invalidAddress(field: "To", line: 1, text: "bob@exämple.org")),
        ("To: b@example.org,\n  x@\n\n", .invalidAddress(field: "To", line: 1, text: "x@")),
        ("To: b@c@example.org\n\n", .invalidAddress(field: "To", line: 1, text: "b@c@example.org")),
        ("To: bob @ example.org\n\n", .invalidAddress(field: "To", line: 1, text: "bob @ example.org")),
        (
            "To: Bob <b@example.org> c@example.org\n\n",
            .invalidAddress(field: "To", line: 1, text: "Bob <b@example.org> c@example.org")
        ),
    ])
    func aMalformedTemplateIsAClearError(text: String, expected: CompositionError) {
        #expect(throws: expected) { try ComposeTemplate.parse(text, from: Self.alice) }
    }

    @Test func errorsNameTheLineButNeverTheText() {
        let error = CompositionError.invalidAddress(field: "To", line: 3, text: "secret-name@\u{1B}[31m")
        #expect(error.description == "Line 3 (To) holds an address that is not valid.")
        #expect(error.offendingText == "\"secret-name@\\u{1b}[31m\"")
        #expect(!CompositionError.unknownField(line: 1, name: "X\u{1B}]0;pwn\u{07}").description.contains("\u{1B}"))
    }

    /// Characters that would end a header line or hide one, in every header field of the template.
    static let injections: [String] = [
        "a\rBcc: eve@evil.example", "a\u{2028}Bcc: eve@evil.example", "a\u{2029}x", "a\u{85}x", "a\u{0}x",
        "a\u{1B}[2Jx", "a\u{7F}x", "a\u{0B}x", "a\u{0C}x",
    ]

    @Test(arguments: injections, ["To", "Cc", "Bcc", "Subject", "Attach", "From"])
    func controlCharactersInAnyFieldAreRefused(injection: String, field: String) {
        let value = field == "Subject" || field == "Attach" ? injection : "\"\(injection)\" <b@example.org>"
        let text = "To: b@example.org\n\(field): \(value)\n\nbody"
        #expect(throws: CompositionError.forbiddenCharacter(field: field, line: 2)) {
            try ComposeTemplate.parse(text, from: Self.alice)
        }
    }

    @Test func anEncodedWordInANameCannotSmuggleALineBreak() {
        // The address parser decodes encoded words in names; a decoded CR LF is refused, not written.
        let text = "To: =?utf-8?q?Bob=0D=0ABcc=3A_eve=40evil=2Eexample?= <b@example.org>\n\nbody"
        #expect(throws: CompositionError.forbiddenCharacter(field: "To", line: 1)) {
            try ComposeTemplate.parse(text, from: Self.alice)
        }
    }

    @Test func hostileValuesRenderOnOneLineAndParseBack() throws {
        let draft = ComposeDraft(
            to: [MailAddress(name: "Evil\r\nBcc: eve@evil.example", address: "b@example.org")],
            cc: [MailAddress(name: "=?utf-8?q?X=0D=0AY?=", address: "c@example.org")],
            subject: "hello\r\nBcc: eve@evil.example",
            attachmentPaths: ["/tmp/a\nAttach: /etc/shadow"]
        )
        let text = ComposeTemplate.render(draft, from: Self.alice, instructions: ["line\nbreak"])
        let parsed = try ComposeTemplate.parse(text, from: Self.alice, basedOn: draft)
        #expect(parsed.to.map(\.address) == ["b@example.org"])
        #expect(parsed.cc.map(\.address) == ["c@example.org"])
        #expect(parsed.bcc.isEmpty)
        #expect(parsed.subject == "hello  Bcc: eve@evil.example")
        #expect(parsed.attachmentPaths == ["/tmp/a Attach: /etc/shadow"])
        #expect(parsed.to[0].name == "Evil  Bcc: eve@evil.example")
        // The look-alike encoded word is shown broken up, so it reads back as the text it is, not decoded.
        #expect(parsed.cc[0].name?.contains("\r") == false)
        try parsed.checkSendable(from: Self.alice)
    }

    @Test func aTemplateOverTheLimitIsRefused() {
        let text = "To: b@example.org\n\n" + String(repeating: "x", count: ComposeTemplate.maxLength)
        #expect(throws: CompositionError.tooLong(limit: ComposeTemplate.maxLength)) {
            try ComposeTemplate.parse(text, from: Self.alice)
        }
    }

    @Test func theOutgoingMessageCarriesTheAccountsFromAndTheThread() throws {
        let message = Self.draft.outgoingMessage(from: Self.alice)
        #expect(message.from == Self.alice)
        #expect(message.inReplyTo == ["parent@example.org"])
        #expect(message.references == ["root@example.org", "parent@example.org"])
        #expect(message.attachments.isEmpty)
        let parsed = try MIMEParser.parse(MessageWriter.bytes(of: message).bytes)
        #expect(parsed.subject == "Grüße: the plan")
        #expect(parsed.cc.first?.name == "Smith, Dan")
        #expect(parsed.textBody?.replacingOccurrences(of: "\r\n", with: "\n") == Self.draft.body)
    }

    @Test func sendingNeedsARecipientAndAWritableMessage() throws {
        try Self.draft.checkSendable(from: Self.alice)
        var onlyBcc = ComposeDraft(bcc: [MailAddress(name: nil, address: "b@example.org")])
        try onlyBcc.checkSendable(from: Self.alice)
        onlyBcc.subject = "bad\u{1B}subject"
        #expect(throws: CompositionError.unwritable(.forbiddenCharacter(.subject))) {
            try onlyBcc.checkSendable(from: Self.alice)
        }
    }
}
