import Foundation
import Testing

@testable import CofferMIME

/// Every field a person types or a received message supplies, with every injection vector: the writer refuses them
/// with `ComposeError.forbiddenCharacter` naming the field, and never writes a byte of them.
@Suite struct HeaderInjectionTests {
    static let vectors: [String] = [
        "a\r\nBcc: x@evil.example", "a\nBcc: x@evil.example", "a\rBcc: x@evil.example", "a\u{2028}Bcc: x@evil.example",
        "a\u{2029}b", "a\0b", "a\u{0B}b", "a\u{0C}b", "a\u{1B}[31mb", "a\u{7F}b", "a\u{85}b", "a\u{9B}b",
        "\r\n\r\n<html>body</html>", "x\r\n",
    ]

    enum Target: String, CaseIterable {
        case fromName, fromAddress, toName, toAddress, ccName, ccAddress, bccName, bccAddress, replyToName,
            replyToAddress, subject, messageID, inReplyTo, references, extraName, extraValue, filename, contentType
    }

    static func apply(_ vector: String, to target: Target) -> (OutgoingMessage, ComposeError) {
        var message = OutgoingMessage(
            from: MailAddress(name: "Alice", address: "alice@example.com"),
            to: [MailAddress(name: "Bob", address: "bob@example.org")],
            subject: "Hello",
            text: "body\n",
            messageID: "id@example.com"
        )
        let mailbox = MailAddress(name: "Name", address: "name@example.net")
        let named = MailAddress(name: vector, address: "name@example.net")
        let addressed = MailAddress(name: "Name", address: "n" + vector + "@example.net")
        switch target {
        case .fromName:
            message.from = named
            return (message, .forbiddenCharacter(.from))
        case .fromAddress:
            message.from = addressed
            return (message, .forbiddenCharacter(.from))
        case .toName:
            message.to = [mailbox, named]
            return (message, .forbiddenCharacter(.to(2)))
        case .toAddress:
            message.to = [addressed]
            return (message, .forbiddenCharacter(.to(1)))
        case .ccName:
            message.cc = [named]
            return (message, .forbiddenCharacter(.cc(1)))
        case .ccAddress:
            message.cc = [mailbox, mailbox, addressed]
            return (message, .forbiddenCharacter(.cc(3)))
        case .bccName:
            message.bcc = [named]
            return (message, .forbiddenCharacter(.bcc(1)))
        case .bccAddress:
            message.bcc = [addressed]
            return (message, .forbiddenCharacter(.bcc(1)))
        case .replyToName:
            message.replyTo = [named]
            return (message, .forbiddenCharacter(.replyTo(1)))
        case .replyToAddress:
            message.replyTo = [addressed]
            return (message, .forbiddenCharacter(.replyTo(1)))
        case .subject:
            message.subject = vector
            return (message, .forbiddenCharacter(.subject))
        case .messageID:
            message.messageID = "m" + vector + "@example.com"
            return (message, .forbiddenCharacter(.messageID))
        case .inReplyTo:
            message.inReplyTo = ["ok@example.com", "p" + vector + "@example.com"]
            return (message, .forbiddenCharacter(.inReplyTo(2)))
        case .references:
            message.references = ["r" + vector + "@example.com"]
            return (message, .forbiddenCharacter(.references(1)))
        case .extraName:
            message.extraHeaders = [OutgoingHeader(name: "X-A" + vector, value: "v")]
            return (message, .invalidHeaderName(.extraHeader(1)))
        case .extraValue:
            message.extraHeaders = [
                OutgoingHeader(name: "X-A", value: "v"), OutgoingHeader(name: "X-B", value: vector),
            ]
            return (message, .forbiddenCharacter(.extraHeader(2)))
        case .filename:
            message.attachments = [OutgoingAttachment(filename: "f" + vector + ".txt", bytes: [1])]
            return (message, .forbiddenCharacter(.attachmentFilename(1)))
        case .contentType:
            message.attachments = [OutgoingAttachment(filename: "f", contentType: "text/plain" + vector, bytes: [1])]
            return (message, .forbiddenCharacter(.attachmentType(1)))
        }
    }

