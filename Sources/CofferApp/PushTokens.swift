import CofferKeychain
import CofferKeymaker
import CofferNotifyClient
import NIOConcurrencyHelpers

/// The push sessions' tokens the process has opened, by account and session: a token is sealed under the MainKey,
/// so it is opened while the account is unlocked (at every unlock) and kept in memory — never the MainKey — so that
/// the agent's push stream stays open while the account is locked.
public final class PushTokens: Sendable {
    private let tokens = NIOLockedValueBox<[String: String]>([:])

    /// An empty set.
    public init() {}

    private static func key(_ account: String, _ sessionID: String) -> String { "\(account)\u{0}\(sessionID)" }

    /// The token of `account`'s session `sessionID`, when it was opened.
    public func token(account: String, sessionID: String) -> String? {
        tokens.withLockedValue { $0[Self.key(account, sessionID)] }
    }

    /// Opens `account`'s session token with `keymaker` (which must be unlocked) and keeps it; `nil` when the account
    /// has no push session.
    @discardableResult
    public func open(account: String, keychain: any Keychain, keymaker: Keymaker) async throws -> String? {
        let store = PushSessionStore(keychain: keychain, account: account)
        guard let record = try store.loadSession() else {
            forget(account)
            return nil
        }
        let token = try store.token(of: record, key: try await keymaker.subkey(PushSessionStore.tokenSubkey))
        tokens.withLockedValue { $0[Self.key(account, record.sessionID)] = token }
        return token
    }

    /// Forgets every token of `account` (its session ended).
    public func forget(_ account: String) {
        tokens.withLockedValue { tokens in tokens = tokens.filter { !$0.key.hasPrefix("\(account)\u{0}") } }
    }
}
