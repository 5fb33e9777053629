import CofferAgentProtocol
import CofferCrypto
import CofferKeymaker
import CofferMIME
import CofferOutbox
import CofferStore
import CofferSync
import NIOConcurrencyHelpers

/// The one owner of an account's background work: every sync of its store (a `coffer sync`, `--watch`, a push while
/// unlocked, FastSync while locked) runs here, one job at a time, in the order asked, with one rule for choosing the
/// server account. The outbox drains here too (``Job/send(server:)``): a ``Job`` names what to do, the coordinator
/// decides when and with which key.
///
/// The two push routes differ only in their key: unlocked, the job uses the account's Keymaker under
/// ``KeyUse/background`` (so it never restarts the autolock); locked, FastSync's key is granted to this one job
/// (``AccountKeys/withBackgroundKey(_:_:)``) and wiped with every key derived from it when the job ends.
public struct AccountCoordinator: Sendable {
    /// What it uses.
    public typealias Dependencies = HasMailStore & HasAccountKeys & HasMailStateReset

    /// A unit of work on the account's store.
    public enum Job: Sendable {
        /// Sync `folders` (all when empty) of the server account `server` (or the only one).
        case sync(server: Int64?, folders: [String], batch: Int?)
        /// Send the due messages of server account `server` from the outbox, then store their Sent copies
        /// (``OutboxSender``). Always background work: it never restarts the autolock.
        case send(server: Int64)
        /// Queue `message` (written from draft `draft`, deleted when it is queued) and send it at once, streamed
        /// while its outbox file is written, then drain as ``send(server:)`` (``OutboxSender/send(_:accountID:replacingDraft:)``).
        /// Background work too.
        case sendNew(OutgoingMessage, server: Int64, draft: Int64?)
    }

    /// What a job did.
    public enum Outcome: Sendable {
        /// A sync's summary.
        case synced(SyncSummary)
        /// What a drain of the outbox sent.
        case sent(OutboxReport)
        /// The message a ``Job/sendNew(_:server:draft:)`` queued, and what its drain sent.
        case sentNew(OutboxItem, OutboxReport)

        /// The sync's summary (empty for another job).
        public var summary: SyncSummary {
            if case .synced(let summary) = self { summary } else { SyncSummary() }
        }
    }

    /// Where a job's key comes from.
    public enum KeySupply: Sendable {
        /// The Keymaker's key, for the running task's ``KeyUse`` (a person's request counts as activity).
        case account
        /// A key granted to this job alone while the account is locked (FastSync); wiped when the job ends.
        case granted(SecretBytes)
    }

    private let dependencies: any Dependencies
    private let turns: JobTurns

    /// The coordinator of one account's container, whose jobs take `turns` (one per account).
    init(dependencies: any Dependencies, turns: JobTurns) {
        self.dependencies = dependencies
        self.turns = turns
    }

    /// Runs `job` after every job asked before it has ended.
    ///
    /// - Parameters:
    ///   - job: What to do.
    ///   - key: Where its key comes from.
    ///   - progress: How each folder goes.
    /// - Returns: The sync's summary.
    /// - Throws: The job's error (``SyncError``; `locked` when no key is available).
    public func run(
        _ job: Job,
        key: KeySupply = .account,
        progress: @escaping @Sendable (SyncProgress) -> Void = { _ in }
    ) async throws -> Outcome {
        try await turns.inTurn {
            switch key {
            case .account:
                return try await perform(job, progress: progress)
            case .granted(let secret):
                defer { dependencies.resetMailState() }
                return try await dependencies.accountKeys.withBackgroundKey(secret) {
                    try await perform(job, progress: progress)
                }
            }
        }
    }

    /// Sends the due messages of server account `server` (``Job/send(server:)``) after the jobs asked before.
    public func send(server: Int64) async throws -> OutboxReport {
        guard case .sent(let report) = try await run(.send(server: server)) else { return OutboxReport() }
        return report
    }

    /// Queues `message` and sends it at once (``Job/sendNew(_:server:draft:)``) after the jobs asked before.
    ///
    /// - Returns: The message's outbox item as queued.
    /// - Throws: ``StoreError`` when it cannot be queued (nothing is sent then, and the draft stays).
    public func send(_ message: OutgoingMessage, server: Int64, replacingDraft draft: Int64?) async throws -> OutboxItem
    {
        let outcome = try await run(.sendNew(message, server: server, draft: draft))
        guard case .sentNew(let item, _) = outcome else {
            throw StoreError.invalidArgument("the message was not queued")
        }
        return item
    }

    private func perform(_ job: Job, progress: @escaping @Sendable (SyncProgress) -> Void) async throws -> Outcome {
        let store = try dependencies.mailStore
        switch job {
        case .sync(let server, let folders, let batch):
            let chosen = try await Self.serverAccount(server, in: store).id
            return .synced(
                try await Syncer(store: store, batchSize: max(1, batch ?? Syncer.defaultBatchSize)).sync(
                    accountID: chosen,
                    folders: folders,
                    progress: progress
                )
            )
        case .send(let server):
            return .sent(
                try await KeyUse.background.run { try await OutboxSender(store: store).drain(accountID: server) }
            )
        case .sendNew(let message, let server, let draft):
            let (item, report) = try await KeyUse.background.run {
                try await OutboxSender(store: store).send(message, accountID: server, replacingDraft: draft)
            }
            return .sentNew(item, report)
        }
    }

    /// The one rule for choosing a server account: the one numbered `id`, or the only one.
    ///
    /// - Throws: ``AgentFailure`` (`badRequest`) for an unknown number or several accounts without one;
    ///   ``SyncError/noAccount`` when there is none.
    public static func serverAccount(
        _ id: Int64?,
        in store: MailStore
    ) async throws -> (id: Int64, server: ServerAccount) {
        let accounts = try await store.serverAccounts()
        if let id {
            guard let found = accounts.first(where: { $0.id == id }) else {
                throw AgentFailure(.badRequest, "There is no mail server account \(id).")
            }
            return found
        }
        guard let only = accounts.first else { throw SyncError.noAccount }
        guard accounts.count == 1 else {
            throw AgentFailure(.badRequest, "There are several mail server accounts; choose one with its number.")
        }
        return only
    }
}

/// First come, first served turns for one account's jobs: a job waits until every job before it has ended.
public final class JobTurns: Sendable {
    private struct State {
        var busy = false
        var waiting: [CheckedContinuation<Void, Never>] = []
    }
    private let state = NIOLockedValueBox(State())

    /// No job running.
    public init() {}

    func inTurn<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        await take()
        defer { give() }
        return try await body()
    }

    private func take() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLockedValue { state -> Bool in
                guard state.busy else {
                    state.busy = true
                    return true
                }
                state.waiting.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    private func give() {
        let next = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
            guard !state.waiting.isEmpty else {
                state.busy = false
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.resume()
    }
}
