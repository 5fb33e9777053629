import CofferMIME

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The name of a request's operation: what logs, limits and the FORMAT tables speak of.
public enum AgentOperation: String, Codable, Sendable, CaseIterable {
    case hello, status, account, create, unlock, lock, autolock, protect, logout, erase, background, list, search
    case message, attachments
    case attachmentContent = "attachment-content"
    case preview
    case previewEnd = "preview-end"
    case save
    case `import`
    case sync
    case serverAdd = "server-add"
    case serverShow = "server-show"
    case serverRemove = "server-remove"
    case notifyRegister = "notify-register"
    case notifyStatus = "notify-status"
    case notifyUnregister = "notify-unregister"
    case fastSyncOn = "fastsync-on"
    case fastSyncOff = "fastsync-off"
    case fastSyncStatus = "fastsync-status"
    case push
    case watch
    case compose
    case saveDraft = "save-draft"
    case drafts
    case deleteDraft = "delete-draft"
    case sendDraft = "send-draft"
    case outbox
    case outboxRetry = "outbox-retry"
    case outboxCancel = "outbox-cancel"
    case outboxFlush = "outbox-flush"
    case contacts
    case contactAdd = "contact-add"
    case contactsExport = "contacts-export"
    case keys
    case keyGenerate = "key-generate"
    case keyImport = "key-import"
    case keyExport = "key-export"
    case keyAutocrypt = "key-autocrypt"
    case keyAutocryptSetup = "key-autocrypt-setup"
    case keyAutocryptImport = "key-autocrypt-import"
}

/// How a person proves they may unlock (or change, or log out) an account.
public enum ProofMethod: String, Codable, Sendable, CaseIterable {
    /// Nothing: only while the account's protection is `none`.
    case none
    /// The PIN, which follows the request in a secret frame.
    case pin
    /// The secure element, with presence confirmed at the client's terminal through events.
    case secureElement = "secure-element"
}

/// A change of an account's protection.
public enum ProtectionChange: Codable, Sendable, Equatable {
    /// Set or change the PIN (the new PIN follows in the secret frame); `tpm` binds it to this machine's TPM.
    case addPIN(tpm: Bool)
    /// Seal the MainKey to the secure element.
    case addSecureElement
    /// Remove the PIN.
    case removePIN
    /// Remove the secure element.
    case removeSecureElement
    /// Remove every strategy (`none`).
    case removeAll

    /// Whether the secret frame carries a new PIN.
    public var addsPIN: Bool {
        if case .addPIN = self { return true }
        return false
    }
}

/// What to decrypt or render into a preview folder the connection owns.
public enum PreviewSource: Codable, Sendable, Equatable {
    /// An attachment, through the encrypted attachment cache.
    case attachment(id: Int64)
    /// A message's HTML body as a sanitized page (its `cid:` images inlined); `allowRemote` loads remote content.
    case message(id: Int64, allowRemote: Bool)
}

