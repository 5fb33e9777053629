import CofferAgentProtocol
import CofferApp
import CofferCrypto
import CofferKeychain
import CofferKeymaker
import CofferNotifyClient
import CofferPush
import CofferSync
import Foundation
import Logging
import ServiceLifecycle
import Synchronization

/// The agent's side of push (issue 12): per account with a push session, it holds the service's stream open (one
/// WebSocket, acked on the same socket; the long poll where the service has none; reconnect with backoff), handles
/// each push and acks it. Each push goes to the account's
/// ``AccountCoordinator`` as background work, whatever the lock state; only its key differs.
///
/// - Unlocked: the push syncs its folder with the agent's own store.
/// - Locked: the push-handler path (a desktop notification when there is one; the log never names sender or
///   subject), and FastSync when the push carries a key and the device's record is unexpired.
/// - A 401 on the stream: the service revoked the session (web page, admin) or it expired, so the account is logged
///   out here (remote logout): its MainKey and every wrap, its push keys, session and FastSync records and its mail
///   are destroyed, and `coffer status` says why.
///
/// The token is sealed under the MainKey: every unlock opens it into ``PushTokens``, which keeps it in memory (not the
/// MainKey) so that the stream stays open while the account is locked.
public final class PushStreamHolder: Service, Sendable {
    /// Seconds a long poll waits on the service.
    public static let pollWait = 25
    /// The longest pause between reconnects.
    public static let maximumBackoff: Double = 60

    private let global: GlobalContainer
    private let showNotifications: Bool

    /// A holder for the agent's accounts; `showNotifications` runs `notify-send` for pushes while locked.
    public init(global: GlobalContainer, showNotifications: Bool = true) {
        self.global = global
        self.showNotifications = showNotifications
    }

    /// Runs one loop per account that has a push session, until graceful shutdown. The accounts are read once at
    /// start; after that the agent's own requests announce every change (``PushTokens/changes``: a registration, an
    /// unregistration, an unlock that opened a token), and a loop starts or restarts on that event. Nothing polls.
    public func run() async throws {
        let changes = try global.pushTokens.changes
        enum Signal: Sendable {
            case changed(Set<String>)
            case ended(String)
        }
        let (signals, signal) = AsyncStream.makeStream(of: Signal.self)
        // A discarding group: each account's loop that ends is freed at once (a plain group kept every ended child
        // until the agent's end).
        await withDiscardingTaskGroup { group in
            group.addTask {
                while !Task.isCancelled {
                    let changed = await changes.next()
                    if changed.isEmpty { break }
                    signal.yield(.changed(changed))
                }
            }
            // Nothing is opened (no device secret made) in a home that has no account yet.
            let hasItems = (try? FileKeychain.hasItems(in: global.paths.keychain)) ?? false
            signal.yield(.changed(Set(hasItems ? ((try? global.keymakerRegistry.accounts()) ?? []) : [])))
            var holding: Set<String> = []
            var changedWhileHeld: Set<String> = []
            func start(_ account: String) {
                holding.insert(account)
                group.addTask {
                    await self.hold(account)
                    signal.yield(.ended(account))
                }
            }
            await withGracefulShutdownHandler {
                for await message in signals {
                    switch message {
                    case .changed(let accounts):
                        for account in accounts {
                            if holding.contains(account) { changedWhileHeld.insert(account) } else { start(account) }
                        }
                    case .ended(let account):
                        holding.remove(account)
                        // A change that came while the loop was ending (an unlock as it found no token) restarts it.
                        if changedWhileHeld.remove(account) != nil, !Task.isShuttingDownGracefully { start(account) }
                    }
                }
            } onGracefulShutdown: {
                signal.finish()
            }
            group.cancelAll()
        }
    }

    private var logger: Logger { (try? global.logger) ?? Logger(label: "coffer.push") }

