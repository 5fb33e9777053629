import CofferMIME

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A message's flags, stored in the clear `flags` column.
public struct MessageFlags: OptionSet, Sendable, Hashable, Codable {
    /// The bits.
    public let rawValue: Int64
    /// Creates flags from bits.
    public init(rawValue: Int64) { self.rawValue = rawValue }

    /// Read.
    public static let seen = MessageFlags(rawValue: 1 << 0)
    /// Replied to.
    public static let answered = MessageFlags(rawValue: 1 << 1)
    /// Flagged (starred).
    public static let flagged = MessageFlags(rawValue: 1 << 2)
    /// A draft.
    public static let draft = MessageFlags(rawValue: 1 << 3)
    /// The message has at least one attachment.
    public static let hasAttachments = MessageFlags(rawValue: 1 << 4)
    /// A sealed cell of the message failed to open; its sealed fields are no longer shown.
    public static let corrupt = MessageFlags(rawValue: 1 << 30)
}

/// One row of a message list: clear metadata and the decrypted subject and senders.
public struct MessageSummary: Sendable, Hashable, Identifiable, Codable {
    /// The message id (clear).
    public var id: Int64
    /// The conversation (thread) id (clear).
    public var conversationID: Int64
    /// The message time (clear; the Date header, or the import time when it has none).
    public var date: Date
    /// The flags (clear).
    public var flags: MessageFlags
    /// The raw size in bytes (clear).
    public var size: Int
    /// The subject; `nil` when the message has none or is corrupt.
    public var subject: String?
    /// The From addresses; empty when the message is corrupt.
    public var from: [MailAddress]

    /// Whether a sealed cell of this message failed to open.
    public var isCorrupt: Bool { flags.contains(.corrupt) }

    /// Creates it from its fields (the store, and the plaintext baseline in coffer-bench).
    package init(
        id: Int64,
        conversationID: Int64,
        date: Date,
        flags: MessageFlags,
        size: Int,
        subject: String?,
        from: [MailAddress]
    ) {
        self.id = id
        self.conversationID = conversationID
        self.date = date
        self.flags = flags
        self.size = size
        self.subject = subject
        self.from = from
    }
}

/// A whole message as ``MailStore/message(_:)`` returns it.
public struct MessageDetail: Sendable, Hashable, Codable {
    /// The list fields.
    public var summary: MessageSummary
    /// The label ids (clear).
    public var labelIDs: [Int64]
    /// To.
    public var to: [MailAddress]
    /// Cc.
    public var cc: [MailAddress]
    /// Bcc.
    public var bcc: [MailAddress]
    /// Every header field, in order.
    public var headers: [HeaderField]
    /// The plain-text body.
    public var textBody: String?
    /// The HTML body (unsanitised: render it only through CofferContent).
    public var htmlBody: String?
    /// The first characters of the text, for previews.
    public var snippet: String?
    /// The attachments' metadata.
    public var attachments: [AttachmentInfo]
    /// What the store found of OpenPGP on the message; `nil` when it came without OpenPGP encryption.
    public var openPGP: MessageOpenPGP?

    /// Creates it from its fields (the store, and the plaintext baseline in coffer-bench).
    package init(
        summary: MessageSummary,
        labelIDs: [Int64],
        to: [MailAddress],
        cc: [MailAddress],
        bcc: [MailAddress],
        headers: [HeaderField],
        textBody: String?,
        htmlBody: String?,
        snippet: String?,
        attachments: [AttachmentInfo],
        openPGP: MessageOpenPGP? = nil
    ) {
        self.openPGP = openPGP
        self.summary = summary
        self.labelIDs = labelIDs
        self.to = to
        self.cc = cc
        self.bcc = bcc
        self.headers = headers
        self.textBody = textBody
        self.htmlBody = htmlBody
        self.snippet = snippet
        self.attachments = attachments
    }
}

