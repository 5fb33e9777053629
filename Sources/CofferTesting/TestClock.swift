import CofferKeymaker
import NIOConcurrencyHelpers

/// A clock that moves only when a test says so; sleepers wake when the boot time passes their deadline.
public final class TestClock: KeymakerClock {
    private struct State {
        var reading: ClockReading
        var sleepers: [(id: UInt64, deadline: UInt64, continuation: CheckedContinuation<Void, Error>)] = []
        var nextID: UInt64 = 0
    }

    private let state: NIOLockedValueBox<State>

    /// Starts at boot time 1,000 s and wall time 2026-01-01T00:00:00Z.
    public init(boot: UInt64 = 1_000 * 1_000_000_000, wall: Int64 = 1_767_225_600 * 1_000_000_000) {
        state = NIOLockedValueBox(State(reading: ClockReading(boot: boot, wall: wall)))
    }

    /// The current reading.
    public func now() -> ClockReading { state.withLockedValue { $0.reading } }

    /// Suspends until ``advance(seconds:)`` moves the boot clock past `deadline`; throws `CancellationError` at once
    /// if the task is (or was already) cancelled, as ``KeymakerClock/sleep(untilBoot:)`` requires.
    public func sleep(untilBoot deadline: UInt64) async throws {
        let id = state.withLockedValue { state in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
                enum Outcome { case wait, resume, cancel }
                let outcome = state.withLockedValue { state -> Outcome in
                    // Checked under the lock, so a cancellation that ran before the sleeper was added is not lost.
                    if Task.isCancelled { return .cancel }
                    if state.reading.boot >= deadline { return .resume }
                    state.sleepers.append((id, deadline, continuation))
                    return .wait
                }
                switch outcome {
                case .wait: break
                case .resume: continuation.resume()
                case .cancel: continuation.resume(throwing: CancellationError())
                }
            }
        } onCancel: {
            let cancelled = state.withLockedValue { state in
                let index = state.sleepers.firstIndex { $0.id == id }
                return index.map { state.sleepers.remove(at: $0).continuation }
            }
            cancelled?.resume(throwing: CancellationError())
        }
    }

    /// Moves both clocks forward by `seconds`, as real time passing would, and wakes due sleepers.
    public func advance(seconds: Double) {
        let nanos = UInt64(seconds * 1_000_000_000)
        let due = state.withLockedValue { state in
            state.reading.boot += nanos
            state.reading.wall += Int64(nanos)
            let boot = state.reading.boot
            let due = state.sleepers.filter { $0.deadline <= boot }
            state.sleepers.removeAll { $0.deadline <= boot }
            return due
        }
        for sleeper in due { sleeper.continuation.resume() }
    }

    /// Moves only the wall clock (someone setting the time), by `seconds` (negative to go back).
    public func jumpWallClock(seconds: Int64) {
        state.withLockedValue { $0.reading.wall += seconds * 1_000_000_000 }
    }

    /// How many tasks are waiting on this clock.
    public var sleeperCount: Int { state.withLockedValue { $0.sleepers.count } }
}