/// One request (the JSON of a request frame): an operation with exactly its arguments. Per-account operations
/// name their account; ``account(_:)`` turns a `--account` option (or none) into that name.
public enum AgentRequest: Codable, Sendable, Equatable {
    /// The agent's pid, socket and protocol version; `version` is the client's.
    case hello(version: Int)
    /// The status of `account`, or of every account when `nil`.
    case status(account: String?)
    /// The account named, or the only one, with its status (an error when there are none or several).
    case account(String?)
    /// Create the MainKey of a new account (`coffer init`).
    case create(account: String)
    /// Unlock with `method` (a PIN follows in a secret frame).
    case unlock(account: String, method: ProofMethod)
    /// Drop the key from memory.
    case lock(account: String)
    /// Set the autolock policy (`never`, `background`, or a duration such as `5m`).
    case autolock(account: String, policy: String)
    /// Change the protection after a fresh proof by a current strategy, even while unlocked.
    case protect(account: String, change: ProtectionChange, proof: ProofMethod)
    /// Destroy the key and the mail after a fresh proof.
    case logout(account: String, proof: ProofMethod)
    /// Destroy the key and the mail of an account whose PIN is forgotten; `confirmation` is the name as typed.
    case erase(account: String, confirmation: String)
    /// "The app went to the background", for every account.
    case background
    /// A page of messages, newest first, of `account` or the only one (as ``account(_:)`` chooses).
    case list(account: String?, label: String?, limit: Int, offset: Int)
    /// Messages matching `words`, of `account` or the only one.
    case search(account: String?, words: String, limit: Int, offset: Int)
    /// One message of `account` or the only one, opened to be read (marked seen).
    case message(account: String?, id: Int64)
    /// A message's attachments.
    case attachments(account: String, message: Int64)
    /// One attachment's bytes, in `chunk` events, then its metadata in the reply.
    case attachmentContent(account: String, id: Int64)
    /// Decrypt or render into a private folder owned by this connection; the reply names the file.
    case preview(account: String, source: PreviewSource)
    /// Delete this connection's preview.
    case previewEnd
    /// Save a cleartext copy of an attachment to a new file at an absolute path (0600, never overwritten).
    case save(account: String, id: Int64, path: String)
    /// Import a file or folder at an absolute path.
    case `import`(account: String, path: String, label: String, batch: Int)
    /// Sync the IMAP account `server` (or the only one): `folders`, else INBOX and every subscribed folder.
    case sync(account: String, server: Int64?, folders: [String], batch: Int?)
    /// Wait up to `seconds` for a change of the first of `folders` (INBOX when empty) with IDLE, then sync like
    /// ``sync(account:server:folders:batch:)`` as background work (`coffer sync --watch` after its first round).
    case watch(account: String, server: Int64?, folders: [String], batch: Int?, seconds: Int)
    /// Check a login to `server` (its password follows in a secret frame), then store the IMAP account.
    case serverAdd(account: String, server: ServerSettings)
    /// The IMAP accounts, without passwords.
    case serverShow(account: String)
    /// Remove IMAP account `server` and the mail synced only through it.
    case serverRemove(account: String, server: Int64)
    /// Register a push session with the coffer-notify service `service`, proving the IMAP account `server`'s (or
    /// the only one's) credentials; `deviceName` is what the service shows. Needs the key.
    case notifyRegister(account: String, service: NotifyServer, server: Int64?, deviceName: String)
    /// The account's push session, or why it ended.
    case notifyStatus(account: String)
    /// Revoke the push session on the service and delete its keys here. Needs the key (or its token in memory).
    case notifyUnregister(account: String)
    /// Turn FastSync on for `seconds`, or renew it, after a fresh proof (asked even while unlocked).
    case fastSyncOn(account: String, seconds: Int, proof: ProofMethod)
    /// Turn FastSync off: the record is deleted here, and the service told when the session's token is at hand.
    case fastSyncOff(account: String)
    /// Whether FastSync is on, until when, and whether the service still has to be told it ended.
    case fastSyncStatus(account: String)
    /// One push body as the service sent it (raw, or base64url): opened with the session's push key (no MainKey),
    /// and when `sync` and it carries a FastSync key (or the key is in memory), its folder synced.
    case push(account: String, body: Data, sync: Bool)
    /// Where a message being written starts: the sending address of server account `server` (or the only one) and
    /// the fields of a new message, a draft, a reply or a forward.
    case compose(account: String, server: Int64?, start: ComposeStart)
    /// Saves a draft (`draft`, or a new one) and seals each file of `attach` (absolute paths) into it.
    case saveDraft(account: String, draft: Int64?, fields: ComposedFields, attach: [String])
    /// The saved drafts.
    case drafts(account: String)
    /// Deletes a draft with its attachments.
    case deleteDraft(account: String, draft: Int64)
    /// Queues a draft (deleting it) through server account `server`, not before `delay` seconds; with no delay it
    /// is sent before the reply. The files of `attach` (absolute paths) are attached after the draft's own: read
    /// once, into the sealed outbox, never sealed into the draft (`coffer compose --attach FILE --send`). With
    /// `openPGP`, the message is signed and/or encrypted as PGP/MIME before it is queued (`--sign`, `--encrypt`).
    case sendDraft(
        account: String,
        draft: Int64,
        server: Int64?,
        delay: Int,
        attach: [String]?,
        openPGP: OpenPGPSending? = nil
    )
    /// The outbox.
    case outbox(account: String)
    /// Queues a failed message for a new attempt now and sends it.
    case outboxRetry(account: String, id: Int64)
    /// Takes a queued or failed message back out of the outbox.
    case outboxCancel(account: String, id: Int64)
    /// Sends every due message of server account `server` (or the only one) now.
    case outboxFlush(account: String, server: Int64?)
    /// The address book, or the contacts `query` finds.
    case contacts(account: String, query: String?)
    /// Adds (or names) a contact.
    case contactAdd(account: String, name: String?, address: String)
    /// The address book as vCard 4.0.
    case contactsExport(account: String)
    /// The user's own OpenPGP keys (never a secret key).
    case keys(account: String)
    /// Generates an OpenPGP key (Ed25519, X25519 encryption subkey) for `userID`, or for the sending address of the
    /// account's only submission server, and stores it sealed.
    case keyGenerate(account: String, userID: String?)
    /// Imports the secret keys of the file at absolute `path` (armored or binary); with `passphrase`, the key's
    /// OpenPGP passphrase follows in a secret frame. The keys are stored sealed, without their passphrase.
    case keyImport(account: String, path: String, passphrase: Bool)
    /// The certificate (public key) of the key with `fingerprint`, or of the default key, ASCII-armored.
    case keyExport(account: String, fingerprint: String?)
    /// The account's Autocrypt `prefer-encrypt` (`mutual` or `nopreference`), set first when `preferEncrypt` is given.
    case keyAutocrypt(account: String, preferEncrypt: String?)
    /// The Autocrypt Setup Message of the default key, encrypted under the Setup Code that follows in a secret
    /// frame; with `send`, also sent to the user's own address.
    case keyAutocryptSetup(account: String, send: Bool)
    /// Imports the secret key of stored Autocrypt Setup Message `message` with the Setup Code that follows in a
    /// secret frame.
    case keyAutocryptImport(account: String, message: Int64)

