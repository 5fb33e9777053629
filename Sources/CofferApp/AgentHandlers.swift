import CofferAttachments
import CofferCrypto
import CofferKeymaker
import CofferStore
import Foundation
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// What a request handler may ask of the client while it runs.
public protocol AgentConversation: Sendable {
    /// Asks the person at the client's terminal to confirm presence; `false` if they do not, or the client is gone.
    func confirmPresence(reason: String) async -> Bool
    /// Tells the client how an import is going (best effort).
    func progress(_ progress: ImportProgress)
    /// Hands a preview folder to the connection, which deletes it at `preview-end` or when it closes.
    func ownPreview(_ folder: String)
    /// Deletes the connection's preview now.
    func endPreview()
}

/// A conversation with nobody: presence is refused, progress dropped, previews deleted at once (in-process calls).
public struct SilentConversation: AgentConversation {
    /// A silent conversation.
    public init() {}
    /// Refuses.
    public func confirmPresence(reason: String) async -> Bool { false }
    /// Drops it.
    public func progress(_ progress: ImportProgress) {}
    /// Deletes it at once.
    public func ownPreview(_ folder: String) { SecureFile.removeTree(folder) }
    /// Nothing to do.
    public func endPreview() {}
}

/// `status`: every account's protection, lock state and autolock deadline.
public final class StatusHandler: Sendable {
    /// What it uses.
    public typealias Dependencies = HasKeymakerRegistry

    private let dependencies: any Dependencies

    /// A handler.
    public init(dependencies: any Dependencies) { self.dependencies = dependencies }

    /// The status of `account`, or of every account when `nil`.
    public func status(account: String?) async throws -> [AccountStatus] {
        let registry = try dependencies.keymakerRegistry
        let accounts = try account.map { [try registry.chooseAccount($0)] } ?? registry.accounts()
        var result: [AccountStatus] = []
        for name in accounts {
            let keymaker = try registry.user(name).keymaker
            let strategies = try await keymaker.strategies()
            let unlocked = await !keymaker.isLocked
            result.append(
                AccountStatus(
                    account: name,
                    protection: strategies.map(\.description).sorted(),
                    protectionDescriptions: try await keymaker.protectionDescriptions(),
                    failedAttempts: strategies.contains(.pin) ? try await keymaker.failedAttempts() : nil,
                    unlocked: unlocked,
                    autolock: unlocked ? await keymaker.autolockPolicy.description : nil,
                    secondsUntilAutolock: unlocked ? await keymaker.secondsUntilAutolock() : nil
                )
            )
        }
        return result
    }
}

/// `unlock`, `lock`, `autolock` and `protect` for one account.
public final class SessionHandler: Sendable {
    /// What it uses.
    public typealias Dependencies = HasAccount & HasKeymaker & HasAttachmentCache & HasLogger

    private let dependencies: any Dependencies

    /// A handler.
    public init(dependencies: any Dependencies) { self.dependencies = dependencies }

    /// Unlocks with `method` (`none`, `pin` with `pin`, or `secure-element` with presence asked of `conversation`),
    /// then purges expired attachments (the cache's unlock duty).
    ///
    /// - Returns: Whether the key was already in memory (nothing was asked).
    public func unlock(method: String, pin: SecretBytes?, conversation: any AgentConversation) async throws -> Bool {
        let keymaker = try dependencies.keymaker
        if await !keymaker.isLocked { return true }
        switch method {
        case "none":
            try await keymaker.unlock(.none)
        case "pin":
            guard let pin else {
                throw AgentFailure(.badRequest, "An unlock with a PIN needs the PIN in a secret frame.")
            }
            try await keymaker.unlock(.pin(pin))
        case "secure-element":
            let reason = "Unlock Coffer account \(dependencies.account) in the agent."
            try await PresenceRelay.$current.withValue(ConversationPresence(conversation)) {
                try await keymaker.unlock(.secureElement(reason: reason))
            }
        default:
            throw AgentFailure(.badRequest, "The unlock method must be none, pin or secure-element.")
        }
        try? dependencies.attachmentCache.purgeExpired()
        try dependencies.logger.info(
            "unlocked",
            metadata: ["account": "\(dependencies.account)", "method": "\(method)"]
        )
        return false
    }

    /// Removes the key from memory (zeroed).
    public func lock() async throws {
        try await dependencies.keymaker.lock(reason: .user)
    }

    /// Sets the autolock policy (needs the key).
    public func setAutolock(_ text: String) async throws -> String {
        guard let policy = AutolockPolicy(parsing: text) else {
            throw AgentFailure(.badRequest, "The autolock policy must be never, background, or a duration like 5m.")
        }
        try await dependencies.keymaker.setAutolock(policy)
        return policy.description
    }

    /// Adds or removes a strategy without a proof: succeeds only while the account's protection is `none`.
    /// Prefer ``protect(strategy:remove:newPIN:currentPIN:conversation:)``.
    public func protect(strategy: String, remove: Bool, pin: SecretBytes?) async throws -> [String] {
        try await protect(strategy: strategy, remove: remove, newPIN: pin, currentPIN: nil, conversation: nil)
    }

