import CofferCrypto
import CofferKeymaker

/// Everything that can go wrong in the attachment cache, written for the person who reads it. No case carries a
/// file name given by a sender, attachment content or key material.
public enum AttachmentError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The Keymaker is locked; unlock to read or write the cache.
    case locked
    /// The Keymaker failed for another reason than being locked.
    case keymaker(KeymakerError)
    /// The attachment is not in the cache (never stored, expired or purged).
    case notCached
    /// The cached file failed to decrypt (changed, cut short, moved from another entry); nothing was kept of it.
    case crypto(CofferCryptoError)
    /// The viewer could not be started.
    case viewerFailed(String)
    /// An argument was not acceptable.
    case invalidArgument(String)
    /// Reading or writing a file failed.
    case io(operation: String, errno: Int32)

    /// A sentence for people.
    public var description: String {
        switch self {
        case .locked: "Coffer is locked; unlock it to open attachments."
        case .keymaker(let error): error.description
        case .notCached: "The attachment is not in the cache (it expired or was purged)."
        case .crypto(let error): error.description
        case .viewerFailed(let why): "The viewer could not be started: \(why)."
        case .invalidArgument(let why): "Invalid argument: \(why)."
        case .io(let operation, let code): "Could not \(operation): \(SystemError.message(for: code))."
        }
    }

    static func wrap(_ error: CofferCryptoError) -> AttachmentError {
        if case .io(let operation, let code) = error { return .io(operation: operation, errno: code) }
        return .crypto(error)
    }
}
