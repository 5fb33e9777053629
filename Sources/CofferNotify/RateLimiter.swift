import Foundation

/// Counts attempts per key (a client address, a user name) in fixed windows and refuses beyond the limit.
public actor RateLimiter {
    /// Attempts allowed per key per window.
    public let limit: Int
    /// The window length.
    public let window: TimeInterval
    private let now: @Sendable () -> Date
    private var windows: [String: (start: Date, count: Int)] = [:]
    private var lastPrune = Date.distantPast

    /// Creates a limiter allowing `limit` attempts per key per `window` seconds.
    public init(limit: Int, window: TimeInterval, now: @escaping @Sendable () -> Date = { Date() }) {
        self.limit = limit
        self.window = window
        self.now = now
    }

    /// Counts one attempt for every key; true when none of them is over the limit.
    public func allow(_ keys: [String]) -> Bool {
        let date = now()
        // Spent windows are dropped at most once a window, not on every call once the table is large.
        if windows.count > 100_000, date.timeIntervalSince(lastPrune) >= window {
            lastPrune = date
            windows = windows.filter { date.timeIntervalSince($0.value.start) < window }
        }
        var allowed = true
        for key in keys {
            var entry = windows[key] ?? (date, 0)
            if date.timeIntervalSince(entry.start) >= window { entry = (date, 0) }
            entry.count += 1
            windows[key] = entry
            if entry.count > limit { allowed = false }
        }
        return allowed
    }
}
