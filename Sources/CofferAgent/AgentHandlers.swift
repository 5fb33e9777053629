import CofferAgentProtocol
import CofferApp
import CofferAttachments
import CofferCrypto
import CofferKeychain
import CofferKeymaker
import CofferNotifyClient
import CofferStore
import CofferSync
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
    /// Tells the client how a sync is going (best effort).
    func syncProgress(_ progress: SyncProgress)
    /// Sends the next piece of an attachment's bytes (in order, before the reply).
    func chunk(_ bytes: ArraySlice<UInt8>) async throws
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
    /// Drops it.
    public func syncProgress(_ progress: SyncProgress) {}
    /// Drops it.
    public func chunk(_ bytes: ArraySlice<UInt8>) async throws {}
    /// Deletes it at once.
    public func ownPreview(_ folder: String) { SecureFile.removeTree(folder) }
    /// Nothing to do.
    public func endPreview() {}
}

/// `status`: every account's protection, lock state and autolock deadline.
package final class StatusHandler: Sendable {
    /// What it uses.
    public typealias Dependencies = HasKeymakerRegistry & HasKeychain

    private let dependencies: any Dependencies

    /// A handler.
    public init(dependencies: any Dependencies) { self.dependencies = dependencies }

    /// The accounts a remote logout ended (and not logged in again since).
    public func remoteLogouts() throws -> [RemoteLogout] {
        let current = Set(try dependencies.keymakerRegistry.accounts())
        return try PushSessionStore.endedSessions(in: dependencies.keychain)
            .filter { !current.contains($0.account) }
            .map { RemoteLogout(account: $0.account, reason: $0.reason) }
    }

    /// The status of `account`, or of every account when `nil`.
    public func status(account: String?) async throws -> [AccountStatus] {
        let registry = try dependencies.keymakerRegistry
        let accounts = try account.map { [try registry.chooseAccount($0)] } ?? registry.accounts()
        var result: [AccountStatus] = []
        for name in accounts {
            let keymaker = try registry.user(name).keymaker
            let strategies = try await keymaker.strategies()
            let unlocked = await !keymaker.isLocked
            var status =
                AccountStatus(
                    account: name,
                    protection: strategies.map(\.description).sorted(),
                    protectionDescriptions: try await keymaker.protectionDescriptions(),
                    failedAttempts: strategies.contains(.pin) ? try await keymaker.failedAttempts() : nil,
                    failedAttemptLimit: strategies.contains(.pin) ? keymaker.failedAttemptLimit : nil,
                    unlocked: unlocked,
                    autolock: unlocked ? await keymaker.autolockPolicy.description : nil,
                    secondsUntilAutolock: unlocked ? await keymaker.secondsUntilAutolock() : nil
                )
            // The outbox's counts need no key: a message queued while locked is shown as waiting for the unlock. A
            // store this status opened is closed again, so that nothing (a logout's erase) finds it open.
            let user = try registry.user(name)
            var counts: OutboxCounts?
            if user.hasOpenedMailStore, let store = try? user.mailStore {
                counts = try? await store.outboxCounts()
            } else if FileManager.default.fileExists(atPath: user.paths.store(name)),
                let store = try? MailStore(folder: user.paths.store(name), keys: try user.accountKeys)
            {
                counts = try? await store.outboxCounts()
                try? store.close()
            }
            if let counts {
                status.outboxWaiting = counts.queued + counts.sending
                status.outboxFailed = counts.failed
            }
            result.append(status)
        }
        return result
    }
}

