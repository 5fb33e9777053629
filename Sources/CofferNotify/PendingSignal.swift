import Foundation

/// Wakes the long-polling stream requests of a session when a message is queued for it (in this process).
///
/// A reader takes the session's ``generation(sessionID:)`` *before* it looks at the queue and waits "after" it: a
/// wake that comes between its look and its wait (the message queued just then) ends the wait at once instead of
/// being lost until the timeout.
public actor PendingSignal {
    private var waiters: [String: [UUID: CheckedContinuation<Void, Never>]] = [:]
    private var generations: [String: UInt64] = [:]

    /// Creates a signal with no waiters.
    public init() {}

    /// How many wakes the session has had: take it before reading the queue, and give it to ``wait(sessionID:after:timeout:)``.
    public func generation(sessionID: String) -> UInt64 { generations[sessionID, default: 0] }

    /// Waits until ``wake(sessionID:)`` for this session or until `timeout`, whichever is first; returns at once when
    /// the session was woken since `seen` was read.
    public func wait(sessionID: String, after seen: UInt64, timeout: Duration) async {
        guard generations[sessionID, default: 0] == seen else { return }
        let id = UUID()
        let timer = Task { [weak self] in
            try? await Task.sleep(for: timeout)
            await self?.resume(sessionID: sessionID, id: id)
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                waiters[sessionID, default: [:]][id] = continuation
            }
        } onCancel: {
            Task { await self.resume(sessionID: sessionID, id: id) }
        }
        timer.cancel()
    }

    /// Wakes every waiter of the session.
    public func wake(sessionID: String) {
        generations[sessionID, default: 0] &+= 1
        guard let waiting = waiters.removeValue(forKey: sessionID) else { return }
        for continuation in waiting.values { continuation.resume() }
    }

    private func resume(sessionID: String, id: UUID) {
        guard let continuation = waiters[sessionID]?.removeValue(forKey: id) else { return }
        if waiters[sessionID]?.isEmpty == true { waiters[sessionID] = nil }
        continuation.resume()
    }
}