    /// The account's loop while it has a session and a token: long-polls, handles and acks. It ends when there is no
    /// session or no token yet (locked since the agent started), when the session was unregistered here, or after a
    /// remote logout; the next announced change starts it again.
    func hold(_ account: String) async {
        var backoff = 1.0
        var inHand: String?
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                guard let (record, token) = try await sessionAndToken(account) else { return }
                inHand = token
                let client = NotifyClient(server: record.server)
                // One WebSocket held open: each page is handled and acked on it, with no new connection per mail.
                let log = logger
                let held = try await client.holdStream(token: token) {
                    log.info("push stream: WebSocket open", metadata: ["account": "\(account)"])
                } handle: { messages in
                    for message in messages {
                        await self.handle(message, account: account, sessionID: record.sessionID)
                    }
                    return messages.map(\.id)
                }
                if !held {
                    // A service without the WebSocket stream: the long poll, acked with a request of its own.
                    logger.info("push stream: long poll", metadata: ["account": "\(account)"])
                    let messages = try await client.stream(token: token, wait: Self.pollWait)
                    for message in messages { await handle(message, account: account, sessionID: record.sessionID) }
                    try await client.ack(token: token, ids: messages.map(\.id))
                }
                backoff = 1
            } catch NotifyClientError.sessionRevoked {
                let record = try? PushSessionStore(keychain: global.keychain, account: account).loadSession()
                // Unregistered here (the record is gone): no revocation, the loop just ends.
                guard let record else { return }
                // An unlock may have refreshed the token while this request held the old one, and a use of the new
                // one ends the old: that is no revocation. Only a refusal of the token in hand is.
                if let current = (try? global.pushTokens)?.token(account: account, sessionID: record.sessionID),
                    current != inHand
                {
                    continue
                }
                await remoteLogout(account)
                return
            } catch is CancellationError {
                return
            } catch {
                logger.notice(
                    "push stream: \(error); retrying",
                    metadata: ["account": "\(account)", "seconds": "\(Int(backoff))"]
                )
                try? await Task.sleep(for: .seconds(backoff))
                backoff = min(backoff * 2, Self.maximumBackoff)
            }
        }
    }

    /// The session record and the token, opening the token when the account is unlocked; nil when there is no
    /// session or the token cannot be had yet (locked since the agent started).
    private func sessionAndToken(_ account: String) async throws -> (PushSessionStore.Record, String)? {
        let keychain = try global.keychain
        let tokens = try global.pushTokens
        guard let record = try PushSessionStore(keychain: keychain, account: account).loadSession() else {
            tokens.forget(account)
            return nil
        }
        if let token = tokens.token(account: account, sessionID: record.sessionID) { return (record, token) }
        let keymaker = try global.keymakerRegistry.user(account).keymaker
        guard !(await keymaker.isLocked) else { return nil }
        guard let token = try await tokens.open(account: account, keychain: keychain, keymaker: keymaker) else {
            return nil
        }
        return (record, token)
    }

    /// Handles one push; failures are logged (without content) and the push is acked anyway: a push is a hint,
    /// the next sync finds the mail.
    func handle(_ message: NotifyClient.StreamMessage, account: String, sessionID: String) async {
        let log = logger
        do {
            let keychain = try global.keychain
            let keys = try PushSessionStore(keychain: keychain, account: account).loadKeys()
            guard let body = Base64URL.decode(message.body) else { throw NotifyClientError.malformedPush("base64url") }
            let push = try PushHandler.open(body, keys: keys)
            let user = try global.keymakerRegistry.user(account)
            let locked = await (try user.keymaker).isLocked
            if locked, showNotifications { _ = await PushHandler.desktopNotification(push) }
            guard
                let summary = try await PushSessionHandler(dependencies: user).syncFolder(
                    of: push,
                    sessionID: sessionID
                )
            else {
                log.info("push: shown while locked", metadata: ["account": "\(account)"])
                return
            }
            log.info(
                locked ? "push: FastSync synced while locked" : "push: synced while unlocked",
                metadata: ["account": "\(account)", "new": "\(summary.fetched)"]
            )
        } catch {
            log.notice("push not handled: \(error)", metadata: ["account": "\(account)"])
        }
    }

    /// The service no longer accepts the session: log the account out here (push keys and records first, with the
    /// note `coffer status` shows, then the MainKey, whose destruction deletes the mail), as the trust model asks of a
    /// revoked token.
    func remoteLogout(_ account: String) async {
        (try? global.pushTokens)?.forget(account)
        do {
            let store = PushSessionStore(keychain: try global.keychain, account: account)
            try store.delete(
                reason: "the service ended its push session (revoked or expired), so it was logged out here: its key, "
                    + "push keys and mail were deleted"
            )
            try await global.keymakerRegistry.user(account).keymaker.destroy(reason: .logout)
            logger.notice("push session ended by the service; account logged out", metadata: ["account": "\(account)"])
        } catch {
            logger.error("remote logout failed: \(error)", metadata: ["account": "\(account)"])
        }
    }
}
