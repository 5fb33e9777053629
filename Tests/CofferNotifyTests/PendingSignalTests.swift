import CofferNotify
import Testing

/// The long poll's wake-up: a push queued between a reader's look at the queue and its wait must not wait for the
/// timeout (the coffer-bench push run saw 25 s at p99 before this).
@Suite struct PendingSignalTests {
    /// With an hour's timeout, a lost wake would hang: the time limit turns that into a failure.
    @Test(.timeLimit(.minutes(1)))
    func aWakeBetweenTheLookAndTheWaitEndsTheWaitAtOnce() async {
        let signal = PendingSignal()
        let seen = await signal.generation(sessionID: "s1")
        // The reader has looked (empty queue); the message is queued and its wake comes now, before the wait.
        await signal.wake(sessionID: "s1")
        await signal.wait(sessionID: "s1", after: seen, timeout: .seconds(3600))
        #expect(await signal.generation(sessionID: "s1") == seen + 1)
    }

    @Test(.timeLimit(.minutes(1)))
    func aWaiterIsWokenAndAnotherSessionsWakeDoesNotCount() async {
        let signal = PendingSignal()
        let seen = await signal.generation(sessionID: "s1")
        await signal.wake(sessionID: "s2")
        #expect(await signal.generation(sessionID: "s1") == seen)
        async let waited: Void = signal.wait(sessionID: "s1", after: seen, timeout: .seconds(3600))
        // Wake until the waiter has gone (a wake before it registered also ends its wait, by the generation).
        await signal.wake(sessionID: "s1")
        await waited
    }
}