    /// The operation's name.
    public var operation: AgentOperation {
        switch self {
        case .hello: .hello
        case .status: .status
        case .account: .account
        case .create: .create
        case .unlock: .unlock
        case .lock: .lock
        case .autolock: .autolock
        case .protect: .protect
        case .logout: .logout
        case .erase: .erase
        case .background: .background
        case .list: .list
        case .search: .search
        case .message: .message
        case .attachments: .attachments
        case .attachmentContent: .attachmentContent
        case .preview: .preview
        case .previewEnd: .previewEnd
        case .save: .save
        case .import: .import
        case .sync: .sync
        case .serverAdd: .serverAdd
        case .serverShow: .serverShow
        case .serverRemove: .serverRemove
        case .notifyRegister: .notifyRegister
        case .notifyStatus: .notifyStatus
        case .notifyUnregister: .notifyUnregister
        case .fastSyncOn: .fastSyncOn
        case .fastSyncOff: .fastSyncOff
        case .fastSyncStatus: .fastSyncStatus
        case .push: .push
        case .watch: .watch
        case .compose: .compose
        case .saveDraft: .saveDraft
        case .drafts: .drafts
        case .deleteDraft: .deleteDraft
        case .sendDraft: .sendDraft
        case .outbox: .outbox
        case .outboxRetry: .outboxRetry
        case .outboxCancel: .outboxCancel
        case .outboxFlush: .outboxFlush
        case .contacts: .contacts
        case .contactAdd: .contactAdd
        case .contactsExport: .contactsExport
        case .keys: .keys
        case .keyGenerate: .keyGenerate
        case .keyImport: .keyImport
        case .keyExport: .keyExport
        case .keyAutocrypt: .keyAutocrypt
        case .keyAutocryptSetup: .keyAutocryptSetup
        case .keyAutocryptImport: .keyAutocryptImport
        }
    }

