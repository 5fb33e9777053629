import CofferMIME

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// The values of drafts, the address book and the outbox (`docs/STORE.md`, "Schema (migration `v5-outbox`)").

/// What a person wrote in a draft: everything but its attachments, which are added one by one as sealed files
/// (``MailStore/addDraftAttachment(to:_:)``).
public struct DraftContent: Sendable, Hashable {
    /// The author, once chosen.
    public var from: MailAddress?
    /// The To recipients.
    public var to: [MailAddress]
    /// The Cc recipients.
    public var cc: [MailAddress]
    /// The Bcc recipients.
    public var bcc: [MailAddress]
    /// The subject.
    public var subject: String
    /// The message IDs this draft replies to, without angle brackets.
    public var inReplyTo: [String]
    /// The message IDs of the thread, oldest first, without angle brackets.
    public var references: [String]
    /// The plain-text body.
    public var text: String

    /// Creates a draft's content.
    public init(
        from: MailAddress? = nil,
        to: [MailAddress] = [],
        cc: [MailAddress] = [],
        bcc: [MailAddress] = [],
        subject: String = "",
        inReplyTo: [String] = [],
        references: [String] = [],
        text: String = ""
    ) {
        self.from = from
        self.to = to
        self.cc = cc
        self.bcc = bcc
        self.subject = subject
        self.inReplyTo = inReplyTo
        self.references = references
        self.text = text
    }
}

/// One attachment of a draft: its metadata (sealed in the store) and a sealed file beside it.
public struct DraftAttachment: Sendable, Hashable, Identifiable {
    /// The attachment id.
    public var id: Int64
    /// The draft it belongs to.
    public var draftID: Int64
    /// Its position among the draft's attachments.
    public var position: Int
    /// The file name the recipient will see, if any.
    public var filename: String?
    /// The `type/subtype`.
    public var contentType: String
    /// The size in bytes.
    public var size: Int64
}

/// A whole draft as ``MailStore/draft(_:)`` returns it.
public struct Draft: Sendable, Hashable, Identifiable {
    /// The draft id.
    public var id: Int64
    /// What was written.
    public var content: DraftContent
    /// The attachments, in order.
    public var attachments: [DraftAttachment]
    /// When it was first saved (clear).
    public var created: Date
    /// When it was last saved (clear).
    public var updated: Date
}

/// One row of ``MailStore/drafts()``: decrypted in memory only.
public struct DraftSummary: Sendable, Hashable, Identifiable {
    /// The draft id.
    public var id: Int64
    /// The subject.
    public var subject: String
    /// To, Cc and Bcc, in that order.
    public var recipients: [MailAddress]
    /// How many attachments it has (clear).
    public var attachmentCount: Int
    /// When it was last saved (clear).
    public var updated: Date
}

/// Where an address-book entry came from.
public enum ContactSource: Int, Sendable, Hashable, Codable {
    /// Added by a person (`coffer contacts add`): its name is never replaced by a name from mail.
    case manual = 1
    /// Seen in imported or synced mail.
    case mail = 2
}

/// An entry of the address book (sealed at rest: contact record v1).
public struct Contact: Sendable, Hashable, Identifiable {
    /// The entry id.
    public var id: Int64
    /// The display name, if known.
    public var name: String?
    /// The address in its canonical form (``MailStore/canonicalAddress(_:)``).
    public var address: String
    /// How many stored messages named it in From, To or Cc.
    public var timesSeen: Int64
    /// The date of the newest such message, if any.
    public var lastSeen: Date?
    /// Where it came from.
    public var source: ContactSource

    /// Creates an entry (the store, and tests of ``MailStore/vCard(for:)``).
    public init(
        id: Int64,
        name: String?,
        address: String,
        timesSeen: Int64 = 0,
        lastSeen: Date? = nil,
        source: ContactSource = .manual
    ) {
        self.id = id
        self.name = name
        self.address = address
        self.timesSeen = timesSeen
        self.lastSeen = lastSeen
        self.source = source
    }
}

