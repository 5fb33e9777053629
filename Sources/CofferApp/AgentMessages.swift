import CofferStore
import CofferSync
import Foundation

/// What a client asks the agent to do.
public enum AgentOperation: String, Codable, Sendable, CaseIterable {
    /// The agent's pid, socket and protocol version.
    case hello
    /// Every account's protection, lock state and autolock.
    case status
    /// Unlock an account (``AgentRequest/method`` says how; a PIN follows as a secret frame).
    case unlock
    /// Lock an account.
    case lock
    /// Set an account's autolock policy (``AgentRequest/policy``).
    case autolock
    /// Add or remove a protection strategy (``AgentRequest/strategy``, ``AgentRequest/remove``).
    case protect
    /// Destroy an account's key and its mail.
    case logout
    /// "The app went to the background" for every account.
    case background
    /// A page of messages.
    case list
    /// Messages matching words.
    case search
    /// One message.
    case message
    /// A message's attachments.
    case attachments
    /// One attachment's content.
    case attachmentContent = "attachment-content"
    /// Decrypt an attachment into a private preview folder owned by this connection.
    case preview
    /// Delete this connection's preview.
    case previewEnd = "preview-end"
    /// Save a cleartext copy of an attachment to a new file.
    case save
    /// Import a file or folder into the store.
    case `import`
    /// Sync the IMAP account ``AgentRequest/id`` (or the only one): ``AgentRequest/folders``, else INBOX and every
    /// subscribed folder.
    case sync
    /// Check a login to ``AgentRequest/server`` (its password follows as a secret frame), then store the account.
    case accountAdd = "account-add"
    /// The IMAP accounts, without passwords.
    case accountShow = "account-show"
    /// Remove the IMAP account ``AgentRequest/id`` and the mail synced only through it.
    case accountRemove = "account-remove"
}

/// An IMAP account's settings as they travel over the agent socket: everything but the password (which, for
/// account-add, travels in a secret frame and is zeroed there).
public struct ServerSettings: Codable, Sendable, Equatable {
    /// The account's number (account-show).
    public var id: Int64?
    /// The host name the certificate must carry.
    public var host: String
    /// The port.
    public var port: Int
    /// STARTTLS on a plain connection instead of implicit TLS.
    public var startTLS: Bool
    /// The login name.
    public var username: String
    /// SPKI pins (base64 SHA-256).
    public var pins: [String]
    /// A PEM bundle of CAs instead of the system store (an absolute path).
    public var caFile: String?
    /// An address to connect to instead of the host.
    public var connectAddress: String?

    /// Settings from an account record (its password left out).
    public init(_ server: ServerAccount, id: Int64? = nil) {
        self.id = id
        host = server.host
        port = server.port
        startTLS = server.startTLS
        username = server.username
        pins = server.pins
        caFile = server.caFile
        connectAddress = server.connectAddress
    }

    /// The account record with `password`.
    public func account(password: String) -> ServerAccount {
        ServerAccount(
            host: host,
            port: port,
            username: username,
            password: password,
            pins: pins,
            caFile: caFile,
            connectAddress: connectAddress,
            startTLS: startTLS
        )
    }
}

/// One request (a JSON object in a request frame). Only the fields the operation uses are set.
public struct AgentRequest: Codable, Sendable, Equatable {
    /// The operation.
    public var op: AgentOperation
    /// The account, resolved by the client (`nil` for operations on every account).
    public var account: String?
    /// `none`, `pin` or `secure-element` for unlock; `pin` means a secret frame follows.
    public var method: String?
    /// A label (list) or the label to import under.
    public var label: String?
    /// Page size.
    public var limit: Int?
    /// Page offset.
    public var offset: Int?
    /// Search words.
    public var words: String?
    /// A message or attachment id.
    public var id: Int64?
    /// An absolute path (import source, save target).
    public var path: String?
    /// Messages per import transaction.
    public var batch: Int?
    /// An autolock policy such as `5m`.
    public var policy: String?
    /// `pin`, `secure-element` or `none` for protect.
    public var strategy: String?
    /// Remove the strategy instead of adding it.
    public var remove: Bool?
    /// hello: the protocol version the client speaks (absent: the agent answers with its own and checks nothing).
    public var version: Int?
    /// sync: the folders (INBOX and every subscribed folder when absent or empty).
    public var folders: [String]?
    /// account-add: the server's settings (the password follows as a secret frame).
    public var server: ServerSettings?

    /// A request for `op`.
    public init(_ op: AgentOperation, account: String? = nil) {
        self.op = op
        self.account = account
    }
}

/// An error reply's code and sentence.
public struct AgentFailure: Codable, Sendable, Equatable, Error {
    /// Machine-readable reasons.
    public enum Code: String, Codable, Sendable {
        /// The key is not in memory: run `coffer unlock`.
        case locked
        /// A frame broke the protocol; the connection is closed.
        case badFrame = "bad-frame"
        /// The request could not be read or lacks a field.
        case badRequest = "bad-request"
        /// The request took longer than its limit.
        case timeout
        /// Too many connections at once.
        case busy
        /// The peer is another user.
        case forbidden
        /// The client speaks another protocol version than the agent.
        case unsupportedVersion = "unsupported-version"
        /// The operation failed; the message says why.
        case failed
    }