    /// The account the request names, if it names one.
    public var accountName: String? {
        switch self {
        case .hello, .background, .previewEnd: nil
        case .status(let account): account
        case .account(let account), .list(let account, _, _, _), .search(let account, _, _, _),
            .message(let account, _):
            account
        case .create(let account), .unlock(let account, _), .lock(let account), .autolock(let account, _),
            .protect(let account, _, _), .logout(let account, _), .erase(let account, _), .attachments(let account, _),
            .attachmentContent(let account, _), .preview(let account, _), .save(let account, _, _),
            .import(let account, _, _, _), .sync(let account, _, _, _), .serverAdd(let account, _),
            .serverShow(let account), .serverRemove(let account, _), .notifyRegister(let account, _, _, _),
            .notifyStatus(let account), .notifyUnregister(let account), .fastSyncOn(let account, _, _),
            .fastSyncOff(let account), .fastSyncStatus(let account), .push(let account, _, _),
            .watch(let account, _, _, _, _), .compose(let account, _, _), .saveDraft(let account, _, _, _),
            .drafts(let account), .deleteDraft(let account, _), .sendDraft(let account, _, _, _, _, _),
            .outbox(let account),
            .outboxRetry(let account, _), .outboxCancel(let account, _), .outboxFlush(let account, _),
            .contacts(let account, _), .contactAdd(let account, _, _), .contactsExport(let account),
            .keys(let account), .keyGenerate(let account, _), .keyImport(let account, _, _),
            .keyExport(let account, _), .keyAutocrypt(let account, _), .keyAutocryptSetup(let account, _),
            .keyAutocryptImport(let account, _):
            account
        }
    }

    /// Whether a secret frame follows: the PIN of a `pin` unlock or proof, the new PIN of `addPIN` (after the
    /// current one and a newline when the proof is also a PIN), an IMAP password, or an OpenPGP key's passphrase.
    public var expectsSecret: Bool {
        switch self {
        case .keyImport(_, _, let passphrase): passphrase
        case .keyAutocryptSetup, .keyAutocryptImport: true
        case .unlock(_, let method), .logout(_, let method), .fastSyncOn(_, _, let method): method == .pin
        case .protect(_, let change, let proof): change.addsPIN || proof == .pin
        case .serverAdd: true
        default: false
        }
    }
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
    /// Where pin failures are reported (https), or nil.
    public var pinReportURL: String?
    /// When the pins stop being enforced (only reported), Unix seconds, or nil.
    public var pinExpires: Int64?
    /// The SMTP submission server mail is sent through, or nil.
    public var submission: SubmissionSettings?

    /// Creates them from their fields (the conversions from and to the store's records are in CofferApp).
    package init(
        id: Int64?,
        host: String,
        port: Int,
        startTLS: Bool,
        username: String,
        pins: [String],
        caFile: String?,
        connectAddress: String?,
        pinReportURL: String?,
        pinExpires: Int64?,
        submission: SubmissionSettings?
    ) {
        self.id = id
        self.host = host
        self.port = port
        self.startTLS = startTLS
        self.username = username
        self.pins = pins
        self.caFile = caFile
        self.connectAddress = connectAddress
        self.pinReportURL = pinReportURL
        self.pinExpires = pinExpires
        self.submission = submission
    }
}

