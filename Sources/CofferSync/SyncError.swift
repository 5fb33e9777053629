import CofferIMAP
import CofferStore
import CofferTransport

/// Everything that can stop an account check or a sync, written for the person who reads it.
///
/// No case carries a password, a message's text or a folder's name.
public enum SyncError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The Keymaker is locked: nothing is read from or written to the store, and the server is not contacted.
    case locked
    /// The mail store failed.
    case store(StoreError)
    /// The IMAP connection or a command failed (pin and certificate failures included, never bypassable).
    case imap(IMAPError)
    /// The account's settings cannot be used (for example a pin policy with fewer than two pins).
    case invalidAccount(String)
    /// No IMAP account is set up in this store.
    case noAccount
    /// The server did not report a UIDVALIDITY for a folder, so its UIDs cannot be trusted across sessions.
    case noUIDValidity
    /// Messages were expunged from a folder so fast while its UIDs were listed that the listing could not finish.
    case folderKeptChanging

    /// A sentence for people.
    public var description: String {
        switch self {
        case .locked: "Coffer is locked; unlock it to sync mail."
        case .store(let error): error.description
        case .imap(let error): error.description
        case .invalidAccount(let why): "The account's settings cannot be used: \(why)."
        case .noAccount: "No mail server account is set up."
        case .noUIDValidity:
            "The IMAP server did not report a UIDVALIDITY for a folder, so it cannot be synced safely."
        case .folderKeptChanging:
            "Messages kept being deleted from a folder on the server while it was read; it was left for the next sync."
        }
    }

    static func wrap(_ error: StoreError) -> SyncError { error == .locked ? .locked : .store(error) }
}
