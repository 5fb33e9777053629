import CofferStore
import CofferSync

/// `sync` in the agent: the agent's own store (it holds the unlocked key) and an IMAP connection from the agent.
public struct SyncHandler: Sendable {
    /// What it uses.
    public typealias Dependencies = HasMailStore

    private let dependencies: any Dependencies

    /// A handler over one account's container.
    public init(dependencies: any Dependencies) { self.dependencies = dependencies }

    /// The IMAP account `id`, or the only one.
    public func serverAccount(_ id: Int64?) async throws -> (id: Int64, server: ServerAccount) {
        let accounts = try await dependencies.mailStore.serverAccounts()
        if let id {
            guard let found = accounts.first(where: { $0.id == id }) else {
                throw AgentFailure(
                    .badRequest,
                    "There is no mail server account \(id)."
                )
            }
            return found
        }
        guard let only = accounts.first else { throw SyncError.noAccount }
        guard accounts.count == 1 else {
            throw AgentFailure(.badRequest, "There are several mail server accounts; choose one with --id.")
        }
        return only
    }

    /// Syncs the IMAP account `id` (or the only one), telling `progress` how each folder goes, and returns what it
    /// did.
    ///
    /// - Throws: `StoreError.locked` when the key is not in memory (the dispatcher's usual locked reply), else the
    ///   ``SyncError``.
    public func sync(
        id: Int64?,
        folders: [String],
        batch: Int?,
        progress: @Sendable (SyncProgress) -> Void = { _ in }
    ) async throws -> SyncSummary {
        let store = try dependencies.mailStore
        do {
            let chosen = try await serverAccount(id).id
            return try await Syncer(store: store, batchSize: max(1, batch ?? 50)).sync(
                accountID: chosen,
                folders: folders,
                progress: progress
            )
        } catch SyncError.locked {
            throw StoreError.locked
        }
    }

    /// Checks a login to `settings` with `password` (pinned as the settings say), then stores the account sealed.
    ///
    /// - Returns: The account's number and what the pin check found.
    public func addAccount(_ settings: ServerSettings, password: String) async throws -> (Int64, String) {
        let store = try dependencies.mailStore
        guard !password.isEmpty else { throw AgentFailure(.badRequest, "No password was given.") }
        guard settings.caFile.map({ $0.hasPrefix("/") }) ?? true else {
            throw AgentFailure(.badRequest, "The CA bundle's path must be absolute.")
        }
        let account = settings.account(password: password)
        do {
            let check = try await Syncer(store: store).checkLogin(account)
            return (try await store.addServerAccount(account), check)
        } catch SyncError.locked {
            throw StoreError.locked
        }
    }

    /// The IMAP accounts, without passwords.
    public func accounts() async throws -> [ServerSettings] {
        try await dependencies.mailStore.serverAccounts().map { ServerSettings($0.server, id: $0.id) }
    }

    /// Removes the IMAP account `id`; returns how many messages went with it.
    public func removeAccount(_ id: Int64) async throws -> Int {
        let store = try dependencies.mailStore
        guard try await store.serverAccounts().contains(where: { $0.id == id }) else {
            throw AgentFailure(.badRequest, "There is no mail server account \(id).")
        }
        return try await store.removeAccount(id)
    }
}
