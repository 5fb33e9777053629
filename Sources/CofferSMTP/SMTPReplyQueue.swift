import NIOConcurrencyHelpers

/// Replies from the event loop (the producer) to the client actor (the single consumer), or the failure that ended
/// the connection.
final class SMTPReplyQueue: Sendable {
    private struct State {
        var replies: [SMTPReply] = []
        var waiter: CheckedContinuation<Result<SMTPReply, SMTPError>, Never>?
        var terminal: SMTPError?
    }

    private let state = NIOLockedValueBox(State())

    /// Queues a reply for the client.
    func push(_ reply: SMTPReply) {
        let waiter = state.withLockedValue { state -> CheckedContinuation<Result<SMTPReply, SMTPError>, Never>? in
            guard state.terminal == nil else { return nil }
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.replies.append(reply)
            return nil
        }
        waiter?.resume(returning: .success(reply))
    }

    /// Ends the stream with `error` (the first failure wins); replies queued before it are still delivered.
    func fail(_ error: SMTPError) {
        let waiter = state.withLockedValue { state -> CheckedContinuation<Result<SMTPReply, SMTPError>, Never>? in
            guard state.terminal == nil else { return nil }
            state.terminal = error
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: .failure(error))
    }

    /// Whether a reply is queued that nobody has read yet.
    var hasUnreadReply: Bool { state.withLockedValue { !$0.replies.isEmpty } }

    /// The failure that ended the stream, if one did.
    var failure: SMTPError? { state.withLockedValue { $0.terminal } }

    /// The next reply; on task cancellation `.cancelled`.
    func next() async throws(SMTPError) -> SMTPReply {
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<SMTPReply, SMTPError>, Never>) in
                let ready: Result<SMTPReply, SMTPError>? = state.withLockedValue { state in
                    if !state.replies.isEmpty { return .success(state.replies.removeFirst()) }
                    if let terminal = state.terminal { return .failure(terminal) }
                    if Task.isCancelled { return .failure(.cancelled) }
                    state.waiter = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            let waiter = state.withLockedValue { state in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(returning: .failure(.cancelled))
        }
        return try result.get()
    }
}
