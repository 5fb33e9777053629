import CofferMIME
import Foundation

/// A message being written: what the editor's template shows and what it gives back, plus the thread and a
/// forwarded original, which ride along without being shown as editable lines.
///
/// The sender is not part of it: it is the account's address, given when the template is rendered and when the
/// message is built.
public struct ComposeDraft: Sendable, Hashable {
    /// The To recipients.
    public var to: [MailAddress]
    /// The Cc recipients.
    public var cc: [MailAddress]
    /// The Bcc recipients (never written into the message; envelope only).
    public var bcc: [MailAddress]
    /// The subject.
    public var subject: String
    /// The plain-text body.
    public var body: String
    /// Files to attach, as typed on the template's `Attach:` lines (a relative path is the caller's to resolve).
    public var attachmentPaths: [String]
    /// The message ID this one replies to, without angle brackets.
    public var inReplyTo: [String]
    /// The thread's message IDs, oldest first, without angle brackets.
    public var references: [String]
    /// A received message forwarded whole, attached as `message/rfc822`.
    public var forwardedOriginal: ForwardedOriginal?

    /// Creates a draft.
    public init(
        to: [MailAddress] = [],
        cc: [MailAddress] = [],
        bcc: [MailAddress] = [],
        subject: String = "",
        body: String = "",
        attachmentPaths: [String] = [],
        inReplyTo: [String] = [],
        references: [String] = [],
        forwardedOriginal: ForwardedOriginal? = nil
    ) {
        self.to = to
        self.cc = cc
        self.bcc = bcc
        self.subject = subject
        self.body = body
        self.attachmentPaths = attachmentPaths
        self.inReplyTo = inReplyTo
        self.references = references
        self.forwardedOriginal = forwardedOriginal
    }

    /// Checks that the draft can be sent: at least one recipient, and every field one the MIME writer accepts.
    ///
    /// - Parameter from: The account's address.
    /// - Throws: ``CompositionError/noRecipients``, or ``CompositionError/unwritable(_:)`` with the writer's reason.
    public func checkSendable(from: MailAddress) throws(CompositionError) {
        guard !(to.isEmpty && cc.isEmpty && bcc.isEmpty) else { throw .noRecipients }
        do {
            _ = try MessageWriter(outgoingMessage(from: from))
        } catch {
            throw .unwritable(error)
        }
    }

    /// The message to hand to `MessageWriter`, with `from` as its author. The files named by ``attachmentPaths`` are
    /// not in it: the caller opens (and seals) them and appends them to `attachments`; a forwarded original is.
    public func outgoingMessage(from: MailAddress, date: Date = Date()) -> OutgoingMessage {
        var attachments: [OutgoingAttachment] = []
        if let forwardedOriginal {
            attachments.append(
                OutgoingAttachment(
                    filename: forwardedOriginal.filename,
                    contentType: "message/rfc822",
                    bytes: forwardedOriginal.bytes
                )
            )
        }
        return OutgoingMessage(
            from: from,
            to: to,
            cc: cc,
            bcc: bcc,
            subject: subject,
            inReplyTo: inReplyTo,
            references: references,
            text: body,
            attachments: attachments,
            date: date
        )
    }
}

/// A received message attached whole to a forward.
public struct ForwardedOriginal: Sendable, Hashable {
    /// The message's bytes as received.
    public var bytes: [UInt8]
    /// The file name shown to the recipient (`<subject>.eml`, made header-safe).
    public var filename: String

    /// Creates one.
    public init(bytes: [UInt8], filename: String) {
        self.bytes = bytes
        self.filename = filename
    }
}
