import Foundation

/// One device's login session: who, which device, the hash of its bearer token, its lifetime and its push keys.
public struct NotifySession: Sendable, Equatable {
    /// The session's public id (a UUID), used to list and revoke it; not a credential.
    public var id: String
    /// The mail user name the session proved.
    public var user: String
    /// The name the device gave itself.
    public var deviceName: String
    /// SHA-256 of the 32-byte bearer token; the token itself is never stored.
    public var tokenHash: [UInt8]
    /// SHA-256 of the token the last refresh replaced, while the new one has not been used: the old token keeps
    /// working until then, so a device that loses the refresh's answer (killed, cut off) is not logged out by it.
    public var previousTokenHash: [UInt8]?
    /// When the session was registered.
    public var created: Date
    /// When the session last used its token.
    public var lastSeen: Date
    /// When the token stops working unless refreshed.
    public var expires: Date
    /// Whether the session was revoked (revoked sessions stay listed and keep their push key reserved).
    public var revoked: Bool
    /// The session's 65-byte uncompressed P-256 push public key (RFC 8291 `ua_public`).
    public var pushPublicKey: [UInt8]
    /// The session's 16-byte RFC 8291 auth secret.
    public var pushAuthSecret: [UInt8]
    /// An RFC 8030 push subscription URL, when the device gave one.
    public var pushEndpoint: String?

    /// Creates a session record.
    public init(
        id: String,
        user: String,
        deviceName: String,
        tokenHash: [UInt8],
        created: Date,
        lastSeen: Date,
        expires: Date,
        revoked: Bool = false,
        pushPublicKey: [UInt8],
        pushAuthSecret: [UInt8],
        pushEndpoint: String? = nil,
        previousTokenHash: [UInt8]? = nil
    ) {
        self.id = id
        self.user = user
        self.deviceName = deviceName
        self.tokenHash = tokenHash
        self.created = created
        self.lastSeen = lastSeen
        self.expires = expires
        self.revoked = revoked
        self.pushPublicKey = pushPublicKey
        self.pushAuthSecret = pushAuthSecret
        self.pushEndpoint = pushEndpoint
        self.previousTokenHash = previousTokenHash
    }

    /// Whether the token still works at `now`: not revoked and not expired.
    public func isLive(at now: Date) -> Bool { !revoked && now < expires }
}

/// One encrypted push waiting for its session to fetch and ack it.
public struct PendingMessage: Sendable, Equatable {
    /// The message id (a UUID) the session acks.
    public var id: String
    /// The session it is sealed to.
    public var sessionID: String
    /// The RFC 8291 body (aes128gcm, padded to 4096 bytes); nothing readable.
    public var body: [UInt8]
    /// When it was queued.
    public var created: Date
    /// When it is dropped unacked (never after the FastSync key it carries expires).
    public var expires: Date
    /// Whether it carries the session's FastSync key: deleting the key deletes it (read back as false; only
    /// written).
    public var holdsKey: Bool

    /// Creates a pending message.
    public init(
        id: String,
        sessionID: String,
        body: [UInt8],
        created: Date,
        expires: Date,
        holdsKey: Bool = false
    ) {
        self.id = id
        self.sessionID = sessionID
        self.body = body
        self.created = created
        self.expires = expires
        self.holdsKey = holdsKey
    }
}
