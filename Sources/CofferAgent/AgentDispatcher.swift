import CofferAgentProtocol
import CofferApp
import CofferAttachments
import CofferBlocking
import CofferCrypto
import CofferKeymaker
import CofferStore
import Foundation
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// Turns one request into a reply by calling the right handler with the right container.
public final class AgentDispatcher: Sendable {
    /// What it uses.
    public typealias Dependencies = HasKeymakerRegistry & HasKeychain & HasLogger & HasPaths

    private let dependencies: any Dependencies
    private let socketPath: String

    /// A dispatcher for the agent listening on `socketPath`.
    public init(dependencies: any Dependencies, socketPath: String) {
        self.dependencies = dependencies
        self.socketPath = socketPath
    }

    /// Runs `request`; every error becomes a failure reply with one sentence (what the socket sends).
    public func handle(
        _ request: AgentRequest,
        secret: SecretBytes? = nil,
        conversation: any AgentConversation = SilentConversation()
    ) async -> AgentReply {
        do {
            return try await perform(request, secret: secret, conversation: conversation)
        } catch {
            return .failure(Self.failure(for: error, account: request.accountName))
        }
    }

    /// The failure reply for `error` (see ``AgentFailure/init(describing:account:)``).
    public static func failure(for error: any Error, account: String?) -> AgentFailure {
        AgentFailure(describing: error, account: account)
    }

    private func user(_ account: String?) throws -> UserContainer {
        try dependencies.keymakerRegistry.user(dependencies.keymakerRegistry.chooseAccount(account))
    }

    /// ``user(_:)`` for the requests served on the event loop (`list`, `search`): the account check looks at the
    /// keychain's files, so it runs on ``BlockingPool``, and the request goes on where it was, holding nothing
    /// of the request's mail text on the pool thread (see ``AgentOperation/runsOnEventLoop``).
    private func userOffTheLoop(_ account: String?) async throws -> UserContainer {
        try await BlockingPool.run { try self.user(account) }
    }

    /// Runs `request` and throws what the modules throw: the one-shot CLI calls this in its own process, so its
    /// errors keep their types (the socket path goes through ``handle(_:secret:conversation:)``), except that every
    /// module's "locked" is thrown as ``AppError/locked(account:)`` (see ``AppError/isLocked(_:)``).
    ///
    /// Every request here is a person's, so it runs under ``KeyUse/userRequest``: each use of the MainKey it makes
    /// counts as activity for the autolock. Nothing else does (background work runs under ``KeyUse/background``).
    ///
    /// - Parameters:
    ///   - request: The request.
    ///   - secret: The secret frame's bytes when ``AgentRequest/expectsSecret`` (a PIN, PINs, or a password).
    ///   - conversation: Where presence questions, progress and chunks go, and who owns a preview.
    public func perform(
        _ request: AgentRequest,
        secret: SecretBytes?,
        conversation: any AgentConversation
    ) async throws -> AgentReply {
        do {
            return try await KeyUse.userRequest.run {
                try await serve(request, secret: secret, conversation: conversation)
            }
        } catch let error where AppError.isLocked(error) {
            // Every module's "locked" leaves the dispatcher as one error, in process and over the socket alike.
            throw AppError.locked(account: request.accountName)
        }
    }