/// Where an outbox item is in its life.
public enum OutboxState: Sendable, Hashable {
    /// Waiting for its next attempt (``OutboxItem/nextAttempt``): new, held by `--delay`, or retrying.
    case queued
    /// Claimed by a sender (``MailStore/claimNextDue(now:)``); back to queued if that process dies.
    case sending
    /// Not sent and not retried: the server refused it for good, or the attempts ran out. The reason is the
    /// sanitized text given to ``MailStore/markFailed(_:reason:permanent:retryAt:)`` (`nil` when the account was
    /// locked at that moment, so it could not be sealed).
    case failed(reason: String?)
    /// The server accepted it; its Sent copy is not stored yet (``MailStore/removeSent(_:)`` ends it).
    case sent
}

/// One message of the outbox, as listed and as claimed.
public struct OutboxItem: Sendable, Hashable, Identifiable {
    /// The item id.
    public var id: Int64
    /// The store's account (`accounts.id`) it is sent through.
    public var accountID: Int64
    /// Its state.
    public var state: OutboxState
    /// Attempts started so far (a claim counts one).
    public var attempts: Int
    /// Not sent before this instant (the undo window, or the backoff).
    public var nextAttempt: Date
    /// When it was queued.
    public var created: Date
    /// `MAIL FROM` and every `RCPT TO` (Bcc included).
    public var envelope: MailEnvelope
    /// The message's `Message-ID`, without angle brackets: the same for every attempt.
    public var messageID: String
    /// The subject, for listings.
    public var subject: String
    /// The size of the RFC 5322 bytes.
    public var size: Int64
}

/// How many outbox items are in each state: read from clear columns, so it works while the account is locked
/// (`coffer status` says that queued mail waits for an unlock).
public struct OutboxCounts: Sendable, Hashable {
    /// Items waiting to be sent.
    public var queued = 0
    /// Items being sent.
    public var sending = 0
    /// Items that failed for good.
    public var failed = 0
    /// Items sent whose Sent copy is not stored yet.
    public var sent = 0

    /// No items.
    public init() {}
}

/// The outbox's retry policy, a pure function of the attempts made: one minute after the first failure, doubling up
/// to an hour, and no more retries after ``maximumAttempts`` attempts.
public struct OutboxBackoff: Sendable, Hashable {
    /// What to do after a temporary failure.
    public enum Decision: Sendable, Hashable {
        /// Try again at this instant.
        case retry(at: Date)
        /// Stop: mark the item failed.
        case giveUp
    }

    /// The wait after the first failed attempt, in seconds.
    public var firstDelay: Int64 = 60
    /// The longest wait between attempts, in seconds.
    public var maximumDelay: Int64 = 3600
    /// Attempts made before the outbox gives up.
    public var maximumAttempts = 10

    /// The default policy: 1 min, 2, 4, 8, 16, 32 min, then 1 h; give up after 10 attempts (about 4 h 3 min of
    /// trying).
    public init() {}

    /// Creates a policy.
    public init(firstDelay: Int64, maximumDelay: Int64, maximumAttempts: Int) {
        self.firstDelay = firstDelay
        self.maximumDelay = maximumDelay
        self.maximumAttempts = maximumAttempts
    }

    /// The wait in seconds after `attempts` failed attempts (1 for the first): `firstDelay · 2^(attempts−1)`, at most
    /// `maximumDelay`.
    public func delay(afterAttempts attempts: Int) -> Int64 {
        let exponent = max(0, attempts - 1)
        var delay = max(1, firstDelay)
        // At most 63 doublings reach either the maximum or Int64.max, whatever `attempts` is.
        var doublings = 0
        while doublings < exponent && delay < maximumDelay {
            delay = delay.multipliedReportingOverflow(by: 2).overflow ? .max : delay * 2
            doublings += 1
        }
        return min(delay, maximumDelay)
    }

    /// What to do after a temporary failure of the `attempts`-th attempt, at `now`.
    public func decision(afterAttempts attempts: Int, now: Date) -> Decision {
        guard attempts < maximumAttempts else { return .giveUp }
        return .retry(at: now.addingTimeInterval(TimeInterval(delay(afterAttempts: attempts))))
    }
}