    /// The code.
    public var code: Code
    /// One sentence, without secrets or message text.
    public var message: String

    /// A failure.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }
}

/// One account as `status` reports it.
public struct AccountStatus: Codable, Sendable, Equatable {
    /// The account.
    public var account: String
    /// The active strategies (`none`, `pin`, `secure-element`), sorted: what a client decides by.
    public var protection: [String]
    /// The same with the element behind each (`pin (TPM)`, `secure-element (software)`, `none`), for people.
    public var protectionDescriptions: [String]?
    /// Failed PIN attempts, when a PIN is active.
    public var failedAttempts: Int?
    /// Whether the key is in the agent's memory.
    public var unlocked: Bool
    /// The autolock policy in force (known once unlocked).
    public var autolock: String?
    /// Seconds until the autolock fires, when a deadline is set.
    public var secondsUntilAutolock: Int?

    /// A status.
    public init(
        account: String,
        protection: [String],
        protectionDescriptions: [String]? = nil,
        failedAttempts: Int? = nil,
        unlocked: Bool,
        autolock: String? = nil,
        secondsUntilAutolock: Int? = nil
    ) {
        self.account = account
        self.protection = protection
        self.protectionDescriptions = protectionDescriptions
        self.failedAttempts = failedAttempts
        self.unlocked = unlocked
        self.autolock = autolock
        self.secondsUntilAutolock = secondsUntilAutolock
    }
}

/// The answer that ends a request (a JSON object in a reply frame).
public struct AgentReply: Codable, Sendable {
    /// Whether the operation succeeded.
    public var ok: Bool
    /// Why it failed.
    public var error: AgentFailure?
    /// hello: the agent's process id.
    public var pid: Int32?
    /// hello: the socket path.
    public var socket: String?
    /// hello: the protocol version.
    public var version: Int?
    /// status.
    public var accounts: [AccountStatus]?
    /// list, search.
    public var summaries: [MessageSummary]?
    /// message.
    public var message: MessageDetail?
    /// attachments.
    public var attachments: [AttachmentInfo]?
    /// attachment-content, preview, save: the attachment.
    public var attachment: AttachmentInfo?
    /// attachment-content: the bytes.
    public var content: Data?
    /// preview: the decrypted file.
    public var path: String?
    /// import: the counts.
    public var imported: ImportProgress?
    /// unlock, protect: the active strategies; lock, unlock: whether it is locked now.
    public var strategies: [String]?
    /// unlock: whether the account was already unlocked.
    public var alreadyUnlocked: Bool?
    /// autolock: the policy now in force.
    public var policy: String?
    /// sync: what the sync did.
    public var synced: SyncSummary?
    /// account-show: the IMAP accounts, without passwords.
    public var servers: [ServerSettings]?
    /// account-add: the new account's number; account-remove: the account removed.
    public var serverID: Int64?
    /// account-add: what the pin check found, as a phrase (`pin … matched`, `not pinned`).
    public var pinCheck: String?
    /// account-remove: how many messages went with the account.
    public var removedMessages: Int?

    /// A success with no fields yet.
    public static var success: AgentReply { AgentReply(ok: true) }

    /// A failure.
    public static func failure(_ failure: AgentFailure) -> AgentReply { AgentReply(ok: false, error: failure) }

    init(ok: Bool, error: AgentFailure? = nil) {
        self.ok = ok
        self.error = error
    }
}

/// Something the agent says during a request (a JSON object in an event frame).
public struct AgentEvent: Codable, Sendable, Equatable {
    /// `presence` (answer with an ``AgentAnswer``) or `progress`.
    public var event: String
    /// presence: the reason to show.
    public var reason: String?
    /// progress: the counts so far.
    public var progress: ImportProgress?
    /// presence: how many seconds the agent waits for the answer; the client stops asking after that (absent from
    /// agents before this field: the client then uses its own limit).
    public var seconds: Int?

    /// An event.
    public init(event: String, reason: String? = nil, progress: ImportProgress? = nil, seconds: Int? = nil) {
        self.event = event
        self.reason = reason
        self.progress = progress
        self.seconds = seconds
    }
}

/// The client's answer to a presence question.
public struct AgentAnswer: Codable, Sendable, Equatable {
    /// Whether the person at the client's terminal confirmed.
    public var confirmed: Bool

    /// An answer.
    public init(confirmed: Bool) { self.confirmed = confirmed }
}

/// JSON coding of protocol messages.
enum AgentCoding {
    static func encode<T: Encodable>(_ value: T) throws(AppError) -> [UInt8] {
        do { return Array(try JSONEncoder().encode(value)) } catch { throw .malformedMessage }
    }

    static func decode<T: Decodable>(_ type: T.Type, _ bytes: [UInt8]) throws(AppError) -> T {
        do { return try JSONDecoder().decode(type, from: Data(bytes)) } catch { throw .malformedMessage }
    }
}