/// An account's SMTP submission server as it travels over the agent socket (no password: it logs in as the IMAP
/// account does, or as `username` with the IMAP password).
public struct SubmissionSettings: Codable, Sendable, Equatable {
    /// The host name the certificate must carry.
    public var host: String
    /// The port (465 implicit TLS, 587 STARTTLS).
    public var port: Int
    /// STARTTLS on a plain connection instead of implicit TLS.
    public var startTLS: Bool
    /// Its own SPKI pins (base64 SHA-256).
    public var pins: [String]
    /// A PEM bundle of CAs instead of the system store (an absolute path).
    public var caFile: String?
    /// An address to connect to instead of the host.
    public var connectAddress: String?
    /// The account's own address: the From of mail written here.
    public var address: MailAddress
    /// Its login name, or nil for the IMAP account's.
    public var username: String?

    /// Creates one.
    public init(
        host: String,
        port: Int,
        startTLS: Bool,
        pins: [String],
        caFile: String?,
        connectAddress: String?,
        address: MailAddress,
        username: String?
    ) {
        self.host = host
        self.port = port
        self.startTLS = startTLS
        self.pins = pins
        self.caFile = caFile
        self.connectAddress = connectAddress
        self.address = address
        self.username = username
    }
}

/// An account that a remote logout ended (its push session revoked or expired on the service): its key, push keys
/// and mail are gone; `coffer status` says why until the name is logged in again.
public struct RemoteLogout: Codable, Sendable, Equatable {
    /// The account.
    public var account: String
    /// Why, as a sentence without secrets.
    public var reason: String

    /// A remote logout.
    public init(account: String, reason: String) {
        self.account = account
        self.reason = reason
    }
}

/// A push session as `notify status` shows it (the token never leaves the keychain).
public struct PushSessionInfo: Codable, Sendable, Equatable {
    /// The service's session id.
    public var sessionID: String
    /// The service's URL.
    public var service: String
    /// The name the service shows.
    public var deviceName: String
    /// When the token expires.
    public var expires: Date
    /// The service's pins.
    public var pins: [String]
    /// Whether the push key is in the keychain.
    public var hasPushKey: Bool

    /// A session.
    public init(sessionID: String, service: String, deviceName: String, expires: Date, pins: [String], hasPushKey: Bool)
    {
        self.sessionID = sessionID
        self.service = service
        self.deviceName = deviceName
        self.expires = expires
        self.pins = pins
        self.hasPushKey = hasPushKey
    }
}

/// What the service said to an unregistration.
public enum UnregisterOutcome: Codable, Sendable, Equatable {
    /// It revoked the session.
    case revoked
    /// It had ended the session already.
    case alreadyEnded
    /// It could not be reached; it ends the session at its expiry. `reason` is the error's sentence.
    case unreachable(reason: String)
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
        /// The key file of `keyImport` holds a protected secret key and no passphrase came: ask for it once and send
        /// the request again with it.
        case passphraseRequired = "passphrase-required"
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
    /// How many wrong PINs in a row destroy the key, when a PIN is active.
    public var failedAttemptLimit: Int?
    /// Whether the key is in the agent's memory.
    public var unlocked: Bool
    /// The autolock policy in force (known once unlocked).
    public var autolock: String?
    /// Seconds until the autolock fires, when a deadline is set.
    public var secondsUntilAutolock: Int?
    /// Messages waiting in the outbox (queued or being sent), when the account has a store; while locked they wait
    /// for the next unlock.
    public var outboxWaiting: Int?
    /// Messages in the outbox that were not sent (refused, or given up).
    public var outboxFailed: Int?

    /// A status.
    public init(
        account: String,
        protection: [String],
        protectionDescriptions: [String]? = nil,
        failedAttempts: Int? = nil,
        failedAttemptLimit: Int? = nil,
        unlocked: Bool,
        autolock: String? = nil,
        secondsUntilAutolock: Int? = nil
    ) {
        self.account = account
        self.protection = protection
        self.protectionDescriptions = protectionDescriptions
        self.failedAttempts = failedAttempts
        self.failedAttemptLimit = failedAttemptLimit
        self.unlocked = unlocked
        self.autolock = autolock
        self.secondsUntilAutolock = secondsUntilAutolock
    }
}

