import CofferTesting
import NIOConcurrencyHelpers
import Testing

/// The test doubles in CofferTesting keep the promises other suites rely on.
@Suite(.timeLimit(.minutes(1))) struct TestSupportTests {
    /// Yields until `done()` holds, at most `limit` times (no clock time is involved).
    static func spin(limit: Int = 10_000, until done: () -> Bool) async {
        var spins = 0
        while !done() && spins < limit {
            await Task.yield()
            spins += 1
        }
    }

    @Test func aCancelledSleeperWakesWithCancellationAndLeavesTheClock() async throws {
        let clock = TestClock()
        let deadline = clock.now().boot + 3_600_000_000_000
        let sleeper = Task { try await clock.sleep(untilBoot: deadline) }
        await Self.spin { clock.sleeperCount == 1 }
        sleeper.cancel()
        await Self.spin { clock.sleeperCount == 0 }
        #expect(clock.sleeperCount == 0, "the cancelled sleeper still waits on the clock")
        // A clock that ignored cancellation would wait forever: release it, so that the test fails instead of hanging.
        clock.advance(seconds: 7_200)
        await #expect(throws: CancellationError.self) { try await sleeper.value }
    }

    @Test func aSleeperCancelledBeforeItSleepsDoesNotWait() async throws {
        let clock = TestClock()
        let deadline = clock.now().boot + 3_600_000_000_000
        let finished = NIOLockedValueBox(false)
        let sleeper = Task {
            defer { finished.withLockedValue { $0 = true } }
            withUnsafeCurrentTask { $0?.cancel() }
            try await clock.sleep(untilBoot: deadline)
        }
        await Self.spin { finished.withLockedValue { $0 } || clock.sleeperCount > 0 }
        #expect(clock.sleeperCount == 0, "an already cancelled task was put to sleep")
        clock.advance(seconds: 7_200)
        await #expect(throws: CancellationError.self) { try await sleeper.value }
    }

    @Test func advancingPastTheDeadlineWakesOnlyDueSleepers() async throws {
        let clock = TestClock()
        let start = clock.now().boot
        let soon = Task { try await clock.sleep(untilBoot: start + 1_000_000_000) }
        let later = Task { try await clock.sleep(untilBoot: start + 10_000_000_000) }
        while clock.sleeperCount < 2 { await Task.yield() }
        clock.advance(seconds: 2)
        try await soon.value
        #expect(clock.sleeperCount == 1)
        later.cancel()
        await Self.spin { clock.sleeperCount == 0 }
        clock.advance(seconds: 20)  // releases `later` from a clock that ignored its cancellation
        await #expect(throws: CancellationError.self) { try await later.value }
    }

    @Test func redactionFindsEveryFormOfTheBytes() {
        let secret: [UInt8] = Array("hunter2-marker".utf8)
        #expect(Redaction.leaks(of: secret, in: "x \(secret) y") == ["\(secret)"])
        #expect(Redaction.leaks(of: secret, in: "hunter2-marker").count == 1)
        #expect(Redaction.leaks(of: secret, in: "68756e746572322d6d61726b6572").count == 1)
        #expect(Redaction.leaks(of: secret, in: "aHVudGVyMi1tYXJrZXI=").count == 1)
        #expect(Redaction.leaks(of: secret, in: "nothing here").isEmpty)
    }
}
