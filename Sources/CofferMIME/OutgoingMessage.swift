#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A message to send, as a person composed it: addresses, subject, thread references, a text body with an optional
/// HTML alternative, and attachments. `MessageWriter` turns it into RFC 5322 bytes.
///
/// Every text field may hold anything a person typed or a received message held: the writer checks each one and
/// refuses line breaks and control characters in header fields (see `ComposeError.forbiddenCharacter`).
public struct OutgoingMessage: Sendable {
    /// The author. Its domain also names the generated `Message-ID`.
    public var from: MailAddress
    /// The To recipients.
    public var to: [MailAddress]
    /// The Cc recipients.
    public var cc: [MailAddress]
    /// The Bcc recipients: envelope recipients only, never written into the message.
    public var bcc: [MailAddress]
    /// Where replies should go, when not to the author.
    public var replyTo: [MailAddress]
    /// The subject (leading and trailing whitespace is not kept).
    public var subject: String
    /// The message IDs this message replies to, without angle brackets.
    public var inReplyTo: [String]
    /// The message IDs of the thread, oldest first, without angle brackets.
    public var references: [String]
    /// Further header fields, written in order as unstructured text after the writer's own fields.
    public var extraHeaders: [OutgoingHeader]
    /// The plain-text body. Line breaks of any kind are written as CRLF, and a final line break is added.
    public var text: String
    /// An HTML alternative of the body, written as `multipart/alternative` after the text.
    public var html: String?
    /// Attachments, in order.
    public var attachments: [OutgoingAttachment]
    /// The `Date` field's instant (written in UTC, so the message does not reveal the sender's time zone).
    public var date: Date
    /// The `Message-ID` without angle brackets; `nil` to have the writer make a random one on the From domain.
    public var messageID: String?
    /// A body made by ``PGPMIME`` (a signed or encrypted message), written in place of ``text``, ``html`` and
    /// ``attachments``, which are then not written at all.
    public var preparedBody: PreparedBody?
    /// The `Autocrypt` header (Autocrypt Level 1) to write, its `addr` the From address; `nil` writes none.
    public var autocrypt: OutgoingAutocrypt?

    /// Creates a message.
    public init(
        from: MailAddress,
        to: [MailAddress] = [],
        cc: [MailAddress] = [],
        bcc: [MailAddress] = [],
        replyTo: [MailAddress] = [],
        subject: String = "",
        inReplyTo: [String] = [],
        references: [String] = [],
        extraHeaders: [OutgoingHeader] = [],
        text: String = "",
        html: String? = nil,
        attachments: [OutgoingAttachment] = [],
        date: Date = Date(),
        messageID: String? = nil
    ) {
        self.from = from
        self.to = to
        self.cc = cc
        self.bcc = bcc
        self.replyTo = replyTo
        self.subject = subject
        self.inReplyTo = inReplyTo
        self.references = references
        self.extraHeaders = extraHeaders
        self.text = text
        self.html = html
        self.attachments = attachments
        self.date = date
        self.messageID = messageID
    }

    /// The text with every line break and control character (except tab) replaced by a space, for header text
    /// taken from a received message (such as the subject of a reply), which the writer would otherwise refuse.
    public static func headerSafe(_ text: String) -> String {
        var result = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            result.append(HeaderEncoding.isForbidden(scalar) ? " " : scalar)
        }
        return String(result)
    }
}

/// An extra header field of an outgoing message.
public struct OutgoingHeader: Sendable, Hashable {
    /// The field name, such as `X-Priority`.
    public var name: String
    /// The value, written as RFC 5322 unstructured text (RFC 2047 encoded where not ASCII).
    public var value: String

    /// Creates a header field.
    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

/// Gives an attachment's bytes a chunk at a time, so a large file need not be in memory at once.
public protocol AttachmentChunkReader {
    /// The next chunk of bytes, or `nil` at the end. Empty chunks are allowed and skipped.
    mutating func nextChunk() throws -> [UInt8]?
}

/// Reads bytes already in memory in chunks of a fixed size.
public struct ByteChunkReader: AttachmentChunkReader, Sendable {
    private let bytes: [UInt8]
    private let chunkSize: Int
    private var offset = 0

    /// Creates a reader over `bytes` that returns at most `chunkSize` bytes at a time.
    public init(_ bytes: [UInt8], chunkSize: Int = 48 * 1024) {
        self.bytes = bytes
        self.chunkSize = max(1, chunkSize)
    }

    /// The next chunk, or `nil` at the end.
    public mutating func nextChunk() -> [UInt8]? {
        guard offset < bytes.count else {
            return nil
        }
        let end = min(bytes.count, offset + chunkSize)
        defer { offset = end }
        return Array(bytes[offset..<end])
    }
}

/// A file attached to an outgoing message.
public struct OutgoingAttachment: Sendable {
    /// The file name shown to the recipient, or `nil` for none.
    public var filename: String?
    /// The `type/subtype`, such as `application/pdf`.
    public var contentType: String
    /// Opens a reader over the attachment's bytes; called once each time the message is written (and once more, to
    /// check it first, for `message/rfc822`).
    public var open: @Sendable () throws -> any AttachmentChunkReader

    /// Creates an attachment whose bytes come from `open`, chunk by chunk.
    public init(
        filename: String?,
        contentType: String = "application/octet-stream",
        open: @escaping @Sendable () throws -> any AttachmentChunkReader
    ) {
        self.filename = filename
        self.contentType = contentType
        self.open = open
    }

    /// Creates an attachment from bytes in memory.
    public init(filename: String?, contentType: String = "application/octet-stream", bytes: [UInt8]) {
        self.init(filename: filename, contentType: contentType) { ByteChunkReader(bytes) }
    }
}

/// The SMTP envelope of a written message: who sends and who receives, Bcc included.
public struct MailEnvelope: Sendable, Hashable {
    /// The sender's address (for `MAIL FROM`).
    public var sender: String
    /// Every To, Cc and Bcc address once, in that order (for `RCPT TO`).
    public var recipients: [String]

    /// Creates an envelope.
    public init(sender: String, recipients: [String]) {
        self.sender = sender
        self.recipients = recipients
    }
}