/// The answer that ends a request (the JSON of a reply frame): what the operation produced, or why it failed.
public enum AgentReply: Codable, Sendable {
    /// hello: the agent's process, socket and protocol version.
    case hello(pid: Int32, socket: String, version: Int)
    /// status: the accounts, with the agent's process and socket (`pid` 0 and an empty socket in one-shot mode), and
    /// the accounts the service logged out.
    case status(pid: Int32, socket: String, accounts: [AccountStatus], loggedOut: [RemoteLogout])
    /// account: the chosen account.
    case account(AccountStatus)
    /// Done, with nothing to say (create, lock, logout, erase, background, preview-end).
    case done
    /// unlock: whether the key was already in memory.
    case unlocked(alreadyUnlocked: Bool)
    /// autolock: the policy now in force.
    case autolock(policy: String)
    /// protect: the strategies now active, for clients and for people; `estimate` is a sentence on how long a
    /// new software PIN resists guessing; `fastSyncEnded` says the change turned FastSync off, and
    /// `fastSyncKeyDeletedOnService` that the service confirmed deleting its escrowed key.
    case protected(
        strategies: [String],
        descriptions: [String],
        estimate: String?,
        fastSyncEnded: Bool,
        fastSyncKeyDeletedOnService: Bool
    )
    /// list, search.
    case summaries([MessageSummary])
    /// message.
    case message(MessageDetail)
    /// attachments.
    case attachments([AttachmentInfo])
    /// attachment-content (after its chunks), save.
    case attachment(AttachmentInfo)
    /// preview: the file in the connection's preview folder, and for a page what the sanitizer blocked.
    case preview(path: String, report: [String])
    /// import: the counts.
    case imported(ImportProgress)
    /// sync, watch: what it did.
    case synced(SyncSummary)
    /// server-add: the IMAP account's number and what the pin check found (`pin … matched`, `not pinned`).
    case serverAdded(id: Int64, pinCheck: String)
    /// server-show: the IMAP accounts, without passwords.
    case servers([ServerSettings])
    /// server-remove: the account removed and how many messages went with it.
    case serverRemoved(id: Int64, messages: Int)
    /// notify-register: the new session, the service's URL, the IMAP user it proved, and the token's expiry.
    case notifyRegistered(sessionID: String, service: String, user: String, expires: Date)
    /// notify-status: the session, or nil with why it ended (when known).
    case notifySession(PushSessionInfo?, endedReason: String?)
    /// notify-unregister: the session and what the service said (``UnregisterOutcome``).
    case notifyUnregistered(sessionID: String, outcome: UnregisterOutcome)
    /// fastsync-on, fastsync-off, fastsync-status: the record's expiry (nil: off), whether a record was deleted by
    /// this request, and whether the service still has to be told that FastSync ended (the next unlock does).
    case fastSync(expires: Date?, ended: Bool, serviceDeletionPending: Bool)
    /// push: the push opened (never its FastSync key), how many new messages its sync stored (nil: no sync), and
    /// why its sync failed, if it did.
    case pushOpened(PushMessage, fetched: Int?, syncFailure: String?)
    /// Where a message being written starts (compose).
    case composeContext(ComposeContext)
    /// The draft as saved (save-draft).
    case draftSaved(DraftInfo)
    /// The saved drafts (drafts).
    case drafts([DraftInfo])
    /// A message of the outbox as it stands (send-draft, outbox-retry).
    case outboxEntry(OutboxEntry)
    /// The outbox (outbox).
    case outbox([OutboxEntry])
    /// What a drain of the outbox did (outbox-flush).
    case outboxSent(OutboxReport)
    /// Contacts (contacts, contact-add).
    case contacts([ContactInfo])
    /// Text (contacts-export: vCard; key-export: an armored certificate).
    case text(String)
    /// The user's OpenPGP keys (keys), or the keys a request added (key-generate, key-import).
    case openPGPKeys([OpenPGPKeyInfo])
    /// The request failed.
    case failure(AgentFailure)

