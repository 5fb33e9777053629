import CofferCrypto
import CofferKeychain
import CofferKeymaker
import CofferPush
import CofferTransport

/// Everything that can go wrong on the client side of push, written for people. No token, key, sender, subject or
/// message text ever appears in a case or its description.
public enum NotifyClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The `--server` URL is not `https://HOST[:PORT]` (or `http://` to a loopback address).
    case invalidServer(String)
    /// The pinned connection failed (chain, host name, pins, timeout, refused).
    case transport(TransportError)
    /// The service answered with a status the client did not expect; the sentence names it.
    case unexpectedStatus(Int, String)
    /// The service refused the session token (401): the session was revoked, expired or is unknown.
    case sessionRevoked
    /// The service's answer could not be read.
    case malformedResponse(String)
    /// This account has no push session on this device.
    case notRegistered
    /// This account already has a push session; unregister it first.
    case alreadyRegistered
    /// The keychain failed.
    case keychain(KeychainError)
    /// Sealing or opening the stored token failed (wrong MainKey, changed record).
    case crypto(CofferCryptoError)
    /// The MainKey could not be used (``KeymakerError/locked`` when it left memory meanwhile).
    case keymaker(KeymakerError)
    /// A stored record is not one this version reads; the sentence says which.
    case invalidRecord(String)
    /// A push body could not be opened with this session's key: it was sealed to another session, or changed.
    case pushNotForThisSession
    /// A push opened but its content is not a Coffer push message.
    case malformedPush(String)
    /// The FastSync record has expired (by this device's clock): its key is refused even when the service sends it.
    case fastSyncExpired
    /// A FastSync key in a push was refused; the sentence says why (never the key).
    case fastSyncRefused(String)

    /// A sentence for the person at the terminal or the log.
    public var description: String {
        switch self {
        case .invalidServer(let reason): "The notification server address is not usable: \(reason)."
        case .transport(let error): "The notification server could not be reached safely: \(error.description)"
        case .unexpectedStatus(let status, let what): "The notification server answered \(status) to \(what)."
        case .sessionRevoked:
            "The notification server no longer accepts this device's session (revoked, expired or unknown)."
        case .malformedResponse(let what): "The notification server's answer could not be read: \(what)."
        case .notRegistered: "This account has no push session."
        case .alreadyRegistered:
            "This account already has a push session."
        case .keychain(let error): "The keychain failed: \(error)"
        case .crypto(let error): "The stored push session could not be opened: \(error)"
        case .keymaker(let error): error.description
        case .invalidRecord(let what): "A stored push record is not readable: \(what)."
        case .pushNotForThisSession:
            "The push could not be opened with this device's push key: it was sealed for another session or changed."
        case .malformedPush(let what): "The push opened but is not a Coffer push message: \(what)."
        case .fastSyncExpired:
            "FastSync has expired on this device; the key that came with the push is refused (unlock to sync)."
        case .fastSyncRefused(let why): "The FastSync key that came with the push is refused: \(why)."
        }
    }
}