    private func serve(
        _ request: AgentRequest,
        secret: SecretBytes?,
        conversation: any AgentConversation
    ) async throws -> AgentReply {
        // The agent trusts no client: a name that breaks the rule is refused before it reaches a path or a log.
        if let account = request.accountName, let problem = AccountName.problem(account) {
            throw AgentFailure(.badRequest, AppError.invalidAccountName(problem).description)
        }
        switch request {
        case .hello(let version):
            let agent = Int(AgentFrame.version)
            guard version == agent else {
                throw AgentFailure(
                    .unsupportedVersion,
                    AppError.versionMismatch(agent: agent, client: version).description
                )
            }
            return .hello(pid: getpid(), socket: socketPath, version: agent)
        case .status(let account):
            let handler = StatusHandler(dependencies: dependencies)
            let accounts = try await handler.status(account: account)
            let loggedOut = account == nil ? try handler.remoteLogouts() : []
            return .status(pid: getpid(), socket: socketPath, accounts: accounts, loggedOut: loggedOut)
        case .account(let requested):
            let name = try dependencies.keymakerRegistry.chooseAccount(requested)
            let status = try await StatusHandler(dependencies: dependencies).status(account: name)
            guard let first = status.first else { throw AppError.noAccount }
            return .account(first)
        case .create(let account):
            try await CreateHandler(dependencies: dependencies).create(account)
            return .done
        case .background:
            try await BackgroundHandler(dependencies: dependencies).enteredBackground()
            return .done
        case .logout(let account, let proof):
            try await LogoutHandler(dependencies: dependencies).logout(
                try dependencies.keymakerRegistry.chooseAccount(account),
                currentPIN: proof == .pin ? secret : nil,
                conversation: proof == .secureElement ? conversation : nil,
                forgottenConfirmation: nil
            )
            return .done
        case .erase(let account, let confirmation):
            try await LogoutHandler(dependencies: dependencies).logout(
                try dependencies.keymakerRegistry.chooseAccount(account),
                currentPIN: nil,
                conversation: nil,
                forgottenConfirmation: confirmation
            )
            return .done
        case .unlock(let account, let method):
            let already = try await SessionHandler(dependencies: try user(account))
                .unlock(method: method, pin: secret, conversation: conversation)
            return .unlocked(alreadyUnlocked: already)
        case .lock(let account):
            try await SessionHandler(dependencies: try user(account)).lock()
            return .done
        case .autolock(let account, let policy):
            return .autolock(policy: try await SessionHandler(dependencies: try user(account)).setAutolock(policy))
        case .protect(let account, let change, let proof):
            let (current, new) = try SessionHandler.splitSecret(secret, proof: proof, addingPIN: change.addsPIN)
            return try await SessionHandler(dependencies: try user(account))
                .protect(
                    change,
                    newPIN: new,
                    currentPIN: current,
                    conversation: proof == .secureElement ? conversation : nil
                )
        case .list(let account, let label, let limit, let offset):
            return .summaries(
                try await MailHandler(dependencies: try await userOffTheLoop(account))
                    .list(label: label, limit: limit, offset: offset)
            )
        case .search(let account, let words, let limit, let offset):
            return .summaries(
                try await MailHandler(dependencies: try await userOffTheLoop(account))
                    .search(words, limit: limit, offset: offset)
            )
        case .message(let account, let id):
            return .message(try await MailHandler(dependencies: try user(account)).message(id))
        case .attachments(let account, let message):
            return .attachments(
                try await MailHandler(dependencies: try user(account)).attachments(of: message)
            )
        case .attachmentContent(let account, let id):
            return .attachment(try await MailHandler(dependencies: try user(account)).stream(id, to: conversation))
        case .preview(let account, let source):
            conversation.endPreview()
            let preview = try await MailHandler(dependencies: try user(account)).preview(source)
            conversation.ownPreview(preview.folder)
            return .preview(path: preview.file, report: preview.report)
        case .previewEnd:
            conversation.endPreview()
            return .done
        case .save(let account, let id, let path):
            guard path.hasPrefix("/") else { throw AgentFailure(.badRequest, "The path to save to must be absolute.") }
            return .attachment(try await MailHandler(dependencies: try user(account)).save(id, to: path))
        case .import(let account, let path, let label, let batch):
            guard path.hasPrefix("/") else { throw AgentFailure(.badRequest, "The path to import must be absolute.") }
            return .imported(
                try await MailHandler(dependencies: try user(account))
                    .importSource(at: path, label: label, batchSize: max(1, batch)) { conversation.progress($0) }
            )
        case .sync(let account, let server, let folders, let batch):
            return .synced(
                try await SyncHandler(dependencies: try user(account))
                    .sync(id: server, folders: folders, batch: batch) { conversation.syncProgress($0) }
            )
        case .watch(let account, let server, let folders, let batch, let seconds):
            return .synced(
                try await SyncHandler(dependencies: try user(account))
                    .watch(id: server, folders: folders, batch: batch, seconds: seconds) {
                        conversation.syncProgress($0)
                    }
            )
        case .serverAdd(let account, let server):
            guard let secret else { throw AgentFailure(.badRequest, "The request lacks its password.") }
            let password = secret.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
            let (id, check) = try await SyncHandler(dependencies: try user(account))
                .addAccount(server, password: password)
            return .serverAdded(id: id, pinCheck: check)
        case .serverShow(let account):
            return .servers(try await SyncHandler(dependencies: try user(account)).accounts())
        case .serverRemove(let account, let server):
            let removed = try await SyncHandler(dependencies: try user(account)).removeAccount(server)
            return .serverRemoved(id: server, messages: removed)
        case .notifyRegister(let account, let service, let server, let deviceName):
            return try await PushSessionHandler(dependencies: try user(account))
                .register(service: service, server: server, deviceName: deviceName)
        case .notifyStatus(let account):
            return try PushSessionHandler(dependencies: try user(account)).status()
        case .notifyUnregister(let account):
            return try await PushSessionHandler(dependencies: try user(account)).unregister()
        case .fastSyncOn(let account, let seconds, let proof):
            let user = try user(account)
            let reason = "Turn FastSync on for Coffer account \(user.account)."
            let method = try await SessionHandler.proof(
                try user.keymaker,
                currentPIN: proof == .pin ? secret : nil,
                conversation: proof == .secureElement ? conversation : nil,
                reason: reason
            )
            return try await PresenceRelay.$current.withValue(ConversationPresence(conversation)) {
                try await PushSessionHandler(dependencies: user).fastSyncOn(seconds: seconds, proof: method)
            }
        case .fastSyncOff(let account):
            return try await PushSessionHandler(dependencies: try user(account)).fastSyncOff()
        case .fastSyncStatus(let account):
            return try PushSessionHandler(dependencies: try user(account)).fastSyncStatus()
        case .push(let account, let body, let sync):
            return try await PushSessionHandler(dependencies: try user(account)).push(body: Array(body), sync: sync)
        case .compose(let account, let server, let start):
            return .composeContext(
                try await WritingHandler(dependencies: try user(account)).start(start, server: server)
            )
        case .saveDraft(let account, let draft, let fields, let attach):
            return .draftSaved(
                try await WritingHandler(dependencies: try user(account)).saveDraft(
                    id: draft,
                    fields: fields,
                    attach: attach
                )
            )
        case .drafts(let account):
            return .drafts(try await WritingHandler(dependencies: try user(account)).drafts())
        case .deleteDraft(let account, let draft):
            try await WritingHandler(dependencies: try user(account)).deleteDraft(draft)
            return .done
        case .sendDraft(let account, let draft, let server, let delay, let attach, let openPGP):
            return .outboxEntry(
                try await WritingHandler(dependencies: try user(account)).send(
                    draft: draft,
                    server: server,
                    delay: delay,
                    attach: attach ?? [],
                    openPGP: openPGP
                )
            )
        case .outbox(let account):
            return .outbox(try await WritingHandler(dependencies: try user(account)).outbox())
        case .outboxRetry(let account, let id):
            return .outboxEntry(try await WritingHandler(dependencies: try user(account)).retry(id))
        case .outboxCancel(let account, let id):
            try await WritingHandler(dependencies: try user(account)).cancel(id)
            return .done
        case .outboxFlush(let account, let server):
            return .outboxSent(try await WritingHandler(dependencies: try user(account)).flush(server: server))
        case .contacts(let account, let query):
            return .contacts(try await WritingHandler(dependencies: try user(account)).contacts(matching: query))
        case .contactAdd(let account, let name, let address):
            return .contacts([
                try await WritingHandler(dependencies: try user(account)).addContact(name: name, address: address)
            ])
        case .contactsExport(let account):
            return .text(try await WritingHandler(dependencies: try user(account)).vCards())
        case .keys(let account):
            return .openPGPKeys(try await OpenPGPKeyHandler(dependencies: try user(account)).keys())
        case .keyGenerate(let account, let userID):
            return .openPGPKeys([try await OpenPGPKeyHandler(dependencies: try user(account)).generate(userID: userID)])
        case .keyImport(let account, let path, let passphrase):
            guard !passphrase || secret != nil else {
                throw AgentFailure(.badRequest, "The request lacks its passphrase.")
            }
            return .openPGPKeys(
                try await OpenPGPKeyHandler(dependencies: try user(account))
                    .importKeys(at: path, passphrase: passphrase ? secret : nil)
            )
        case .keyExport(let account, let fingerprint):
            return .text(try await OpenPGPKeyHandler(dependencies: try user(account)).export(fingerprint: fingerprint))
        case .keyAutocryptSetup(let account, let send):
            guard let secret else { throw AgentFailure(.badRequest, "The request lacks its Setup Code.") }
            return .text(
                try await AutocryptSetupHandler(dependencies: try user(account)).setupMessage(code: secret, send: send)
            )
        case .keyAutocryptImport(let account, let message):
            guard let secret else { throw AgentFailure(.badRequest, "The request lacks its Setup Code.") }
            return .openPGPKeys(
                try await AutocryptSetupHandler(dependencies: try user(account)).importSetupMessage(
                    message,
                    code: secret
                )
            )
        case .keyAutocrypt(let account, let preferEncrypt):
            return .text(
                try await OpenPGPKeyHandler(dependencies: try user(account)).autocrypt(preferEncrypt: preferEncrypt)
            )
        }
    }
}
