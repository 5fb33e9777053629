import Foundation

/// Wakes the long-polling stream requests of a session when a message is queued for it (in this process).
public actor PendingSignal {
    private var waiters: [String: [UUID: CheckedContinuation<Void, Never>]] = [:]

    /// Creates a signal with no waiters.
    public init() {}

    /// Waits until ``wake(sessionID:)`` for this session or until `timeout`, whichever is first.
    public func wait(sessionID: String, timeout: Duration) async {
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
        guard let waiting = waiters.removeValue(forKey: sessionID) else { return }
        for continuation in waiting.values { continuation.resume() }
    }

    private func resume(sessionID: String, id: UUID) {
        guard let continuation = waiters[sessionID]?.removeValue(forKey: id) else { return }
        if waiters[sessionID]?.isEmpty == true { waiters[sessionID] = nil }
        continuation.resume()
    }
}
