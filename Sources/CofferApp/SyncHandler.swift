import CofferAgentProtocol
import CofferKeymaker
import CofferStore
import CofferSync

/// `sync` in the agent: the agent's own store (it holds the unlocked key) and an IMAP connection from the agent.
public struct SyncHandler: Sendable {
    /// What it uses.
    public typealias Dependencies = HasMailStore & HasAccountCoordinator

    private let dependencies: any Dependencies

    /// A handler over one account's container.
    public init(dependencies: any Dependencies) { self.dependencies = dependencies }

    /// Syncs the IMAP account `id` (or the only one) through the account's coordinator, telling `progress` how each
    /// folder goes, and returns what it did.
    ///
    /// - Throws: The ``SyncError`` (`locked` when the key is not in memory, which the dispatcher answers as every
    ///   other "locked").
    public func sync(
        id: Int64?,
        folders: [String],
        batch: Int?,
        progress: @escaping @Sendable (SyncProgress) -> Void = { _ in }
    ) async throws -> SyncSummary {
        try await dependencies.coordinator.run(.sync(server: id, folders: folders, batch: batch), progress: progress)
            .summary
    }

    /// Waits up to `seconds` (at most 29 minutes, as RFC 2177 asks) for a change of the first of `folders` with IDLE,
    /// then syncs through the coordinator. All of it is background work: a change on the server is not a person's
    /// request, so neither the wait nor the sync restarts the autolock.
    public func watch(
        id: Int64?,
        folders: [String],
        batch: Int?,
        seconds: Int,
        progress: @escaping @Sendable (SyncProgress) -> Void = { _ in }
    ) async throws -> SyncSummary {
        let store = try dependencies.mailStore
        return try await KeyUse.background.run {
            let server = try await AccountCoordinator.serverAccount(id, in: store)
            _ = try await Syncer(store: store).waitForChange(
                accountID: server.id,
                folder: folders.first ?? "INBOX",
                timeout: .seconds(min(max(1, seconds), 29 * 60))
            )
            return try await dependencies.coordinator.run(
                .sync(server: server.id, folders: folders, batch: batch),
                progress: progress
            ).summary
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
        let check = try await Syncer(store: store).checkLogin(account)
        return (try await store.addServerAccount(account), check)
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
