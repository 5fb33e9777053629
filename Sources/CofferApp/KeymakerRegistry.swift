import CofferAgentProtocol
import CofferAttachments
import CofferKeychain
import CofferKeymaker
import CofferStore
import Logging
import NIOConcurrencyHelpers

/// The accounts a process has opened, each with its ``UserContainer`` (and so its one Keymaker).
public final class KeymakerRegistry: Sendable {
    /// What the registry uses.
    public typealias Dependencies = HasKeychain & HasLogger

    private let dependencies: any Dependencies
    private let makeUser: @Sendable (String) -> UserContainer
    private let users = NIOLockedValueBox<[String: UserContainer]>([:])

    /// A registry that makes user containers with `makeUser`.
    public init(dependencies: any Dependencies, makeUser: @escaping @Sendable (String) -> UserContainer) {
        self.dependencies = dependencies
        self.makeUser = makeUser
        FreedMemory.overwriteOnFree()
    }

    /// The accounts that have a MainKey on this device, sorted.
    public func accounts() throws -> [String] {
        try dependencies.keychain.addresses(accessGroup: "coffer", service: "coffer.protection").map(\.account).sorted()
    }

    /// The account named `requested`, or the only one.
    ///
    /// - Throws: ``AppError/invalidAccountName(_:)``, ``AppError/unknownAccount(_:)``, ``AppError/noAccount`` or
    ///   ``AppError/chooseAccount(count:)``.
    public func chooseAccount(_ requested: String?) throws -> String {
        if let requested {
            try AccountName.validate(requested)
            // One item looked at, not every item of the keychain opened: this runs for each agent request.
            let address = KeychainAddress(service: "coffer.protection", account: requested)
            guard try dependencies.keychain.contains(address) else {
                throw AppError.unknownAccount(requested)
            }
            return requested
        }
        let known = try accounts()
        switch known.count {
        case 0: throw AppError.noAccount
        case 1: return known[0]
        default: throw AppError.chooseAccount(count: known.count)
        }
    }

    /// The container of `account`, made on first use.
    public func user(_ account: String) -> UserContainer {
        if let existing = users.withLockedValue({ $0[account] }) { return existing }
        let made = makeUser(account)
        let (user, isNew) = users.withLockedValue { users in
            if let existing = users[account] { return (existing, false) }
            users[account] = made
            return (made, true)
        }
        if isNew { watch(user) }
        return user
    }

    /// Logs lock events and, whenever the MainKey leaves memory (a lock, the autolock timer, the background policy),
    /// drops the account's store and cache with their derived keys and hands freed pages back to the kernel, so no
    /// decrypted mail stays behind (see ``FreedMemory``).
    private func watch(_ user: UserContainer) {
        guard let keymaker = try? user.keymaker else { return }
        let logger = try? dependencies.logger
        let account = user.account
        let events = keymaker.events
        Task { [weak user, weak self] in
            for await event in events {
                if case .mainKeyDestroyed = event {
                    // The key is gone and its mail folder deleted: a later login of the name starts afresh.
                    if let user, user.hasOpenedMailStore { try? user.mailStore.close() }
                    self?.remove(account)
                    continue
                }
                guard case .mainKeyRemoved(let reason) = event else { continue }
                logger?.info("locked", metadata: ["account": "\(account)", "reason": "\(reason)"])
                guard let user else { continue }
                user.dropMailState()
                FreedMemory.releaseFreePages()
            }
        }
    }

    /// The containers made so far.
    public var openUsers: [UserContainer] { users.withLockedValue { Array($0.values) } }

    /// Forgets `account`'s container (after logout).
    public func remove(_ account: String) { _ = users.withLockedValue { $0.removeValue(forKey: account) } }

    /// "The app went to the background": every Keymaker applies its autolock policy (``AutolockPolicy/onBackground``
    /// locks at once).
    public func enteredBackground() async {
        for user in openUsers {
            guard let keymaker = try? user.keymaker else { continue }
            await keymaker.enteredBackground()
        }
    }

    /// Closes the stores (checkpointing their write-ahead logs), drops derived store and cache keys, and locks every
    /// Keymaker (their keys are zeroed). The stores close first: a lock's event drops the store's instance, and a
    /// store dropped before it was closed would leave its log behind.
    public func shutdown() async {
        for user in openUsers {
            if user.hasOpenedMailStore, let store = try? user.mailStore { try? store.close() }
            if user.storage.contains("attachmentCacheFactory"), let cache = try? user.attachmentCache {
                cache.forgetKeys()
            }
            if let keymaker = try? user.keymaker { await keymaker.lock(reason: .shutdown) }
        }
        users.withLockedValue { $0.removeAll() }
    }
}