    /// The failure, if it is one.
    public var failure: AgentFailure? {
        if case .failure(let failure) = self { return failure }
        return nil
    }
}

/// Something the agent says while a request runs (the JSON of an event frame).
public enum AgentEvent: Codable, Sendable, Equatable {
    /// The secure element needs presence: answer with an ``AgentAnswer`` within `seconds`.
    case presence(reason: String, seconds: Int)
    /// How an import is going.
    case progress(ImportProgress)
    /// How a sync is going: the folder and its messages fetched of those to fetch.
    case syncProgress(SyncProgress)
    /// The next piece of an attachment's bytes (at most ``AgentEvent/chunkSize``).
    case chunk(Data)

    /// The largest chunk the agent sends: 64 KiB.
    public static let chunkSize = 65_536
}

/// The client's answer to a presence question.
public struct AgentAnswer: Codable, Sendable, Equatable {
    /// Whether the person at the client's terminal confirmed.
    public var confirmed: Bool

    /// An answer.
    public init(confirmed: Bool) { self.confirmed = confirmed }
}

/// JSON coding of protocol messages.
package enum AgentCoding {
    package static func encode<T: Encodable>(_ value: T) throws(AppError) -> [UInt8] {
        do { return Array(try JSONEncoder().encode(value)) } catch { throw .malformedMessage }
    }

    /// The frame that ends a request: a page of summaries in its binary encoding, any other reply as JSON.
    package static func frame(_ reply: AgentReply) throws(AppError) -> AgentFrame {
        if case .summaries(let summaries) = reply {
            return AgentFrame(kind: .summaries, payload: SummaryPage.encode(summaries))
        }
        return AgentFrame(kind: .reply, payload: try encode(reply))
    }

    package static func decode<T: Decodable>(_ type: T.Type, _ bytes: [UInt8]) throws(AppError) -> T {
        do { return try JSONDecoder().decode(type, from: Data(bytes)) } catch { throw .malformedMessage }
    }
}

/// What `sendDraft` does with OpenPGP before the message is queued: sign it with the user's default key, encrypt it
/// to every recipient's key and the user's own, or both (signed inside the encryption), as PGP/MIME (RFC 3156).
public struct OpenPGPSending: Codable, Sendable, Equatable {
    /// Sign with the user's default key.
    public var sign: Bool
    /// Encrypt to every recipient's (To, Cc, Bcc) key and to the user's own.
    public var encrypt: Bool
    /// Do not encrypt even when Autocrypt recommends it (`--no-encrypt`); absent is `false`.
    public var noEncrypt: Bool?

    /// Creates one.
    public init(sign: Bool, encrypt: Bool, noEncrypt: Bool? = nil) {
        self.sign = sign
        self.encrypt = encrypt
        self.noEncrypt = noEncrypt
    }
}

/// One of the user's own OpenPGP keys as it travels over the agent socket: never its secret key.
public struct OpenPGPKeyInfo: Codable, Sendable, Equatable {
    /// The primary key's fingerprint, upper-case hex.
    public var fingerprint: String
    /// The key's valid user ids (as their owner wrote them: clean them before printing).
    public var userIDs: [String]
    /// When it was added to the store.
    public var created: Date
    /// Whether it is the key used when none is named.
    public var isDefault: Bool
    /// `true` for a correspondent's certificate (kept with the address book, no secret key); absent or `false` for
    /// one of the user's own keys.
    public var correspondent: Bool?

    /// Creates one.
    public init(fingerprint: String, userIDs: [String], created: Date, isDefault: Bool, correspondent: Bool? = nil) {
        self.fingerprint = fingerprint
        self.userIDs = userIDs
        self.created = created
        self.isDefault = isDefault
        self.correspondent = correspondent
    }

    /// Whether it is a correspondent's certificate rather than one of the user's own keys.
    public var isCorrespondent: Bool { correspondent == true }
}
