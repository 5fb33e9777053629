import CofferCrypto
import CofferKeymaker
import CofferMIME
import GRDB

/// Everything that can go wrong in the mail store, written for the person who reads it.
///
/// No case carries message text, an address, a header, a search word or key material: descriptions can be logged.
public enum StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The Keymaker is locked: the store cannot read or write anything sealed until it is unlocked.
    case locked
    /// The Keymaker failed for another reason than being locked.
    case keymaker(KeymakerError)
    /// No draft with this id.
    case draftNotFound(Int64)
    /// No draft attachment with this id.
    case draftAttachmentNotFound(Int64)
    /// No address-book entry with this id.
    case contactNotFound(Int64)
    /// None of the user's OpenPGP keys has the fingerprint asked for (or there is no key at all).
    case openPGPKeyNotFound
    /// The OpenPGP key is in the store already.
    case openPGPKeyExists
    /// No outbox item with this id.
    case outboxItemNotFound(Int64)
    /// The outbox item is being sent (or was sent) and cannot be changed now: only a queued or failed item can be
    /// cancelled or retried.
    case outboxItemBusy(Int64)
    /// A sealed file beside the store (a draft attachment, an outbox message) failed its integrity check, was cut
    /// short, or is missing: it was changed or deleted outside Coffer.
    case corruptFile(table: String, id: Int64)
    /// A message could not be written as MIME (the field and why, never its content).
    case compose(ComposeError)
    /// A cryptographic operation failed while sealing (opening failures are reported as ``corruptMessage(_:)``).
    case crypto(CofferCryptoError)
    /// No message with this id.
    case messageNotFound(Int64)
    /// No attachment with this id.
    case attachmentNotFound(Int64)
    /// A sealed cell of this message failed to open: it was changed, moved from another row, or damaged. The
    /// message is marked corrupt; the other messages are unaffected.
    case corruptMessage(Int64)
    /// A sealed cell outside the messages (a label, a contact, an account, an address or an attachment) failed to
    /// open, or a row of `table` holds values of the wrong type (the file was changed outside Coffer).
    case corruptRecord(table: String, id: Int64)
    /// A mail source could not be read (the path and the system's reason, never message content).
    case source(MIMEError)
    /// An argument was outside its accepted range.
    case invalidArgument(String)
    /// SQLite reported an error (its result code and message; statements never carry values).
    case database(code: Int32, message: String)
    /// Reading or writing a file failed.
    case io(operation: String, errno: Int32)

    /// A sentence for people; never contains message data.
    public var description: String {
        switch self {
        case .locked: "Coffer is locked; unlock it to use the mail store."
        case .keymaker(let error): error.description
        case .crypto(let error): error.description
        case .draftNotFound(let id): "There is no draft \(id)."
        case .draftAttachmentNotFound(let id): "There is no draft attachment \(id)."
        case .contactNotFound(let id): "There is no contact \(id)."
        case .openPGPKeyNotFound: "There is no such OpenPGP key of yours in the store."
        case .openPGPKeyExists: "This OpenPGP key is in the store already."
        case .outboxItemNotFound(let id): "There is no message \(id) in the outbox."
        case .outboxItemBusy(let id): "Message \(id) of the outbox is being sent or was sent; it cannot be changed now."
        case .corruptFile(let table, let id):
            "The sealed file of \(table) record \(id) is damaged or missing: it was changed outside Coffer."
        case .compose(let error): error.description
        case .messageNotFound(let id): "There is no message \(id)."
        case .attachmentNotFound(let id): "There is no attachment \(id)."
        case .corruptMessage(let id):
            "Message \(id) is damaged: it was changed outside Coffer or failed its integrity check."
        case .corruptRecord(let table, let id):
            "Record \(id) of \(table) is damaged: it was changed outside Coffer or failed its integrity check."
        case .source(let error): error.description
        case .invalidArgument(let why): "Invalid argument: \(why)."
        case .database(let code, let message): "The mail database failed (SQLite \(code)): \(message)."
        case .io(let operation, let code): "Could not \(operation): \(SystemError.message(for: code))."
        }
    }

    /// Maps any error thrown inside a database closure to a store error.
    static func wrap(_ error: any Error) -> StoreError {
        switch error {
        case let error as StoreError: return error
        case let error as KeymakerError: return error == .locked ? .locked : .keymaker(error)
        case let error as CofferCryptoError: return .crypto(error)
        case let error as DatabaseError:
            return .database(code: error.extendedResultCode.rawValue, message: error.message ?? "unknown error")
        case let error as MIMEError: return .source(error)
        case let error as ComposeError: return .compose(error)
        case let error as DamagedRow:
            return error.table == "messages"
                ? .corruptMessage(error.id) : .corruptRecord(table: error.table, id: error.id)
        default: return .database(code: -1, message: String(describing: type(of: error)))
        }
    }
}
