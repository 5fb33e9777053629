import CofferAgentProtocol
import CofferCrypto
import CofferKeychain
import CofferKeymaker
import CofferNotifyClient
import CofferPush
import CofferStore
import CofferSync
import Foundation
import NIOConcurrencyHelpers

/// The push session and FastSync requests (`notify register|status|unregister`, `fastsync on|off|status`,
/// `push-handler`): in the agent when one runs, else in the command's process, like every other request. Each change
/// of the session is announced to the agent's push stream (``PushTokens/changes``), which never polls for it.
public final class PushSessionHandler: Sendable {
    /// What it uses.
    public typealias Dependencies = HasAccount & HasKeymaker & HasKeychain & HasPushTokens & HasMailStore
        & HasAccountCoordinator & HasLogger

    private let dependencies: any Dependencies

    /// A handler over one account's container.
    public init(dependencies: any Dependencies) { self.dependencies = dependencies }

    private var sessions: PushSessionStore {
        get throws { PushSessionStore(keychain: try dependencies.keychain, account: dependencies.account) }
    }

    /// Registers a push session with `service`, proving the IMAP account `server`'s (or the only one's) credentials,
    /// keeps the push keys in the keychain and the token sealed under the MainKey (and in memory), and tells the
    /// push stream. Needs the key.
    public func register(service: NotifyServer, server: Int64?, deviceName: String) async throws -> AgentReply {
        // The settings came over the socket: parsed again as a typed URL would be, and the CA path checked.
        let service = try NotifyServer(
            url: service.url,
            pins: service.pins,
            caFile: service.caFile,
            connectAddress: service.connectAddress
        )
        guard service.caFile.map({ $0.hasPrefix("/") }) ?? true else {
            throw AgentFailure(.badRequest, "The CA bundle's path must be absolute.")
        }
        let store = try sessions
        if try store.loadSession() != nil { throw NotifyClientError.alreadyRegistered }
        // The IMAP password is sealed in the store: this read is the request's key use.
        let imap = try await AccountCoordinator.serverAccount(server, in: try dependencies.mailStore).server
        let name = String(deviceName.prefix(100))
        let keys = WebPush.UserAgentKeys()
        let client = NotifyClient(server: service)
        let token = try await client.register(
            user: imap.username,
            password: imap.password,
            deviceName: name,
            keys: keys
        )
        do {
            let tokenKey = try await dependencies.keymaker.mainKey().subkey(PushSessionStore.tokenSubkey)
            try store.saveKeys(keys)
            try store.saveSession(
                server: service,
                sessionID: token.sessionID,
                expires: token.expires,
                deviceName: name,
                token: token.token,
                key: tokenKey
            )
        } catch {
            // Nothing half-registered stays: the service forgets the session, the device its keys.
            try? await client.revoke(sessionID: token.sessionID, token: token.token)
            try? store.delete()
            throw error
        }
        try dependencies.pushTokens.keep(token.token, account: dependencies.account, sessionID: token.sessionID)
        return .notifyRegistered(
            sessionID: token.sessionID,
            service: service.url,
            user: imap.username,
            expires: token.expires
        )
    }

    /// The session (no key needed), or why it ended.
    public func status() throws -> AgentReply {
        let store = try sessions
        guard let record = try store.loadSession() else { return .notifySession(nil, endedReason: store.endedReason()) }
        let info = PushSessionInfo(
            sessionID: record.sessionID,
            service: record.server.url,
            deviceName: record.deviceName,
            expires: record.expires,
            pins: record.server.pins,
            hasPushKey: (try? store.loadKeys()) != nil
        )
        return .notifySession(info, endedReason: nil)
    }

    /// Revokes the session on the service (with the token in memory, else opened with the key) and deletes its keys
    /// here whatever the service said.
    public func unregister() async throws -> AgentReply {
        let store = try sessions
        guard let record = try store.loadSession() else { throw NotifyClientError.notRegistered }
        let token = try await self.token(of: record, in: store)
        let outcome: UnregisterOutcome
        do throws(NotifyClientError) {
            try await NotifyClient(server: record.server).revoke(sessionID: record.sessionID, token: token)
            outcome = .revoked
        } catch .sessionRevoked {
            outcome = .alreadyEnded
        } catch {
            outcome = .unreachable(reason: error.description)
        }
        try store.delete()
        try dependencies.pushTokens.forget(dependencies.account)
        return .notifyUnregistered(sessionID: record.sessionID, outcome: outcome)
    }

    /// Turns FastSync on for `seconds` (or renews it) after a fresh proof, asked even while the key is in memory.
    public func fastSyncOn(seconds: Int, proof: Keymaker.UnlockMethod) async throws -> AgentReply {
        let keychain = try dependencies.keychain
        let store = try sessions
        guard let record = try store.loadSession() else { throw NotifyClientError.notRegistered }
        guard seconds >= 1, TimeInterval(seconds) <= FastSync.maximumLifetime else {
            throw AgentFailure(.badRequest, "FastSync lasts from 1 second to 7 days.")
        }
        let key = try await dependencies.keymaker.freshKey(authorizedBy: proof)
        let token =
            try dependencies.pushTokens.token(account: dependencies.account, sessionID: record.sessionID)
            ?? store.token(of: record, key: try key.subkey(PushSessionStore.tokenSubkey))
        let fastSync = try await FastSync.enable(
            mainKey: key,
            keychain: keychain,
            account: dependencies.account,
            session: record,
            token: token,
            lifetime: TimeInterval(seconds)
        )
        return .fastSync(
            expires: Date(timeIntervalSince1970: TimeInterval(fastSync.expires)),
            ended: false,
            serviceDeletionPending: false
        )
    }

