import CofferAgentProtocol
import CofferAttachments
import CofferCrypto
import CofferKeymaker
import CofferNotifyClient
import CofferStore
import CofferSync

extension AppError {
    /// Whether `error` says that an account's key is not in memory, in any module's words: the Keymaker's, the
    /// store's, the attachment cache's, the sync's and the push client's `locked` (wrapped or not), a MainKey wiped while in use, and
    /// the agent's `locked` reply. The one place that knows them all: the dispatcher asks it once for every error,
    /// and everything above sees only ``AppError/locked(account:)``.
    public static func isLocked(_ error: any Error) -> Bool {
        switch error {
        case AppError.locked, KeymakerError.locked, StoreError.locked, AttachmentError.locked, SyncError.locked,
            CofferCryptoError.keyWiped, KeymakerError.crypto(.keyWiped), StoreError.crypto(.keyWiped),
            AttachmentError.crypto(.keyWiped):
            true
        case StoreError.keymaker(let inner): isLocked(inner)
        case AttachmentError.keymaker(let inner): isLocked(inner)
        case SyncError.store(let inner): isLocked(inner)
        case NotifyClientError.keymaker(let inner): isLocked(inner)
        case let failure as AgentFailure: failure.code == .locked
        default: false
        }
    }
}

extension AgentFailure {
    /// The failure reply for `error`: ``AgentFailure/Code/locked`` with one sentence for every way of saying the key
    /// is not in memory (``AppError/isLocked(_:)``), else the error's own sentence (which never holds a secret).
    ///
    /// - Parameters:
    ///   - error: What a request threw.
    ///   - account: The account the request named, for the sentence.
    public init(describing error: any Error, account: String?) {
        switch error {
        case let failure as AgentFailure where failure.code != .locked:
            self = failure
        case _ where AppError.isLocked(error):
            self.init(.locked, AppError.locked(account: account).description)
        case let error as CustomStringConvertible:
            self.init(.failed, error.description)
        default:
            self.init(.failed, "The operation failed.")
        }
    }
}
