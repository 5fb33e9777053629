import CofferMIME

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A label.
public struct Label: Sendable, Hashable, Identifiable {
    /// The label id (clear).
    public var id: Int64
    /// The name (sealed at rest).
    public var name: String
}

/// An account.
public struct Account: Sendable, Hashable, Identifiable {
    /// The account id.
    public var id: Int64
    /// The account's user name.
    public var username: String
    /// The display name.
    public var displayName: String?
}

/// One of the account's own sending addresses.
public struct OwnAddress: Sendable, Hashable, Identifiable {
    /// The address id.
    public var id: Int64
    /// The account it belongs to.
    public var accountID: Int64
    /// The address.
    public var address: String
    /// The display name used when sending from it.
    public var displayName: String?
}

/// One raw message to import.
public struct RawMessage: Sendable {
    /// The RFC 5322 bytes.
    public var bytes: [UInt8]
    /// Flags to set (for example from Maildir flags).
    public var flags: MessageFlags
    /// Names of the labels to put the message under.
    public var labels: [String]

    /// A message for `labels` (the Inbox by default).
    public init(bytes: [UInt8], flags: MessageFlags = [], labels: [String] = ["Inbox"]) {
        self.bytes = bytes
        self.flags = flags
        self.labels = labels
    }
}

/// What happened to one imported message.
public enum ImportOutcome: Sendable, Equatable {
    /// Stored under this id.
    case imported(Int64)
    /// Already in the store (same Message-ID or same content); nothing was written.
    case duplicate
    /// The message could not be parsed and was skipped.
    case malformed(MIMEError)
}

/// What the store reports on ``MailStore/events``.
public enum StoreEvent: Sendable, Hashable {
    /// A sealed setting failed to open or decode and was reset to its most private value (the setting's name).
    case settingReverted(String)
    /// A message's sealed cell failed to open; the message is marked corrupt.
    case messageCorrupt(Int64)
}