    /// Turns FastSync off: the record goes first (without it the escrowed key opens nothing), then the service is
    /// asked to delete its key when the session's token is in memory; otherwise the next unlock tells it.
    public func fastSyncOff() async throws -> AgentReply {
        let keychain = try dependencies.keychain
        let account = dependencies.account
        let ended = try FastSync.end(keychain: keychain, account: account)
        if try FastSync.escrowDeletionPending(keychain: keychain, account: account),
            let record = try sessions.loadSession(),
            let token = try dependencies.pushTokens.token(account: account, sessionID: record.sessionID)
        {
            _ = try? await FastSync.deleteEscrowedKey(
                keychain: keychain,
                account: account,
                session: record,
                token: token
            )
        }
        return .fastSync(expires: nil, ended: ended, serviceDeletionPending: try deletionPending())
    }

    /// Whether FastSync is on and until when.
    public func fastSyncStatus() throws -> AgentReply {
        let record = try FastSync.load(keychain: try dependencies.keychain, account: dependencies.account)
        return .fastSync(
            expires: record.map { Date(timeIntervalSince1970: TimeInterval($0.expires)) },
            ended: false,
            serviceDeletionPending: try deletionPending()
        )
    }

    private func deletionPending() throws -> Bool {
        let keychain = try dependencies.keychain
        return try sessions.loadSession() != nil
            && FastSync.escrowDeletionPending(keychain: keychain, account: dependencies.account)
    }

    /// Opens one push with the session's push key (no MainKey). When `sync`, its folder is synced through the
    /// account's coordinator as background work: with the key in memory if there is one, else with the push's
    /// FastSync key granted to that one job. The reply never carries the FastSync key.
    public func push(body: [UInt8], sync: Bool) async throws -> AgentReply {
        let store = try sessions
        let push = try PushHandler.open(PushHandler.body(fromInput: body), keys: try store.loadKeys())
        guard sync, let record = try store.loadSession() else {
            return .pushOpened(opened(push), fetched: nil, syncFailure: nil)
        }
        // The push is shown whatever its sync does: a failure of the sync travels beside it.
        do {
            let summary = try await syncFolder(of: push, sessionID: record.sessionID)
            return .pushOpened(opened(push), fetched: summary?.fetched, syncFailure: nil)
        } catch {
            let failure = AgentFailure(describing: error, account: dependencies.account)
            return .pushOpened(opened(push), fetched: nil, syncFailure: failure.message)
        }
    }

    /// Syncs the folder of an opened push through the account's coordinator, as background work, whatever the lock
    /// state: unlocked with the Keymaker's key (never restarting the autolock), locked with the push's FastSync key
    /// granted to this one job and wiped after it. The agent's stream and `push-handler` both come here.
    ///
    /// - Returns: The sync's summary, or nil while locked when the push brings no usable FastSync key.
    public func syncFolder(of push: PushMessage, sessionID: String) async throws -> SyncSummary? {
        let key: AccountCoordinator.KeySupply
        if await (try dependencies.keymaker).isLocked {
            guard
                let secret = try FastSync.mainKey(
                    for: push,
                    keychain: try dependencies.keychain,
                    account: dependencies.account,
                    sessionID: sessionID
                )
            else { return nil }
            key = .granted(secret)
        } else {
            key = .account
        }
        return try await KeyUse.background.run {
            try await dependencies.coordinator.run(
                .sync(server: nil, folders: [push.folder ?? "INBOX"], batch: nil),
                key: key
            ).summary
        }
    }

    private func opened(_ push: PushMessage) -> PushMessage {
        var shown = push
        shown.fastSync = nil
        return shown
    }

    /// The session's token: in memory when an unlock opened it, else opened with the key (which must be unlocked).
    private func token(of record: PushSessionStore.Record, in store: PushSessionStore) async throws -> String {
        if let token = try dependencies.pushTokens.token(account: dependencies.account, sessionID: record.sessionID) {
            return token
        }
        return try store.token(
            of: record,
            key: try await dependencies.keymaker.mainKey().subkey(PushSessionStore.tokenSubkey)
        )
    }
}

/// Tells a waiting loop of the agent that something of an account changed, so that it waits on these events instead
/// of polling: the push stream learns that a push session was registered, unregistered or had its token opened by an
/// unlock (``PushTokens/changes``); the outbox that a message was queued for later or the account was unlocked
/// (``GlobalContainer/outboxEvents``).
public final class AccountEvents: Sendable {
    private let state = NIOLockedValueBox<(changed: Set<String>, waiters: [CheckedContinuation<Void, Never>])>(([], []))

    /// No events yet.
    public init() {}

    /// `account`'s session changed.
    public func changed(_ account: String) {
        let waiters = state.withLockedValue { state in
            state.changed.insert(account)
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// The accounts whose session changed since the last call, waiting for one when there are none (or until the
    /// task is cancelled: then the empty set).
    public func next() async -> Set<String> {
        while !Task.isCancelled {
            let ready = state.withLockedValue { state -> Set<String> in
                defer { state.changed = [] }
                return state.changed
            }
            if !ready.isEmpty { return ready }
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let resumeNow = state.withLockedValue { state -> Bool in
                        if !state.changed.isEmpty { return true }
                        state.waiters.append(continuation)
                        return false
                    }
                    if resumeNow { continuation.resume() }
                }
            } onCancel: {
                let waiters = state.withLockedValue { state in
                    defer { state.waiters = [] }
                    return state.waiters
                }
                for waiter in waiters { waiter.resume() }
            }
        }
        return []
    }
}
