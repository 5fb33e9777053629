import Foundation
import NIOConcurrencyHelpers

/// One pin failure, in the shape of TrustKit's report (which follows RFC 7469 §3): no secret and no message text.
public struct PinFailureReport: Hashable, Sendable, Codable {
    /// The host name that was connected to.
    public var hostname: String
    /// The port that was connected to.
    public var port: Int
    /// The policy entry's host (differs from `hostname` for an `includeSubdomains` match).
    public var notedHostname: String
    /// The pins of the validated chain, leaf to root.
    public var servedChainPins: [String]
    /// The pins of the policy.
    public var knownPins: [String]
    /// What failed: `pinMismatch` or `noBackupPin`.
    public var result: String
    /// Whether the failure refused the connection (false once the policy has expired).
    public var enforced: Bool
    /// The policy's expiration date, if any.
    public var expirationDate: Date?
    /// Where the policy asks the report to go.
    public var reportURL: URL?
    /// When the failure happened.
    public var date: Date

    /// Everything but the date: two reports with the same gist are the same report for the rate limit.
    var gist: [String] {
        [hostname, String(port), notedHostname, result, String(enforced)] + servedChainPins + ["|"] + knownPins
    }
}

/// Receives pin failure reports. Called on an event loop: it must return at once and never block.
public protocol PinFailureReporter: Sendable {
    /// Takes one report (refused connections and expired-policy mismatches alike).
    func pinFailure(_ report: PinFailureReport)
}

/// TrustKit's rate limit in front of another reporter: an identical report (same gist, any date) passes at most once
/// per interval; the memory of sent reports is cleared when the interval has passed.
///
/// - Note: Nothing uploads reports to `reportURL` yet; `sink` is where a future uploader plugs in.
public final class RateLimitedPinReporter: PinFailureReporter {
    private struct State {
        var sent: Set<[String]> = []
        var windowStart: Date?
    }

    private let state = NIOLockedValueBox(State())
    private let interval: TimeInterval
    private let now: @Sendable () -> Date
    private let sink: @Sendable (PinFailureReport) -> Void

    /// Creates a rate-limited reporter.
    ///
    /// - Parameters:
    ///   - interval: The time during which an identical report is sent once (TrustKit: 24 hours).
    ///   - now: The clock, injectable for tests.
    ///   - sink: Receives the reports that pass the limit.
    public init(
        interval: TimeInterval = PinPolicy.defaultReportInterval,
        now: @escaping @Sendable () -> Date = { Date() },
        sink: @escaping @Sendable (PinFailureReport) -> Void
    ) {
        self.interval = interval
        self.now = now
        self.sink = sink
    }

    /// Passes `report` to the sink unless an identical one passed within the interval.
    public func pinFailure(_ report: PinFailureReport) {
        let current = now()
        let pass = state.withLockedValue { state -> Bool in
            if let start = state.windowStart, current.timeIntervalSince(start) < interval {
                // Same window: keep the memory.
            } else {
                state.sent.removeAll()
                state.windowStart = current
            }
            return state.sent.insert(report.gist).inserted
        }
        if pass { sink(report) }
    }
}
