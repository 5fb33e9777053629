import CofferKeymaker
import Testing

/// The pure attempt guard, as a table: record before, the time of the attempt, the decision, the record after.
@Suite struct AttemptGuardMachineTests {
    struct Row: Sendable, CustomStringConvertible {
        var failures: Int
        var lastFailure: Int64
        var now: Int64
        var decision: AttemptGuard.Decision
        var lastFailureAfter: Int64
        var description: String { "\(failures) failures, last at \(lastFailure), now \(now)" }
    }

    static let rows: [Row] = [
        // The first three failures cost nothing.
        Row(failures: 0, lastFailure: 0, now: 1000, decision: .allow, lastFailureAfter: 0),
        Row(failures: 3, lastFailure: 1000, now: 1000, decision: .allow, lastFailureAfter: 1000),
        // From the fourth on, a wait that grows.
        Row(failures: 4, lastFailure: 1000, now: 1029, decision: .tooSoon(until: 1030), lastFailureAfter: 1000),
        Row(failures: 4, lastFailure: 1000, now: 1030, decision: .allow, lastFailureAfter: 1000),
        Row(failures: 5, lastFailure: 1000, now: 1059, decision: .tooSoon(until: 1060), lastFailureAfter: 1000),
        Row(failures: 9, lastFailure: 1000, now: 4599, decision: .tooSoon(until: 4600), lastFailureAfter: 1000),
        Row(failures: 9, lastFailure: 1000, now: 4600, decision: .allow, lastFailureAfter: 1000),
        // The limit.
        Row(failures: 10, lastFailure: 1000, now: 99999, decision: .destroy, lastFailureAfter: 1000),
        Row(failures: 255, lastFailure: 0, now: 0, decision: .destroy, lastFailureAfter: 0),
        // The wall clock set back before the last failure: the wait restarts from now.
        Row(failures: 4, lastFailure: 5000, now: 1000, decision: .tooSoon(until: 1030), lastFailureAfter: 1000),
        // A record from the far future, or at the end of time, does not overflow.
        Row(
            failures: 4,
            lastFailure: Int64.max,
            now: 1000,
            decision: .tooSoon(until: 1030),
            lastFailureAfter: 1000
        ),
        Row(
            failures: 9,
            lastFailure: Int64.max - 10,
            now: Int64.max - 5,
            decision: .tooSoon(until: Int64.max),
            lastFailureAfter: Int64.max - 10
        ),
    ]

    @Test(arguments: rows)
    func decides(row: Row) {
        var machine = AttemptGuard(failures: row.failures, lastFailure: row.lastFailure, limit: 10)
        #expect(machine.check(now: row.now) == row.decision)
        #expect(machine.lastFailure == row.lastFailureAfter)
        #expect(machine.failures == row.failures)
    }

    @Test func countingAndSuccess() {
        var machine = AttemptGuard(failures: 8, lastFailure: 0, limit: 10)
        machine.recordAttempt(now: 7000)
        #expect(machine.failures == 9)
        #expect(machine.lastFailure == 7000)
        #expect(machine.attemptsLeft == 1)
        machine.recordAttempt(now: 7001)
        #expect(machine.attemptsLeft == 0)
        #expect(machine.check(now: 99999) == .destroy)
        machine.succeeded()
        #expect(machine.failures == 0)
        #expect(machine.check(now: 0) == .allow)
    }

    @Test func anUntrustedRecordIsExhausted() {
        var machine = AttemptGuard.exhausted(limit: 10)
        #expect(machine.check(now: 0) == .destroy)
        #expect(machine.attemptsLeft == 0)
    }

    @Test func theCountSaturatesAtTheRecordsByte() {
        var machine = AttemptGuard(failures: 255, lastFailure: 0, limit: 300)
        machine.recordAttempt(now: 1)
        #expect(machine.failures == 255)
    }
}
