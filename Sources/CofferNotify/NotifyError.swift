/// Everything that can go wrong in coffer-notify, written for people. No token, password, sender, subject or key
/// ever appears in a case or its description.
public enum NotifyError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The database could not be opened, migrated, read or written.
    case storage(String)
    /// A request field is missing, too long or malformed; the sentence names the field.
    case invalidRequest(String)
    /// The push public key is already registered to another session (keys are never reused).
    case pushKeyInUse
    /// No token, or an unknown, expired or revoked one.
    case unauthorized
    /// The mail server refused the user name and password.
    case wrongCredentials
    /// The mail server could not be reached or answered unexpectedly; the sentence says how.
    case mailServerUnavailable(String)
    /// Too many attempts from one address or for one user.
    case rateLimited
    /// The session does not exist or belongs to another user.
    case sessionNotFound
    /// A configuration file or setting is not usable.
    case configuration(String)
    /// An RFC 8030 push service could not be reached or refused the push; the sentence says how.
    case pushServiceUnavailable(String)
    /// The user already has the most live sessions allowed (the number).
    case tooManySessions(Int)
    /// The session already has the most streams open at once.
    case tooManyStreams

    /// A sentence for the person reading the log or the HTTP response.
    public var description: String {
        switch self {
        case .storage(let reason): "The notification database failed: \(reason)."
        case .invalidRequest(let reason): "The request is not valid: \(reason)."
        case .pushKeyInUse: "This push public key is already registered to a session; make a fresh key pair."
        case .unauthorized: "Unauthorized."
        case .wrongCredentials: "The mail server refused this user name and password."
        case .mailServerUnavailable(let reason): "The mail server could not check the credentials: \(reason)"
        case .rateLimited: "Too many attempts; wait a minute and try again."
        case .sessionNotFound: "There is no such session."
        case .configuration(let reason): "The configuration is not usable: \(reason)."
        case .pushServiceUnavailable(let reason): "The push service failed: \(reason)."
        case .tooManySessions(let limit):
            "This user already has \(limit) active sessions; revoke one (GET /account) before adding another."
        case .tooManyStreams: "This session already has the most streams open; close one first."
        }
    }

    /// The sentence a client is given: ``description`` without what only the operator should read (the mail
    /// server's or push service's host, port and address, a database's error).
    public var publicDescription: String {
        switch self {
        case .mailServerUnavailable: "The mail server could not check the credentials; try again later."
        case .storage: "The notification database failed."
        case .configuration: "The service is not configured for this."
        case .pushServiceUnavailable: "The push service could not be reached."
        default: description
        }
    }
}