/// `unlock`, `lock`, `autolock` and `protect` for one account.
package final class SessionHandler: Sendable {
    /// What it uses.
    public typealias Dependencies = HasAccount & HasKeymaker & HasAttachmentCache & HasKeychain & HasPushTokens
        & HasOutboxEvents & HasMailStore
        & HasLogger

    private let dependencies: any Dependencies

    /// A handler.
    public init(dependencies: any Dependencies) { self.dependencies = dependencies }

    /// Unlocks with `method` (`pin` with `pin`, or `secure-element` with presence asked of `conversation`), then
    /// purges expired attachments (the cache's unlock duty), decrypts the encrypted mail stored while locked
    /// (``MailStore/openStoredEncryptedMail()``) and opens the push session's token (``PushTokens``).
    ///
    /// - Returns: Whether the key was already in memory (nothing was asked).
    public func unlock(method: ProofMethod, pin: SecretBytes?, conversation: any AgentConversation) async throws -> Bool
    {
        let keymaker = try dependencies.keymaker
        if await !keymaker.isLocked { return true }
        switch method {
        case .none:
            try await keymaker.unlock(.none)
        case .pin:
            guard let pin else {
                throw AgentFailure(.badRequest, "An unlock with a PIN needs the PIN in a secret frame.")
            }
            try await keymaker.unlock(.pin(pin))
        case .secureElement:
            let reason = "Unlock Coffer account \(dependencies.account)."
            try await PresenceRelay.$current.withValue(ConversationPresence(conversation)) {
                try await keymaker.unlock(.secureElement(reason: reason))
            }
        }
        _ = try? dependencies.attachmentCache.purgeExpired()
        // Encrypted mail that came while locked (FastSync never opens a secret key) is decrypted now.
        _ = try? await dependencies.mailStore.openStoredEncryptedMail()
        // What was queued while locked is sent now.
        try? dependencies.outboxEvents.changed(dependencies.account)
        // The push stream's token is sealed under the MainKey: open it now, so the stream runs on while locked.
        _ = try? await dependencies.pushTokens.open(
            account: dependencies.account,
            keychain: dependencies.keychain,
            keymaker: keymaker,
            logger: try? dependencies.logger
        )
        try dependencies.logger.info(
            "unlocked",
            metadata: ["account": "\(dependencies.account)", "method": "\(method.rawValue)"]
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

    /// Changes the protection after a fresh proof by a current strategy, even while the key is in memory: the
    /// current PIN (a wrong one counts as a failed attempt), else presence asked of `conversation`, else nothing when
    /// the protection is `none`. `newPIN` is the new PIN when adding one.
    ///
    /// A change ends FastSync: its record is deleted first, so a key the service still holds opens nothing (the
    /// user chose new terms; `coffer fastsync on` renews it after a fresh proof). The service is asked to delete
    /// the key now when the session's token is in memory (an agent that was unlocked), else at the next unlock
    /// (``PushTokens/open(account:keychain:keymaker:logger:)``).
    ///
    /// - Returns: The `protected` reply: the strategies now active, for a new software PIN how long it resists, and
    ///   whether FastSync was turned off.
    public func protect(
        _ change: ProtectionChange,
        newPIN: SecretBytes?,
        currentPIN: SecretBytes?,
        conversation: (any AgentConversation)?
    ) async throws -> AgentReply {
        let keymaker = try dependencies.keymaker
        let reason = "Change the protection of Coffer account \(dependencies.account)."
        let proof = try await Self.proof(keymaker, currentPIN: currentPIN, conversation: conversation, reason: reason)
        var estimate: String?
        try await PresenceRelay.$current.withValue(conversation.map { ConversationPresence($0) }) {
            switch change {
            case .addPIN(let tpm):
                guard let newPIN else { throw AgentFailure(.badRequest, "A new PIN must come in a secret frame.") }
                let cost = try await keymaker.activatePIN(newPIN, authorizedBy: proof, element: tpm ? .tpm : .software)
                if !tpm { estimate = cost.sentence }
            case .addSecureElement: try await keymaker.activateSecureElement(authorizedBy: proof)
            case .removePIN: try await keymaker.deactivate(.pin, authorizedBy: proof)
            case .removeSecureElement: try await keymaker.deactivate(.secureElement, authorizedBy: proof)
            case .removeAll: try await keymaker.deactivate(nil, authorizedBy: proof)
            }
        }
        let keychain = try dependencies.keychain
        let account = dependencies.account
        let hadFastSync = try FastSync.end(keychain: keychain, account: account)
        let deletedOnService = hadFastSync ? await deleteEscrowedKey(keychain: keychain) : false
        return .protected(
            strategies: try await keymaker.strategies().map(\.description).sorted(),
            descriptions: try await keymaker.protectionDescriptions(),
            estimate: estimate,
            fastSyncEnded: hadFastSync,
            fastSyncKeyDeletedOnService: deletedOnService
        )
    }

    /// Asks the service to delete the ended record's escrowed key when the session's token is in memory; whether it
    /// confirmed. Failures are logged, never thrown: the device's record is already gone, and the next unlock tries
    /// again.
    private func deleteEscrowedKey(keychain: any Keychain) async -> Bool {
        let account = dependencies.account
        do {
            guard let session = try PushSessionStore(keychain: keychain, account: account).loadSession(),
                let token = try dependencies.pushTokens.token(account: account, sessionID: session.sessionID)
            else { return false }
            return try await FastSync.deleteEscrowedKey(
                keychain: keychain,
                account: account,
                session: session,
                token: token
            )
        } catch {
            try? dependencies.logger.notice(
                "the service was not told that FastSync ended: \(error)",
                metadata: ["account": "\(account)"]
            )
            return false
        }
    }

    /// Splits a `protect` request's secret frame into the current PIN (when the proof is `pin`) and the new PIN
    /// (when adding a PIN): `current ‖ 0x0A ‖ new` when both are there (a PIN never holds a newline: the CLI reads
    /// it by lines).
    public static func splitSecret(
        _ secret: SecretBytes?,
        proof: ProofMethod,
        addingPIN: Bool
    ) throws -> (current: SecretBytes?, new: SecretBytes?) {
        guard let secret else { return (nil, nil) }
        guard proof == .pin else { return (nil, addingPIN ? secret : nil) }
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
package final class MailHandler: Sendable {
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

    /// Sends attachment `id`'s bytes to `conversation` in chunks of at most ``AgentEvent/chunkSize``, then returns
    /// its metadata.
    public func stream(_ id: Int64, to conversation: any AgentConversation) async throws -> AttachmentInfo {
        var (info, content) = try await dependencies.mailStore.attachmentContent(id)
        defer { for index in content.indices { content[index] = 0 } }
        var start = content.startIndex
        while start < content.endIndex {
            let end = min(start + AgentEvent.chunkSize, content.endIndex)
            try await conversation.chunk(content[start..<end])
            start = end
        }
        return info
    }

    /// Puts a preview of `source` in a fresh private folder under the cache's preview folder, named after this
    /// process so a later start deletes it if the process is killed: an attachment is decrypted from the encrypted
    /// cache (filled from the store when its entry is missing, expired or damaged), a message is sanitized into a
    /// page with its `cid:` images inlined.
    ///
    /// - Returns: The file, its folder (the caller deletes it), and for a page what the sanitizer blocked.
    public func preview(_ source: PreviewSource) async throws -> (file: String, folder: String, report: [String]) {
        let cache = try dependencies.attachmentCache
        let store = try dependencies.mailStore
        switch source {
        case .attachment(let id):
            let (key, info) = try await cached(id)
            let (file, folder) = try await cache.openPreview(key, suggestedName: info.filename)
            return (file, folder, [])
        case .message(let id, let allowRemote):
            let message = try await store.readMessage(id)
            var parts: [(contentID: String, mediaType: String, data: [UInt8])] = []
            for attachment in message.attachments where attachment.contentType.lowercased().hasPrefix("image/") {
                guard let contentID = attachment.contentID else { continue }
                parts.append(
                    (contentID, attachment.contentType, try await store.attachmentContent(attachment.id).content)
                )
            }
            let rendered = MessagePage.render(
                html: message.htmlBody.map { Array($0.utf8) },
                text: message.textBody,
                title: message.summary.subject ?? "",
                allowRemote: allowRemote,
                resolver: MessagePage.resolver(parts)
            )
            let (file, folder) = try cache.writePreview(Array(rendered.page.utf8), name: "message.html")
            return (file, folder, MessagePage.report(rendered.sanitized, allowRemote: allowRemote))
        }
    }

    /// Writes a cleartext copy of attachment `id` to `path`, which must not exist (mode 0600), from the encrypted
    /// cache as a preview is.
    public func save(_ id: Int64, to path: String) async throws -> AttachmentInfo {
        let (key, info) = try await cached(id)
        try await dependencies.attachmentCache.save(key, to: path)
        return info
    }

    /// Attachment `id`'s cache key and metadata, its entry put in the encrypted cache from the store when it is
    /// missing, expired or damaged (the check deletes a damaged entry).
    private func cached(_ id: Int64) async throws -> (key: String, info: AttachmentInfo) {
        let cache = try dependencies.attachmentCache
        let store = try dependencies.mailStore
        let key = "attachment:\(id)"
        let info = try await store.attachmentInfo(id)
        if try await !cache.containsIntact(key) {
            var content = try await store.attachmentContent(id).content
            defer { for index in content.indices { content[index] = 0 } }
            try await cache.put(content, for: key)
        }
        return (key, info)
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
}

/// `create` (`coffer init`): a new account's MainKey.
package final class CreateHandler: Sendable {
    /// What it uses.
    public typealias Dependencies = HasKeymakerRegistry & HasPaths

    private let dependencies: any Dependencies

    /// A handler.
    public init(dependencies: any Dependencies) { self.dependencies = dependencies }

    /// Creates `account`'s MainKey, resting with protection `none`; mail left by a key destroyed earlier (by a
    /// process that could not delete it) is deleted first, since it is noise now.
    public func create(_ account: String) async throws {
        try AccountName.validate(account)
        let user = try dependencies.keymakerRegistry.user(account)
        let keymaker = try user.keymaker
        if try await !keymaker.isSetUp() { SecureFile.removeTree(dependencies.paths.mail(account)) }
        try await keymaker.createMainKey()
        // A remote logout's note belongs to the account that was; the new one starts afresh.
        try PushSessionStore(keychain: user.keychain, account: account).forgetEnded()
    }
}

/// `background`: the app went to the background, for every account.
package final class BackgroundHandler: Sendable {
    /// What it uses.
    public typealias Dependencies = HasKeymakerRegistry

    private let dependencies: any Dependencies

    /// A handler.
    public init(dependencies: any Dependencies) { self.dependencies = dependencies }

    /// Applies every account's background policy.
    public func enteredBackground() async throws { try await dependencies.keymakerRegistry.enteredBackground() }
}

/// `logout`: destroys an account's key, purges its cache and deletes its store.
package final class LogoutHandler: Sendable {
    /// What it uses.
    public typealias Dependencies = HasKeymakerRegistry & HasKeychain & HasPaths

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
            if SecureFile.exists(dependencies.paths.cache(account)) { _ = try? user.attachmentCache.purgeAll() }
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
            // The proof is checked first: a wrong PIN leaves the cache and the store as they were. The key's last use
            // ends the push session on the service (best effort: an unreachable service does not stop the logout,
            // and the session then ends at its expiry).
            let keychain = try dependencies.keychain
            try await PresenceRelay.$current.withValue(conversation.map { ConversationPresence($0) }) {
                try await keymaker.logout(authorizedBy: proof) { key in
                    await Self.endPushSession(account, keychain: keychain, key: key)
                }
            }
            if SecureFile.exists(dependencies.paths.cache(account)) { _ = try? user.attachmentCache.purgeAll() }
            if user.hasOpenedMailStore { try? user.mailStore.close() }
        }
        registry.remove(account)
        SecureFile.removeTree(dependencies.paths.mail(account))
    }
}

extension LogoutHandler {
    /// Revokes `account`'s push session on the service with its token, opened with `key`; silent on failure.
    static func endPushSession(_ account: String, keychain: any Keychain, key: MainKey) async {
        let store = PushSessionStore(keychain: keychain, account: account)
        guard let record = try? store.loadSession(),
            let tokenKey = try? key.subkey(PushSessionStore.tokenSubkey),
            let token = try? store.token(of: record, key: tokenKey)
        else { return }
        try? await NotifyClient(server: record.server).revoke(sessionID: record.sessionID, token: token)
    }
}

/// Presence asked of a conversation.
struct ConversationPresence: PresenceAuthenticator {
    let conversation: any AgentConversation
    init(_ conversation: any AgentConversation) { self.conversation = conversation }
    func confirmPresence(reason: String) async -> Bool { await conversation.confirmPresence(reason: reason) }
}