    /// Adds or removes a strategy after a fresh proof by a current one, even while the key is in memory: the
    /// current PIN (from a secret frame; a wrong one counts as a failed attempt), else presence asked of
    /// `conversation`, else nothing when the protection is `none`. `newPIN` is the new PIN when adding `pin`.
    public func protect(
        strategy: String,
        remove: Bool,
        newPIN: SecretBytes?,
        currentPIN: SecretBytes?,
        conversation: (any AgentConversation)?
    ) async throws -> [String] {
        let keymaker = try dependencies.keymaker
        let reason = "Change the protection of Coffer account \(dependencies.account)."
        let proof = try await Self.proof(keymaker, currentPIN: currentPIN, conversation: conversation, reason: reason)
        try await PresenceRelay.$current.withValue(conversation.map { ConversationPresence($0) }) {
            switch (strategy, remove) {
            case ("pin", false):
                guard let newPIN else { throw AgentFailure(.badRequest, "A new PIN must come in a secret frame.") }
                try await keymaker.activatePIN(newPIN, authorizedBy: proof)
            case ("secure-element", false): try await keymaker.activateSecureElement(authorizedBy: proof)
            case ("pin", true): try await keymaker.deactivate(.pin, authorizedBy: proof)
            case ("secure-element", true): try await keymaker.deactivate(.secureElement, authorizedBy: proof)
            case ("none", _): try await keymaker.deactivate(nil, authorizedBy: proof)
            default: throw AgentFailure(.badRequest, "The strategy must be pin, secure-element or none.")
            }
        }
        return try await keymaker.strategies().map(\.description).sorted()
    }

    /// Splits a `protect` request's secret frame into the current PIN (when the proof is `pin`) and the new PIN
    /// (when adding a PIN): `current ‖ 0x0A ‖ new` when both are there (a PIN never holds a newline: the CLI reads
    /// it by lines).
    public static func splitSecret(
        _ secret: SecretBytes?,
        proof: String?,
        addingPIN: Bool
    ) throws -> (current: SecretBytes?, new: SecretBytes?) {
        guard let secret else { return (nil, nil) }
        guard proof == "pin" else { return (nil, addingPIN ? secret : nil) }
        guard addingPIN else { return (secret, nil) }
        return try secret.withUnsafeBytes { raw in
            guard let newline = raw.firstIndex(of: 0x0A) else {
                throw AgentFailure(.badRequest, "The secret frame must hold the current PIN and the new PIN.")
            }
            return (
                SecretBytes(copying: raw[raw.startIndex..<newline]),
                SecretBytes(copying: raw[(newline + 1)..<raw.endIndex])
            )
        }
    }

    /// The proof a protection change or a logout takes: `none` while unprotected, else the current PIN, else
    /// presence through `conversation`.
    static func proof(
        _ keymaker: Keymaker,
        currentPIN: SecretBytes?,
        conversation: (any AgentConversation)?,
        reason: String
    ) async throws -> Keymaker.UnlockMethod {
        let strategies = try await keymaker.strategies()
        if strategies.contains(.none) { return .none }
        if let currentPIN, strategies.contains(.pin) { return .pin(currentPIN) }
        if conversation != nil, strategies.contains(.secureElement) { return .secureElement(reason: reason) }
        throw AgentFailure(
            .badRequest,
            "Changing the protection of a protected account, or logging it out, needs its current PIN (or presence)"
                + " even while it is unlocked."
        )
    }
}

/// Reading and importing mail, and attachments, for one account.
public final class MailHandler: Sendable {
    /// What it uses.
    public typealias Dependencies = HasMailStore & HasAttachmentCache

    private let dependencies: any Dependencies

    /// A handler.
    public init(dependencies: any Dependencies) { self.dependencies = dependencies }

    /// A page of messages.
    public func list(label: String?, limit: Int, offset: Int) async throws -> [MessageSummary] {
        try await dependencies.mailStore.list(label: label, limit: limit, offset: offset)
    }

    /// Messages matching `words`.
    public func search(_ words: String, limit: Int, offset: Int) async throws -> [MessageSummary] {
        try await dependencies.mailStore.search(words, limit: limit, offset: offset)
    }

    /// One message, opened to be read: marked seen, which the next sync tells the server.
    public func message(_ id: Int64) async throws -> MessageDetail {
        try await dependencies.mailStore.readMessage(id)
    }

    /// A message's attachments.
    public func attachments(of id: Int64) async throws -> [AttachmentInfo] {
        try await dependencies.mailStore.attachments(of: id)
    }

    /// One attachment's metadata and bytes.
    public func content(_ id: Int64) async throws -> (info: AttachmentInfo, content: [UInt8]) {
        try await dependencies.mailStore.attachmentContent(id)
    }