/// An attachment's metadata (sealed in the store; the content is fetched with ``MailStore/attachmentContent(_:)``).
public struct AttachmentInfo: Sendable, Hashable, Identifiable, Codable {
    /// The attachment id.
    public var id: Int64
    /// The message it belongs to.
    public var messageID: Int64
    /// Its position among the message's attachments.
    public var position: Int
    /// The file name the sender gave, if any.
    public var filename: String?
    /// The MIME type, such as `application/pdf`.
    public var contentType: String
    /// The Content-ID, for inline parts.
    public var contentID: String?
    /// The decoded size in bytes.
    public var size: Int

    /// Creates it from its fields (the store, and the plaintext baseline in coffer-bench).
    package init(
        id: Int64,
        messageID: Int64,
        position: Int,
        filename: String?,
        contentType: String,
        contentID: String?,
        size: Int
    ) {
        self.id = id
        self.messageID = messageID
        self.position = position
        self.filename = filename
        self.contentType = contentType
        self.contentID = contentID
        self.size = size
    }
}

/// Counters of a running or finished import.
public struct ImportProgress: Sendable, Equatable, Codable {
    /// Messages stored.
    public var imported = 0
    /// Messages skipped as duplicates.
    public var duplicates = 0
    /// Messages skipped as malformed or unreadable.
    public var malformed = 0
    /// Seconds since the import started.
    public var elapsedSeconds: Double = 0

    /// Every message seen.
    public var total: Int { imported + duplicates + malformed }
    /// Messages per second so far.
    public var rate: Double { elapsedSeconds > 0 ? Double(total) / elapsedSeconds : 0 }

    /// Creates empty counters.
    public init() {}
}

/// What the store found of OpenPGP on a message when it was stored (migration `v8-openpgp-mail`): whether it came
/// encrypted, whether it was decrypted, and each signature inside it. Sealed in the message's `openPGP` cell.
public struct MessageOpenPGP: Sendable, Hashable, Codable {
    /// What became of the message's encryption.
    public enum Outcome: String, Sendable, Hashable, Codable {
        /// The whole message was a PGP/MIME encrypted message and was decrypted; the stored body is the decrypted one.
        case decrypted
        /// None of the user's secret keys can open it; it is stored as it came.
        case noSecretKey
        /// Its integrity check (MDC or AEAD) failed or is missing: it was changed or crafted. No plaintext was kept.
        case integrityFailure
        /// The encrypted part is not a readable OpenPGP message (or it would expand beyond the size limit).
        case malformed
        /// An encrypted part sits beside other parts of the message: it is never decrypted (EFAIL), and stays an
        /// opaque part.
        case nestedNotDecrypted
        /// Signed, not encrypted: a PGP/MIME `multipart/signed` message as a whole; ``MessageOpenPGP/signatures``
        /// holds what checking its detached signature over the signed part showed (none when it could not be read).
        case signed
    }

    /// One signature found inside the decrypted message.
    public struct Signature: Sendable, Hashable, Codable {
        /// What checking it showed: `valid`, `expired`, `invalid`, `unknown key` or `unsupported`.
        public var status: String
        /// The signer's fingerprint (a claim unless ``isValid``).
        public var fingerprint: String?
        /// The signer's first user id, when the signer's certificate is known (one of the user's own keys or a
        /// correspondent's).
        public var userID: String?

        /// Whether the signature checked out.
        public var isValid: Bool { status == "valid" }

        /// A signature.
        public init(status: String, fingerprint: String?, userID: String?) {
            self.status = status
            self.fingerprint = fingerprint
            self.userID = userID
        }
    }

    /// What became of the encryption.
    public var outcome: Outcome
    /// The integrity protection checked (`MDC`, or the AEAD mode) when decrypted.
    public var protection: String?
    /// The signatures inside the decrypted message, in order.
    public var signatures: [Signature]

    /// A status.
    public init(outcome: Outcome, protection: String? = nil, signatures: [Signature] = []) {
        self.outcome = outcome
        self.protection = protection
        self.signatures = signatures
    }
}
