import Crypto
import Foundation

/// The generic new-mail webhook (`POST /v1/events`), for a delivery agent other than Dovecot's `ox` driver: a JSON
/// event signed with the event secret, so the secret itself never crosses the wire (docs/NOTIFY.md "Generic
/// webhook", FORMAT.md "Webhook event v1").
///
/// The sender puts `Coffer-Timestamp: <Unix seconds>` and
/// `Coffer-Signature: v1=<hex of HMAC-SHA256(event secret, timestamp "." body)>` on the request. The service refuses
/// a timestamp more than ``window`` seconds away from its clock and a signature it has already accepted within
/// that window, so a captured request cannot be replayed to this instance.
public enum Webhook {
    /// The header carrying the sender's Unix time.
    public static let timestampHeader = "Coffer-Timestamp"
    /// The header carrying `v1=` and the hex HMAC.
    public static let signatureHeader = "Coffer-Signature"
    /// How far the sender's clock may be from the service's, in seconds.
    public static let window: Int64 = 300

    /// One new-mail event (webhook event v1): `user` is required, every other field optional.
    public struct Event: Codable, Sendable, Equatable {
        /// The mail user the message was delivered to.
        public var user: String
        /// The folder it was delivered to.
        public var folder: String?
        /// The folder's UIDVALIDITY.
        public var uidValidity: UInt32?
        /// The message's UID.
        public var uid: UInt32?
        /// The decoded From header.
        public var from: String?
        /// The decoded Subject header.
        public var subject: String?

        /// Creates an event.
        public init(
            user: String,
            folder: String? = nil,
            uidValidity: UInt32? = nil,
            uid: UInt32? = nil,
            from: String? = nil,
            subject: String? = nil
        ) {
            self.user = user
            self.folder = folder
            self.uidValidity = uidValidity
            self.uid = uid
            self.from = from
            self.subject = subject
        }

        /// The same event as Dovecot's driver would have sent it.
        var dovecotEvent: DovecotEvent {
            DovecotEvent(
                user: user,
                folder: folder,
                uidValidity: uidValidity,
                uid: uid,
                from: from,
                subject: subject
            )
        }
    }

    /// The `Coffer-Signature` value for a body sent at `timestamp` (what a sender computes).
    public static func signature(body: some Collection<UInt8>, timestamp: Int64, secret: [UInt8]) -> String {
        var message = Array("\(timestamp).".utf8)
        message.append(contentsOf: body)
        let mac = HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: secret))
        return "v1=" + mac.map { String(format: "%02x", $0) }.joined()
    }

    /// Whether `signature` is the body's under `secret` at `timestamp`, compared in constant time.
    static func signatureMatches(
        _ signature: String,
        body: some Collection<UInt8>,
        timestamp: Int64,
        secret: [UInt8]
    ) -> Bool {
        let expected = Array(Self.signature(body: body, timestamp: timestamp, secret: secret).utf8)
        return constantTimeEqual(Array(signature.utf8), expected)
    }
}

/// Remembers the webhook signatures accepted within the timestamp window, so each is accepted once per instance.
public actor WebhookReplayGuard {
    private var seen: [String: Int64] = [:]
    private var lastPrune = Int64.min

    /// Creates an empty guard.
    public init() {}

    /// Records `signature` (valid until `timestamp` + the window); false when it was already recorded. Spent
    /// entries are dropped at most once a second, not on every call once the table is large.
    public func accept(_ signature: String, timestamp: Int64, now: Int64) -> Bool {
        if seen.count > 10_000, now > lastPrune {
            lastPrune = now
            seen = seen.filter { $0.value > now }
        }
        if let until = seen[signature], until > now { return false }
        seen[signature] = timestamp + Webhook.window
        return true
    }
}