    @Test(arguments: Target.allCases)
    func everyVectorIsRefusedInEveryField(target: Target) throws {
        for vector in Self.vectors {
            let (message, expected) = Self.apply(vector, to: target)
            #expect(throws: expected, "\(target) with \(vector.debugDescription)") {
                try MessageWriter(message)
            }
        }
    }

    @Test func tabIsAllowedAndStaysInsideItsField() throws {
        var message = OutgoingMessage(
            from: MailAddress(name: "A\tB", address: "alice@example.com"),
            to: [MailAddress(name: nil, address: "bob@example.org")],
            subject: "one\ttwo",
            messageID: "id@example.com"
        )
        message.extraHeaders = [OutgoingHeader(name: "X-Tab", value: "a\tb")]
        let bytes = try MessageWriter.bytes(of: message).bytes
        let parsed = try MIMEParser.parse(bytes)
        #expect(parsed.subject == "one\ttwo")
        #expect(parsed.header("X-Tab")?.value == "a\tb")
        #expect(parsed.from.first?.name == "A B")
        #expect(
            parsed.headers.map(\.name) == [
                "Date", "From", "To", "Subject", "Message-ID", "X-Tab", "MIME-Version", "Content-Type",
                "Content-Transfer-Encoding",
            ]
        )
    }

    @Test func headerSafeReplacesWhatTheWriterRefuses() throws {
        let received = "Re: a\r\nBcc: x@evil.example\u{2028}\0end\tok"
        let cleaned = OutgoingMessage.headerSafe(received)
        #expect(cleaned == "Re: a  Bcc: x@evil.example  end\tok")
        let message = OutgoingMessage(
            from: MailAddress(name: nil, address: "alice@example.com"),
            subject: cleaned,
            messageID: "id@example.com"
        )
        let parsed = try MIMEParser.parse(try MessageWriter.bytes(of: message).bytes)
        #expect(parsed.header("Bcc") == nil)
        #expect(parsed.subject == cleaned)
    }

    @Test func bodyLineBreaksCannotReachTheHeaders() throws {
        // A body is after the blank line whatever it holds; its line breaks become CRLF.
        let message = OutgoingMessage(
            from: MailAddress(name: nil, address: "alice@example.com"),
            text: "\r\nBcc: x@evil.example\n\rSubject: x\0",
            messageID: "id@example.com"
        )
        let parsed = try MIMEParser.parse(try MessageWriter.bytes(of: message).bytes)
        #expect(parsed.header("Bcc") == nil)
        #expect(parsed.subject == nil)
        #expect(parsed.textBody == "\r\nBcc: x@evil.example\r\n\r\nSubject: x\0\r\n")
    }

    @Test(
        arguments: [
            ("alice@bücher.example", ComposeError.nonASCIIDomain(.to(1))),
            ("jörg@example.com", .nonASCIILocalPart(.to(1))),
            ("no-at-sign", .invalidAddress(.to(1))),
            ("@example.com", .invalidAddress(.to(1))),
            ("a@", .invalidAddress(.to(1))),
            ("a@-example.com", .invalidAddress(.to(1))),
            ("a@example..com", .invalidAddress(.to(1))),
            ("a@exa_mple.com", .invalidAddress(.to(1))),
            ("a@[1.2.3.4", .invalidAddress(.to(1))),
            ("a@ex ample.com", .invalidAddress(.to(1))),
            ("a>@example.com", nil),
            (String(repeating: "x", count: 65) + "@example.com", .invalidAddress(.to(1))),
            ("a@" + String(repeating: "x", count: 64) + ".com", .invalidAddress(.to(1))),
            ("\"O'Neil, Bob\"alice@example.com", .invalidAddress(.to(1))),
            ("a\\b@example.com", .invalidAddress(.to(1))),
            ("\"a\"b\"@example.com", .invalidAddress(.to(1))),
            ("a@[192.0.2.1]", nil),
            ("\"john doe\"@example.com", nil),
            ("john doe@example.com", nil),
            ("first.last+tag@sub.example.com", nil),
        ] as [(String, ComposeError?)]
    )
    func addressesAreCheckedBeforeWriting(address: String, expected: ComposeError?) throws {
        let message = OutgoingMessage(
            from: MailAddress(name: nil, address: "alice@example.com"),
            to: [MailAddress(name: nil, address: address)],
            messageID: "id@example.com"
        )
        if let expected {
            #expect(throws: expected) { try MessageWriter(message) }
            return
        }
        let result = try MessageWriter.bytes(of: message)
        let parsed = try MIMEParser.parse(result.bytes)
        // What the parser reads back is what the envelope sends to.
        #expect(parsed.to.map(\.address) == result.envelope.recipients)
        #expect(result.envelope.recipients.count == 1)
    }

    @Test func quotedLocalPartsAreWrittenQuoted() throws {
        let message = OutgoingMessage(
            from: MailAddress(name: nil, address: "alice@example.com"),
            to: [
                MailAddress(name: nil, address: "john doe@example.com"),
                MailAddress(name: nil, address: "a>@example.com"),
                MailAddress(name: nil, address: "\"x\\\"y\"@example.com"),
            ],
            messageID: "id@example.com"
        )
        let result = try MessageWriter.bytes(of: message)
        #expect(
            result.envelope.recipients == ["\"john doe\"@example.com", "\"a>\"@example.com", "\"x\\\"y\"@example.com"]
        )
        let text = String(decoding: result.bytes, as: UTF8.self)
        #expect(text.contains("To: \"john doe\"@example.com, \"a>\"@example.com, \"x\\\"y\"@example.com\r\n"))
    }

    @Test func aLocalPartLikeAnEncodedWordCannotSwallowTheNextAddresses() throws {
        let message = OutgoingMessage(
            from: MailAddress(name: nil, address: "alice@example.com"),
            to: [
                MailAddress(name: nil, address: "=?utf-8?B?Wm9l@example.net"),
                MailAddress(name: "Bob", address: "bob@example.org"),
                MailAddress(name: "Öz?=", address: "oz@example.org"),
            ],
            messageID: "id@example.com"
        )
        let result = try MessageWriter.bytes(of: message)
        #expect(result.envelope.recipients.first == "\"=?utf-8?B?Wm9l\"@example.net")
        let parsed = try MIMEParser.parse(result.bytes)
        #expect(parsed.to.map(\.address) == ["=?utf-8?B?Wm9l@example.net", "bob@example.org", "oz@example.org"])
        #expect(parsed.to.map(\.name) == [nil, "Bob", "Öz?="])
    }

    @Test(arguments: [
        ("From", "From"), ("bcc", "Bcc"), ("MESSAGE-ID", "Message-ID"), ("Content-Type", "Content-*"),
        ("content-disposition", "Content-*"), ("Received", "Received"), ("mime-version", "MIME-Version"),
    ])
    func extraHeadersCannotSetTheWritersFields(name: String, reserved: String) {
        var message = OutgoingMessage(from: MailAddress(name: nil, address: "alice@example.com"))
        message.extraHeaders = [OutgoingHeader(name: name, value: "x")]
        #expect(throws: ComposeError.reservedHeader(.extraHeader(1), name: reserved)) { try MessageWriter(message) }
    }

    @Test(arguments: ["", "X Y", "X:Y", "Ü", String(repeating: "X", count: 77)])
    func extraHeaderNamesMustBeFieldNames(name: String) {
        var message = OutgoingMessage(from: MailAddress(name: nil, address: "alice@example.com"))
        message.extraHeaders = [OutgoingHeader(name: name, value: "x")]
        #expect(throws: ComposeError.invalidHeaderName(.extraHeader(1))) { try MessageWriter(message) }
    }

    @Test(arguments: [
        ("text", ComposeError.invalidContentType(.attachmentType(1))),
        ("text/", .invalidContentType(.attachmentType(1))),
        ("text/plain; charset=x", .invalidContentType(.attachmentType(1))),
        ("a/b/c", .invalidContentType(.attachmentType(1))),
        ("application/" + String(repeating: "x", count: 120), .invalidContentType(.attachmentType(1))),
        ("multipart/mixed", .unsupportedAttachmentType(.attachmentType(1))),
        ("message/partial", .unsupportedAttachmentType(.attachmentType(1))),
        ("message/global", .unsupportedAttachmentType(.attachmentType(1))),
    ])
    func attachmentTypesAreChecked(type: String, expected: ComposeError) {
        let message = OutgoingMessage(
            from: MailAddress(name: nil, address: "alice@example.com"),
            attachments: [OutgoingAttachment(filename: "f", contentType: type, bytes: [])]
        )
        #expect(throws: expected) { try MessageWriter(message) }
    }

    @Test(arguments: ["", "a b@c", "<a@b", "a<b@c", "ü@example.com", "a@b\u{7F}"])
    func messageIDsAreChecked(id: String) {
        var message = OutgoingMessage(from: MailAddress(name: nil, address: "alice@example.com"), messageID: id)
        let expected: ComposeError =
            id.contains("\u{7F}") ? .forbiddenCharacter(.messageID) : .invalidMessageID(.messageID)
        #expect(throws: expected) { try MessageWriter(message) }
        message.messageID = "ok@example.com"
        message.references = [id]
        let referenced: ComposeError =
            id.contains("\u{7F}") ? .forbiddenCharacter(.references(1)) : .invalidMessageID(.references(1))
        #expect(throws: referenced) { try MessageWriter(message) }
    }

    @Test func errorDescriptionsNameTheFieldButNotItsContent() {
        let secret = "hunter2-secret@example.com"
        let errors: [ComposeError] = [
            .forbiddenCharacter(.to(2)), .invalidAddress(.from), .nonASCIIDomain(.cc(1)), .nonASCIILocalPart(.bcc(3)),
            .invalidMessageID(.references(4)), .invalidHeaderName(.extraHeader(1)),
            .reservedHeader(.extraHeader(2), name: "From"), .invalidContentType(.attachmentType(1)),
            .unsupportedAttachmentType(.attachmentType(1)), .forbiddenCharacter(.attachmentFilename(2)),
        ]
        for error in errors {
            #expect(!error.description.contains(secret))
            #expect(error.description.first?.isUppercase == true)
            #expect(error.description.hasSuffix("."))
        }
        #expect(ComposeError.forbiddenCharacter(.to(2)).description.contains("To address 2"))
        #expect(ComposeError.nonASCIIDomain(.cc(1)).description.contains("xn--"))
    }
}
