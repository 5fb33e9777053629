import CofferKeychain
import CofferKeymaker
import CofferNotifyClient
import Foundation
import Logging
import NIOConcurrencyHelpers

/// The push sessions' tokens the process has opened, by account and session: a token is sealed under the MainKey,
/// so it is opened while the account is unlocked (at every unlock) and kept in memory — never the MainKey — so that
/// the agent's push stream stays open while the account is locked.
public final class PushTokens: Sendable {
    private let tokens = NIOLockedValueBox<[String: String]>([:])
    /// Every change of a token kept here (opened, kept, forgotten) is announced, so the agent's push stream waits on
    /// these instead of polling the keychain.
    public let changes = AccountEvents()

    /// An empty set.
    public init() {}

    private static func key(_ account: String, _ sessionID: String) -> String { "\(account)\u{0}\(sessionID)" }

    /// The token of `account`'s session `sessionID`, when it was opened.
    public func token(account: String, sessionID: String) -> String? {
        tokens.withLockedValue { $0[Self.key(account, sessionID)] }
    }

    /// How long before its expiry a token is refreshed, at an unlock (the service's tokens live 30 days).
    public static let refreshAhead: TimeInterval = 10 * 24 * 3600

    /// Opens `account`'s session token with `keymaker` (which must be unlocked) and keeps it; `nil` when the account
    /// has no push session.
    ///
    /// A token that expires within ``refreshAhead`` is refreshed first: the service's answer is sealed into the
    /// session record before the new token is used, and the service keeps the old token working until then, so a
    /// refresh cut off anywhere leaves a working token. A refresh that fails (service unreachable, or no answer
    /// within the client's 20-second limit) is logged and tried at the next unlock; the old token is kept. Then, when
    /// a FastSync record ended while no token was at hand, the service is asked to delete its key
    /// (``FastSync/deleteEscrowedKey(keychain:account:session:token:)``).
    @discardableResult
    public func open(
        account: String,
        keychain: any Keychain,
        keymaker: Keymaker,
        logger: Logger? = nil
    ) async throws -> String? {
        let store = PushSessionStore(keychain: keychain, account: account)
        guard let record = try store.loadSession() else {
            forget(account)
            return nil
        }
        defer { changes.changed(account) }
        let key = try await keymaker.mainKey().subkey(PushSessionStore.tokenSubkey)
        var token = try store.token(of: record, key: key)
        if record.expires.timeIntervalSinceNow < Self.refreshAhead {
            do {
                let fresh = try await NotifyClient(server: record.server).refresh(token: token)
                guard fresh.sessionID == record.sessionID else {
                    throw NotifyClientError.malformedResponse("the refresh answer names another session")
                }
                try store.saveSession(
                    server: record.server,
                    sessionID: record.sessionID,
                    expires: fresh.expires,
                    deviceName: record.deviceName,
                    token: fresh.token,
                    key: key
                )
                token = fresh.token
                logger?.info("push session token refreshed", metadata: ["account": "\(account)"])
            } catch {
                logger?.notice("push session token not refreshed: \(error)", metadata: ["account": "\(account)"])
            }
        }
        tokens.withLockedValue { [token] in $0[Self.key(account, record.sessionID)] = token }
        // A FastSync record ended while the token was not at hand (a change of protection while locked): tell the
        // service now.
        do {
            if try await FastSync.deleteEscrowedKey(keychain: keychain, account: account, session: record, token: token)
            {
                logger?.info("the service deleted an ended FastSync key", metadata: ["account": "\(account)"])
            }
        } catch {
            logger?.notice(
                "the service was not told that FastSync ended: \(error)",
                metadata: ["account": "\(account)"]
            )
        }
        return token
    }

    /// Keeps `token` of `account`'s new session `sessionID` (registration).
    public func keep(_ token: String, account: String, sessionID: String) {
        tokens.withLockedValue { $0[Self.key(account, sessionID)] = token }
        changes.changed(account)
    }

    /// Forgets every token of `account` (its session ended). Only a forget that removed a token is a change: the
    /// push stream's loop forgets an account's tokens each time it finds no session, and an announced nothing would
    /// start that loop again, for ever (it did: an agent whose account had no push session spun on a core).
    public func forget(_ account: String) {
        let removed = tokens.withLockedValue { tokens in
            let before = tokens.count
            tokens = tokens.filter { !$0.key.hasPrefix("\(account)\u{0}") }
            return tokens.count != before
        }
        if removed { changes.changed(account) }
    }
}
