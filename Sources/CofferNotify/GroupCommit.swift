import NIOConcurrencyHelpers

/// Group commit for the event path: events that arrive together share one transaction, so one durable commit (one
/// WAL sync on SQLite, one round trip and flush on PostgreSQL) answers all of them.
///
/// A caller that finds no commit running leads: it commits its own messages. Callers that arrive while a commit runs
/// wait; when it ends, the first of them leads the next commit, which holds every message queued meanwhile. Every
/// caller returns only after the transaction holding its messages committed, and a failing commit fails every caller
/// whose messages it held, so an answered event is never one that was not stored. An event's messages are never
/// split between transactions (``NotifyStorage/enqueue(_:)``'s all or none holds per event). The leader runs the
/// commit in a task it awaits, so that its own request's cancellation does not fail the other callers' events; the
/// task ends with the commit, before the leader returns.
public final class GroupCommit: Sendable {
    private enum Turn {
        case committed(Result<Void, NotifyError>)
        case lead
    }

    private struct Waiter {
        var messages: [PendingMessage]
        var continuation: CheckedContinuation<Turn, Never>
    }

    private struct State {
        var leading = false
        var waiting: [Waiter] = []
    }

    private let state = NIOLockedValueBox(State())
    private let commit: @Sendable ([PendingMessage]) async throws(NotifyError) -> Void
    private let maximumBatch: Int

    /// Commits through `commit` (one transaction per call: ``NotifyStorage/enqueue(_:)``), at most `maximumBatch`
    /// callers' events in one transaction.
    public init(
        maximumBatch: Int = 256,
        commit: @escaping @Sendable ([PendingMessage]) async throws(NotifyError) -> Void
    ) {
        self.maximumBatch = max(1, maximumBatch)
        self.commit = commit
    }

    /// Group commit on `storage`'s ``NotifyStorage/enqueue(_:)``.
    public convenience init(storage: any NotifyStorage, maximumBatch: Int = 256) {
        self.init(maximumBatch: maximumBatch) { (messages: [PendingMessage]) async throws(NotifyError) in
            try await storage.enqueue(messages)
        }
    }

    /// Callers waiting for the commit under way to end (tests use it to line events up).
    package var waitingCount: Int { state.withLockedValue { $0.waiting.count } }

    /// Stores one event's `messages` in the next transaction; returns once it committed.
    ///
    /// - Throws: the commit's error, when the transaction holding these messages failed (none of them is stored).
    public func enqueue(_ messages: [PendingMessage]) async throws(NotifyError) {
        guard !messages.isEmpty else { return }
        let turn = await withCheckedContinuation { (continuation: CheckedContinuation<Turn, Never>) in
            let leads = state.withLockedValue { state in
                if state.leading {
                    state.waiting.append(Waiter(messages: messages, continuation: continuation))
                    return false
                }
                state.leading = true
                return true
            }
            if leads { continuation.resume(returning: .lead) }
        }
        switch turn {
        case .committed(let result):
            try result.get()
        case .lead:
            // A leader commits its own messages and those of the callers that queued before it took the lead.
            let batch = state.withLockedValue { state in
                let count = min(state.waiting.count, maximumBatch - 1)
                defer { state.waiting.removeFirst(count) }
                return Array(state.waiting.prefix(count))
            }
            var all = messages
            for waiter in batch { all.append(contentsOf: waiter.messages) }
            // The commit runs in a task of its own, which the leader awaits: the batch holds other callers' events, so
            // the leader's own cancellation (its client hung up) must not cancel the transaction under them.
            let commit = self.commit
            let result = await Task { () async -> Result<Void, NotifyError> in
                do throws(NotifyError) {
                    try await commit(all)
                    return .success(())
                } catch {
                    return .failure(error)
                }
            }.value
            for waiter in batch { waiter.continuation.resume(returning: .committed(result)) }
            // The next leader is the first caller that arrived during this commit; none: the next caller leads.
            let next = state.withLockedValue { state -> Waiter? in
                guard !state.waiting.isEmpty else {
                    state.leading = false
                    return nil
                }
                return state.waiting.removeFirst()
            }
            next?.continuation.resume(returning: .lead)
            try result.get()
        }
    }
}
