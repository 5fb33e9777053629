import CofferTesting
import Testing

/// The test doubles in CofferTesting keep the promises other suites rely on.
@Suite(.timeLimit(.minutes(1))) struct TestSupportTests {
    @Test func aCancelledSleeperWakesWithCancellationAndLeavesTheClock() async throws {
        let clock = TestClock()
        let deadline = clock.now().boot + 3_600_000_000_000
        let sleeper = Task { try await clock.sleep(untilBoot: deadline) }
        while clock.sleeperCount == 0 { await Task.yield() }
        sleeper.cancel()
        await #expect(throws: CancellationError.self) { try await sleeper.value }
        #expect(clock.sleeperCount == 0)
    }

    @Test func aSleeperCancelledBeforeItSleepsDoesNotWait() async throws {
        let clock = TestClock()
        let deadline = clock.now().boot + 3_600_000_000_000
        let sleeper = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await clock.sleep(untilBoot: deadline)
        }
        await #expect(throws: CancellationError.self) { try await sleeper.value }
        #expect(clock.sleeperCount == 0)
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