    /// Decrypts attachment `id` into a fresh private folder under the cache's preview folder, named after this
    /// process so a later start deletes it if the agent is killed.
    ///
    /// - Returns: The file, its folder and the attachment.
    public func preview(_ id: Int64) async throws -> (file: String, folder: String, info: AttachmentInfo) {
        let cache = try dependencies.attachmentCache
        var (info, content) = try await content(id)
        defer { for index in content.indices { content[index] = 0 } }
        let folder = try SecureFile.makeProcessFolder(under: cache.previewFolder)
        let file = "\(folder)/attachment\(Self.safeExtension(info.filename))"
        do {
            try AppError.file { () throws(CofferCryptoError) in try SecureFile.writeNew(content, to: file) }
        } catch {
            SecureFile.removeTree(folder)
            throw error
        }
        return (file, folder, info)
    }

    /// Writes a cleartext copy of attachment `id` to `path`, which must not exist (mode 0600).
    public func save(_ id: Int64, to path: String) async throws -> AttachmentInfo {
        var (info, content) = try await content(id)
        defer { for index in content.indices { content[index] = 0 } }
        try AppError.file { () throws(CofferCryptoError) in try SecureFile.writeNew(content, to: path) }
        return info
    }

    /// Imports a file or folder.
    public func importSource(
        at path: String,
        label: String,
        batchSize: Int,
        progress: @Sendable (ImportProgress) -> Void
    ) async throws -> ImportProgress {
        try await dependencies.mailStore.importSource(at: path, label: label, batchSize: batchSize, progress: progress)
    }

    static func safeExtension(_ name: String?) -> String {
        guard let name, let dot = name.lastIndex(of: ".") else { return "" }
        let suffix = name[name.index(after: dot)...]
        guard (1...10).contains(suffix.count), suffix.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
            return ""
        }
        return "." + suffix.lowercased()
    }
}

/// `background`: the app went to the background, for every account.
public final class BackgroundHandler: Sendable {
    /// What it uses.
    public typealias Dependencies = HasKeymakerRegistry

    private let dependencies: any Dependencies

    /// A handler.
    public init(dependencies: any Dependencies) { self.dependencies = dependencies }

    /// Applies every account's background policy.
    public func enteredBackground() async throws { try await dependencies.keymakerRegistry.enteredBackground() }
}

/// `logout`: destroys an account's key, purges its cache and deletes its store.
public final class LogoutHandler: Sendable {
    /// What it uses.
    public typealias Dependencies = HasKeymakerRegistry & HasPaths

    private let dependencies: any Dependencies

    /// A handler.
    public init(dependencies: any Dependencies) { self.dependencies = dependencies }

    /// Logs `account` out without a proof: succeeds only while its protection is `none`. Prefer
    /// ``logout(_:currentPIN:conversation:forgottenConfirmation:)``.
    public func logout(_ account: String) async throws {
        try await logout(account, currentPIN: nil, conversation: nil, forgottenConfirmation: nil)
    }

    /// Logs `account` out after a fresh proof by a current strategy (see ``SessionHandler``), or, for a forgotten
    /// PIN, with `forgottenConfirmation` equal to the account's name as the person typed it after the warning.
    public func logout(
        _ account: String,
        currentPIN: SecretBytes?,
        conversation: (any AgentConversation)?,
        forgottenConfirmation: String?
    ) async throws {
        try AccountName.validate(account)
        dependencies.paths.migrateLegacyMail(account)
        let registry = try dependencies.keymakerRegistry
        let user = registry.user(account)
        let keymaker = try user.keymaker
        if let forgottenConfirmation {
            guard forgottenConfirmation == account else { throw KeymakerError.confirmationMismatch }
            if SecureFile.exists(dependencies.paths.cache(account)) { try? user.attachmentCache.purgeAll() }
            if user.hasOpenedMailStore { try? user.mailStore.close() }
            try await keymaker.eraseForgotten(confirmingAccountName: forgottenConfirmation)
        } else {
            let reason = "Log out of Coffer account \(account) (its key and mail are erased)."
            let proof = try await SessionHandler.proof(
                keymaker,
                currentPIN: currentPIN,
                conversation: conversation,
                reason: reason
            )
            // The proof is checked first: a wrong PIN leaves the cache and the store as they were.
            try await PresenceRelay.$current.withValue(conversation.map { ConversationPresence($0) }) {
                try await keymaker.logout(authorizedBy: proof)
            }
            if SecureFile.exists(dependencies.paths.cache(account)) { try? user.attachmentCache.purgeAll() }
            if user.hasOpenedMailStore { try? user.mailStore.close() }
        }
        registry.remove(account)
        SecureFile.removeTree(dependencies.paths.mail(account))
    }
}

/// Presence asked of a conversation.
struct ConversationPresence: PresenceAuthenticator {
    let conversation: any AgentConversation
    init(_ conversation: any AgentConversation) { self.conversation = conversation }
    func confirmPresence(reason: String) async -> Bool { await conversation.confirmPresence(reason: reason) }
}
