import CofferAgentProtocol
import CofferAttachments
import CofferKeychain
import CofferKeymaker
import CofferNotifyClient
import CofferStore
import Logging

/// What belongs to one logged-in account: its Keymaker, mail store and attachment cache (later its API client).
/// It also passes on the global services, so a class that needs both takes one container.
public final class UserContainer: Sendable {
    /// The account.
    public let account: String
    /// The process's container.
    public let global: GlobalContainer
    /// The factories' instances and overrides.
    public let storage = FactoryStorage(level: .user)

    /// A container for `account`. Nothing is opened until a factory is resolved.
    public init(account: String, global: GlobalContainer) {
        self.account = account
        self.global = global
    }

    /// The account's Keymaker: one per account, so every request sees the same lock state and autolock timer.
    public var keymakerFactory: Factory<Keymaker> {
        Factory(storage, scope: .perUser) { [account, global] in
            let keychain = try global.keychain
            var configuration = global.keymakerConfiguration
            let deleteMail = configuration.onDestroy
            configuration.onDestroy = { account in
                deleteMail?(account)
                // A destroyed key (logout, too many wrong PINs) also ends the push session on this device.
                try? PushSessionStore(keychain: keychain, account: account).delete()
            }
            return Keymaker(
                account: account,
                keychain: keychain,
                device: try global.deviceIdentity,
                secureElement: try global.secureElement,
                pinBinder: global.hardware.pinBinder,
                clock: try global.clock,
                configuration: configuration
            )
        }
    }

    /// The account's key source: its Keymaker, and the key a FastSync job is granted while locked.
    public var accountKeysFactory: Factory<AccountKeys> {
        Factory(storage, scope: .perUser) { [self] in AccountKeys(keymaker: try keymaker) }
    }

    /// The turns of the account's jobs (one per account, so two syncs of its store never run at once).
    public var jobTurnsFactory: Factory<JobTurns> { Factory(storage, scope: .perUser) { JobTurns() } }

    /// The account's sealed mail store (opening needs no key).
    public var mailStoreFactory: Factory<MailStore> {
        Factory(storage, scope: .perUser) { [self] in
            global.paths.migrateLegacyMail(account)
            return try MailStore(folder: global.paths.store(account), keys: accountKeys)
        }
    }

    /// The account's attachment cache; opening it deletes leftovers of killed processes.
    public var attachmentCacheFactory: Factory<AttachmentCache> {
        Factory(storage, scope: .perUser) { [self] in
            global.paths.migrateLegacyMail(account)
            return try AttachmentCache(
                folder: global.paths.cache(account),
                keys: accountKeys,
                clock: global.clock
            )
        }
    }

    /// Whether the mail store was opened (so shutting down knows whether to close it).
    public var hasOpenedMailStore: Bool { storage.contains("mailStoreFactory") }

    /// At lock: forgets the store's and cache's derived keys and drops both instances (their connections, statement
    /// caches and anything decoded with them); the next request opens them again. Test overrides stay registered.
    public func dropMailState() {
        if hasOpenedMailStore, let store = try? mailStore { store.forgetKeys() }
        if storage.contains("attachmentCacheFactory"), let cache = try? attachmentCache { cache.forgetKeys() }
        storage.dropInstance("mailStoreFactory")
        storage.dropInstance("attachmentCacheFactory")
    }
}

extension UserContainer: HasAccount {}
extension UserContainer: HasPaths {
    /// The global paths.
    public var paths: AppPaths { global.paths }
}

extension UserContainer: HasKeymaker {
    /// See ``keymakerFactory``.
    public var keymaker: Keymaker { get throws { try keymakerFactory() } }
}

extension UserContainer: HasAccountKeys {
    /// See ``accountKeysFactory``.
    public var accountKeys: AccountKeys { get throws { try accountKeysFactory() } }
}

extension UserContainer: HasAccountCoordinator {
    /// The owner of the account's background work: every sync of its store goes through it.
    public var coordinator: AccountCoordinator {
        get throws { AccountCoordinator(dependencies: self, turns: try jobTurnsFactory()) }
    }
}

extension UserContainer: HasOutboxEvents {
    /// The global outbox wake-ups.
    public var outboxEvents: AccountEvents { get throws { try global.outboxEvents } }
}

extension UserContainer: HasMailStateReset {
    /// See ``dropMailState()``.
    public func resetMailState() { dropMailState() }
}

extension UserContainer: HasMailStore {
    /// See ``mailStoreFactory``.
    public var mailStore: MailStore { get throws { try mailStoreFactory() } }
}

extension UserContainer: HasAttachmentCache {
    /// See ``attachmentCacheFactory``.
    public var attachmentCache: AttachmentCache { get throws { try attachmentCacheFactory() } }
}

extension UserContainer: HasLogger {
    /// The global logger.
    public var logger: Logger { get throws { try global.logger } }
}

extension UserContainer: HasClock {
    /// The global clock.
    public var clock: any KeymakerClock { get throws { try global.clock } }
}

extension UserContainer: HasKeychain {
    /// The global keychain.
    public var keychain: any Keychain { get throws { try global.keychain } }
}

extension UserContainer: HasPushTokens {
    /// The global push tokens.
    public var pushTokens: PushTokens { get throws { try global.pushTokens } }
}

extension UserContainer: HasKeymakerRegistry {
    /// The global registry.
    public var keymakerRegistry: KeymakerRegistry { get throws { try global.keymakerRegistry } }
}
