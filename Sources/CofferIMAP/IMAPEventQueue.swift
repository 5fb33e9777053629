import NIOConcurrencyHelpers

/// What the channel handler hands to the client: parser events, the timer of IDLE, or the end of the stream.
enum IMAPInbound: Sendable {
    case event(IMAPResponseEvent)
    case wakeUp
    case failed(IMAPError)
}

/// A queue between the event loop (producer) and the client actor (the single consumer).
final class IMAPEventQueue: Sendable {
    private struct State {
        var items: [IMAPInbound] = []
        var head = 0
        var waiter: CheckedContinuation<IMAPInbound, Never>?
        var terminal: IMAPError?
        /// Items pushed so far (the watchdog's sign of life).
        var pushed: UInt64 = 0
        /// While true (IDLE) a silent server is expected.
        var idling = false
    }

    private let state = NIOLockedValueBox(State())

    func push(_ item: IMAPInbound) {
        let waiter: CheckedContinuation<IMAPInbound, Never>? = state.withLockedValue { state in
            state.pushed &+= 1
            if case .failed(let error) = item {
                if state.terminal != nil { return nil }
                state.terminal = error
            }
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.items.append(item)
            return nil
        }
        waiter?.resume(returning: item)
    }

    /// Marks the time in which the server may stay silent (IDLE).
    func setIdling(_ idling: Bool) { state.withLockedValue { $0.idling = idling } }

    /// What the watchdog looks at: items pushed so far, whether the client waits for one with none queued outside
    /// IDLE, and whether the stream has ended.
    var watch: (pushed: UInt64, starving: Bool, ended: Bool) {
        state.withLockedValue { ($0.pushed, $0.waiter != nil && !$0.idling, $0.terminal != nil) }
    }

    /// The failure that ended the stream, if one did (without consuming anything).
    var failure: IMAPError? { state.withLockedValue { $0.terminal } }

    /// The next item; on task cancellation `.failed(.cancelled)`.
    func next() async -> IMAPInbound {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<IMAPInbound, Never>) in
                let ready: IMAPInbound? = state.withLockedValue { state in
                    if state.head < state.items.count {
                        let item = state.items[state.head]
                        state.head += 1
                        if state.head > 64, state.head * 2 > state.items.count {
                            state.items.removeFirst(state.head)
                            state.head = 0
                        }
                        return item
                    }
                    if let terminal = state.terminal { return .failed(terminal) }
                    if Task.isCancelled { return .failed(.cancelled) }
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
            waiter?.resume(returning: .failed(.cancelled))
        }
    }
}
