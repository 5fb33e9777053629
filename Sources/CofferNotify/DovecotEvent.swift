import CofferPush
import Foundation

/// A new-mail event as Dovecot's `push_notification` `ox` driver POSTs it (JSON, `Content-Type: application/json`).
///
/// The driver sends `user`, `event` ("messageNew"), `folder`, `imap-uidvalidity`, `imap-uid`, `from`, `subject`,
/// `snippet` and `unseen`; coffer-notify reads the first six and ignores the rest (the snippet is never used).
public struct DovecotEvent: Decodable, Sendable, Equatable {
    /// The user the mail was delivered to (the `user=` value of the METADATA entry, or the login name).
    public var user: String
    /// The event name; only "messageNew" (or none) makes a push.
    public var event: String?
    /// The folder the message was delivered to.
    public var folder: String?
    /// The folder's UIDVALIDITY.
    public var uidValidity: UInt32?
    /// The new message's UID.
    public var uid: UInt32?
    /// The From header as Dovecot decoded it.
    public var from: String?
    /// The Subject header as Dovecot decoded it.
    public var subject: String?

    enum CodingKeys: String, CodingKey {
        case user, event, folder, from, subject
        case uidValidity = "imap-uidvalidity"
        case uid = "imap-uid"
    }

    /// Creates an event (tests and the generic webhook).
    public init(
        user: String,
        event: String? = "messageNew",
        folder: String?,
        uidValidity: UInt32? = nil,
        uid: UInt32?,
        from: String?,
        subject: String?
    ) {
        self.user = user
        self.event = event
        self.folder = folder
        self.uidValidity = uidValidity
        self.uid = uid
        self.from = from
        self.subject = subject
    }
}

extension PushMessage {
    /// The message for a Dovecot event.
    public init(event: DovecotEvent) {
        self.init(
            folder: event.folder,
            uidValidity: event.uidValidity,
            uid: event.uid,
            from: event.from,
            subject: event.subject
        )
    }
}
