import CofferAttachments
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
    public typealias Dependencies = HasKeymakerRegistry & HasLogger & HasPaths

    private let dependencies: any Dependencies
    private let socketPath: String

    /// A dispatcher for the agent listening on `socketPath`.
    public init(dependencies: any Dependencies, socketPath: String) {
        self.dependencies = dependencies
        self.socketPath = socketPath
    }

    /// Whether `request` is followed by a secret frame (a PIN). `protect` and `logout` carry their proof in
    /// `method` (`none`, `pin`, `secure-element`); with `pin`, the frame starts with the current PIN (for adding a
    /// PIN: current PIN, a newline, new PIN; see ``SessionHandler/splitSecret(_:proof:addingPIN:)``).
    public static func expectsSecret(_ request: AgentRequest) -> Bool {
        switch request.op {
        case .unlock: request.method == "pin"
        case .protect: (request.strategy == "pin" && request.remove != true) || request.method == "pin"
        case .logout: request.method == "pin"
        case .accountAdd: true
        default: false
        }
    }

    /// Runs `request`; every error becomes a failure reply with one sentence.
    public func handle(
        _ request: AgentRequest,
        secret: SecretBytes? = nil,
        conversation: any AgentConversation = SilentConversation()
    ) async -> AgentReply {
        do {
            // The agent trusts no client: a name that breaks the rule is refused before it reaches a path or a log.
            if let account = request.account, let problem = AccountName.problem(account) {
                return .failure(AgentFailure(.badRequest, AppError.invalidAccountName(problem).description))
            }
            return try await perform(request, secret: secret, conversation: conversation)
        } catch {
            return .failure(Self.failure(for: error, account: request.account))
        }
    }

    /// The failure reply for `error`: `locked` for every flavour of locked, else the error's own sentence.
    public static func failure(for error: any Error, account: String?) -> AgentFailure {
        switch error {
        case let failure as AgentFailure: return failure
        case KeymakerError.locked, StoreError.locked, AttachmentError.locked, StoreError.keymaker(.locked):
            let who = account.map { " for \($0)" } ?? ""
            return AgentFailure(.locked, "Coffer is locked\(who); run `coffer unlock` to give the agent the key again.")
        case let error as CustomStringConvertible: return AgentFailure(.failed, error.description)
        default: return AgentFailure(.failed, "The operation failed.")
        }
    }

    private func user(_ request: AgentRequest) throws -> UserContainer {
        let registry = try dependencies.keymakerRegistry
        return registry.user(try registry.chooseAccount(request.account))
    }

    private func need<T>(_ value: T?, _ name: String) throws -> T {
        guard let value else { throw AgentFailure(.badRequest, "The request lacks its \(name).") }
        return value
    }

    private func perform(
        _ request: AgentRequest,
        secret: SecretBytes?,
        conversation: any AgentConversation
    ) async throws -> AgentReply {
        var reply = AgentReply.success
        switch request.op {
        case .hello:
            reply.pid = getpid()
            reply.socket = socketPath
            reply.version = Int(AgentFrame.version)
            if let spoken = request.version, spoken != Int(AgentFrame.version) {
                reply.ok = false
                reply.error = AgentFailure(
                    .unsupportedVersion,
                    AppError.versionMismatch(agent: Int(AgentFrame.version), client: spoken).description
                )
            }
        case .status:
            reply.accounts = try await StatusHandler(dependencies: dependencies).status(account: request.account)
            reply.pid = getpid()
            reply.socket = socketPath
        case .background:
            try await BackgroundHandler(dependencies: dependencies).enteredBackground()
        case .logout:
            let registry = try dependencies.keymakerRegistry
            try await LogoutHandler(dependencies: dependencies).logout(
                try registry.chooseAccount(request.account),
                currentPIN: request.method == "pin" ? secret : nil,
                conversation: request.method == "secure-element" ? conversation : nil,
                forgottenConfirmation: nil
            )
        case .unlock:
            let user = try user(request)
            reply.alreadyUnlocked = try await SessionHandler(dependencies: user)
                .unlock(method: try need(request.method, "method"), pin: secret, conversation: conversation)
        case .lock:
            try await SessionHandler(dependencies: try user(request)).lock()
        case .autolock:
            reply.policy = try await SessionHandler(dependencies: try user(request))
                .setAutolock(try need(request.policy, "policy"))
        case .protect:
            let strategy = try need(request.strategy, "strategy")
            let remove = request.remove ?? false
            let (current, new) = try SessionHandler.splitSecret(
                secret,
                proof: request.method,
                addingPIN: strategy == "pin" && !remove
            )
            reply.strategies = try await SessionHandler(dependencies: try user(request))
                .protect(
                    strategy: strategy,
                    remove: remove,
                    newPIN: new,
                    currentPIN: current,
                    conversation: request.method == "secure-element" ? conversation : nil
                )
        case .list:
            reply.summaries = try await MailHandler(dependencies: try user(request))
                .list(label: request.label, limit: request.limit ?? 50, offset: request.offset ?? 0)
        case .search:
            reply.summaries = try await MailHandler(dependencies: try user(request))
                .search(try need(request.words, "words"), limit: request.limit ?? 50, offset: request.offset ?? 0)
        case .message:
            reply.message = try await MailHandler(dependencies: try user(request)).message(try need(request.id, "id"))
        case .attachments:
            reply.attachments = try await MailHandler(dependencies: try user(request))
                .attachments(of: try need(request.id, "id"))
        case .attachmentContent:
            let (info, content) = try await MailHandler(dependencies: try user(request))
                .content(try need(request.id, "id"))
            reply.attachment = info
            reply.content = Data(content)
        case .preview:
            conversation.endPreview()
            let preview = try await MailHandler(dependencies: try user(request)).preview(try need(request.id, "id"))
            conversation.ownPreview(preview.folder)
            reply.path = preview.file
            reply.attachment = preview.info
        case .previewEnd:
            conversation.endPreview()
        case .save:
            let path = try need(request.path, "path")
            guard path.hasPrefix("/") else { throw AgentFailure(.badRequest, "The path to save to must be absolute.") }
            reply.attachment = try await MailHandler(dependencies: try user(request))
                .save(try need(request.id, "id"), to: path)
        case .import:
            let path = try need(request.path, "path")
            guard path.hasPrefix("/") else { throw AgentFailure(.badRequest, "The path to import must be absolute.") }
            reply.imported = try await MailHandler(dependencies: try user(request))
                .importSource(
                    at: path,
                    label: request.label ?? "Inbox",
                    batchSize: max(1, request.batch ?? MailStore.defaultBatchSize),
                    progress: { conversation.progress($0) }
                )
        case .sync:
            reply.synced = try await SyncHandler(dependencies: try user(request))
                .sync(id: request.id, folders: request.folders ?? [], batch: request.batch)
        case .accountAdd:
            let password = try need(secret, "password").withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
            (reply.serverID, reply.pinCheck) = try await SyncHandler(dependencies: try user(request))
                .addAccount(try need(request.server, "server"), password: password)
        case .accountShow:
            reply.servers = try await SyncHandler(dependencies: try user(request)).accounts()
        case .accountRemove:
            let id = try need(request.id, "id")
            reply.removedMessages = try await SyncHandler(dependencies: try user(request)).removeAccount(id)
            reply.serverID = id
        }
        return reply
    }
}
