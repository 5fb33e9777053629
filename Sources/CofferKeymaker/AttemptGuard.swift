/// The PIN attempt guard: a pure state machine over the stored attempt record (failures and the wall-clock second of
/// the last one). No clocks or storage of its own: the Keymaker reads the record under the cross-process attempt
/// lock, asks ``check(now:)``, counts the attempt with ``recordAttempt(now:)`` and makes it durable before it runs
/// the KDF, so no guess is ever tried uncounted.
public struct AttemptGuard: Sendable, Equatable {
    /// What a PIN attempt may do now.
    public enum Decision: Sendable, Equatable {
        /// Try the PIN (after counting the attempt).
        case allow
        /// Wait: the next attempt is allowed at this wall-clock second.
        case tooSoon(until: Int64)
        /// The limit is reached (or the record could not be trusted): destroy the MainKey.
        case destroy
    }

    /// Consecutive failed attempts (an attempt counts as failed until it succeeds).
    public private(set) var failures: Int
    /// Wall-clock second of the last counted attempt.
    public private(set) var lastFailure: Int64
    /// Failures that destroy the MainKey.
    public let limit: Int

    /// A guard over a stored record.
    public init(failures: Int, lastFailure: Int64, limit: Int) {
        self.failures = max(0, failures)
        self.lastFailure = lastFailure
        self.limit = limit
    }

    /// The guard for a missing, edited or foreign record: such a record counts as exhausted, never as a reset.
    public static func exhausted(limit: Int) -> AttemptGuard {
        AttemptGuard(failures: max(0, limit), lastFailure: 0, limit: limit)
    }

    /// Wall-clock seconds an attempt must wait after `failures` failures: none for the first three, then 30 s,
    /// 1 min, 5 min, 15 min, 30 min and 1 h.
    public static func delay(afterFailures failures: Int) -> Int {
        switch failures {
        case ..<4: 0
        case 4: 30
        case 5: 60
        case 6: 300
        case 7: 900
        case 8: 1800
        default: 3600
        }
    }

    /// Attempts left before the MainKey is destroyed.
    public var attemptsLeft: Int { max(0, limit - failures) }

    /// Decides whether an attempt may run at wall-clock second `now`. If the wall clock went back before the last
    /// failure, the wait restarts from `now` (the record's time moves to `now`; the caller stores it).
    public mutating func check(now: Int64) -> Decision {
        guard failures < limit else { return .destroy }
        let wait = Int64(Self.delay(afterFailures: failures))
        guard wait > 0 else { return .allow }
        if now < lastFailure {
            lastFailure = now
            return .tooSoon(until: Self.adding(now, wait))
        }
        let until = Self.adding(lastFailure, wait)
        return now < until ? .tooSoon(until: until) : .allow
    }

    /// Counts an attempt at `now`, before its result is known.
    public mutating func recordAttempt(now: Int64) {
        failures = failures < Int(UInt8.max) ? failures + 1 : failures
        lastFailure = now
    }

    /// The attempt succeeded: the count starts again.
    public mutating func succeeded() {
        failures = 0
        lastFailure = 0
    }

    private static func adding(_ base: Int64, _ seconds: Int64) -> Int64 {
        let (sum, overflow) = base.addingReportingOverflow(seconds)
        return overflow ? Int64.max : sum
    }
}
