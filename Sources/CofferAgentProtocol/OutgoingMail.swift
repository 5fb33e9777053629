import CofferMIME

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What a person wrote: a draft's fields as the composer hands them to the agent and gets them back (its
/// attachments travel apart, as paths to add or as the draft's sealed files).
public struct ComposedFields: Codable, Sendable, Equatable {
    /// The To recipients.
    public var to: [MailAddress]
    /// The Cc recipients.
    public var cc: [MailAddress]
    /// The Bcc recipients (envelope only).
    public var bcc: [MailAddress]
    /// The subject.
    public var subject: String
    /// The plain-text body.
    public var text: String
    /// The message IDs this one replies to, without angle brackets.
    public var inReplyTo: [String]
    /// The thread's message IDs, oldest first, without angle brackets.
    public var references: [String]

    /// Creates fields.
    public init(
        to: [MailAddress] = [],
        cc: [MailAddress] = [],
        bcc: [MailAddress] = [],
        subject: String = "",
        text: String = "",
        inReplyTo: [String] = [],
        references: [String] = []
    ) {
        self.to = to
        self.cc = cc
        self.bcc = bcc
        self.subject = subject
        self.text = text
        self.inReplyTo = inReplyTo
        self.references = references
    }
}

/// Where a message being written starts.
public enum ComposeStart: Codable, Sendable, Equatable {
    /// An empty message.
    case new
    /// A saved draft, to go on with.
    case draft(Int64)
    /// A reply to a stored message (to all its recipients but the account's own with `all`).
    case reply(message: Int64, all: Bool)
    /// A stored message forwarded: with `attachOriginal`, attached whole as `message/rfc822` under an empty body for
    /// a note; else its text inline under a summary of its headers, with its attachments attached again.
    case forward(message: Int64, attachOriginal: Bool)
}

/// What the composer needs to open the editor: the account's sending address, the fields so far and, for a draft,
/// its attachments.
public struct ComposeContext: Codable, Sendable, Equatable {
    /// The account's own address (the From line).
    public var from: MailAddress
    /// The fields to start from.
    public var fields: ComposedFields
    /// The draft going on, or nil for a new message.
    public var draft: DraftInfo?

    /// Creates one.
    public init(from: MailAddress, fields: ComposedFields, draft: DraftInfo?) {
        self.from = from
        self.fields = fields
        self.draft = draft
    }
}

/// A saved draft.
public struct DraftInfo: Codable, Sendable, Equatable {
    /// Its number.
    public var id: Int64
    /// What it says.
    public var fields: ComposedFields
    /// Its attachments, sealed in the store.
    public var attachments: [Attachment]
    /// When it was last saved.
    public var updated: Date

    /// One attachment of a draft.
    public struct Attachment: Codable, Sendable, Equatable {
        /// The attachment's number.
        public var id: Int64
        /// The name the recipient sees.
        public var filename: String?
        /// Its size in bytes.
        public var size: Int64

        /// Creates one.
        public init(id: Int64, filename: String?, size: Int64) {
            self.id = id
            self.filename = filename
            self.size = size
        }
    }

    /// Creates one.
    public init(id: Int64, fields: ComposedFields, attachments: [Attachment], updated: Date) {
        self.id = id
        self.fields = fields
        self.attachments = attachments
        self.updated = updated
    }
}

/// A message in the outbox, as `coffer outbox` lists it.
public struct OutboxEntry: Codable, Sendable, Equatable {
    /// Where a message stands.
    public enum State: String, Codable, Sendable {
        /// Waiting for its time (the undo window, a retry) or for a sender.
        case queued
        /// Being sent now.
        case sending
        /// Refused for good, or given up; `reason` says why.
        case failed
        /// Accepted by the server; its Sent copy is still to be stored.
        case sent
    }

    /// Its number.
    public var id: Int64
    /// Where it stands.
    public var state: State
    /// Why it failed (the server's reply or the check that failed), when it did.
    public var reason: String?
    /// The subject.
    public var subject: String
    /// Every recipient (To, Cc and Bcc).
    public var recipients: [String]
    /// Attempts made.
    public var attempts: Int
    /// Not sent before this time.
    public var nextAttempt: Date
    /// Its size in bytes.
    public var size: Int64
    /// What Autocrypt did, for the message just sent: `encrypted` (the user and every recipient prefer encryption
    /// and a key of each is known, so it was encrypted without `--encrypt`) or `not-encrypted` (it would have been,
    /// but `--no-encrypt` said no); absent otherwise.
    public var autocrypt: String?

    /// Creates one.
    public init(
        id: Int64,
        state: State,
        reason: String?,
        subject: String,
        recipients: [String],
        attempts: Int,
        nextAttempt: Date,
        size: Int64
    ) {
        self.id = id
        self.state = state
        self.reason = reason
        self.subject = subject
        self.recipients = recipients
        self.attempts = attempts
        self.nextAttempt = nextAttempt
        self.size = size
    }
}

/// A person in the address book.
public struct ContactInfo: Codable, Sendable, Equatable {
    /// Its number.
    public var id: Int64
    /// The name, when known.
    public var name: String?
    /// The address.
    public var address: String
    /// How many messages named it.
    public var timesSeen: Int64
    /// The fingerprints of the correspondent's OpenPGP certificates the store holds for this address (absent when
    /// none).
    public var openPGPKeys: [String]?

    /// Creates one.
    public init(id: Int64, name: String?, address: String, timesSeen: Int64, openPGPKeys: [String]? = nil) {
        self.id = id
        self.name = name
        self.address = address
        self.timesSeen = timesSeen
        self.openPGPKeys = openPGPKeys
    }
}
