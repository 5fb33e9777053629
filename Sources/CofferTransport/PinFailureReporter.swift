import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

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

/// The reports a ``RateLimitedPinReporter`` has let through in its current interval. Reporters that share one
/// memory share the limit: ``process`` is the process's, as TrustKit's limit is per app launch.
public final class PinReportMemory: Sendable {
    fileprivate struct State {
        var sent: Set<[String]> = []
        var windowStart: Date?
    }

    fileprivate let state = NIOLockedValueBox(State())

    /// An empty memory.
    public init() {}

    /// The process's memory.
    public static let process = PinReportMemory()
}

/// TrustKit's rate limit in front of another reporter: an identical report (same gist, any date) passes at most once
/// per interval; the memory of sent reports is cleared when the interval has passed.
public final class RateLimitedPinReporter: PinFailureReporter {
    private let memory: PinReportMemory
    private let interval: TimeInterval
    private let now: @Sendable () -> Date
    private let sink: @Sendable (PinFailureReport) -> Void

    /// Creates a rate-limited reporter.
    ///
    /// - Parameters:
    ///   - interval: The time during which an identical report is sent once (TrustKit: 24 hours).
    ///   - now: The clock, injectable for tests.
    ///   - memory: What has been sent (a fresh memory by default; ``PinReportMemory/process`` to share the limit).
    ///   - sink: Receives the reports that pass the limit.
    public init(
        interval: TimeInterval = PinPolicy.defaultReportInterval,
        now: @escaping @Sendable () -> Date = { Date() },
        memory: PinReportMemory = PinReportMemory(),
        sink: @escaping @Sendable (PinFailureReport) -> Void
    ) {
        self.memory = memory
        self.interval = interval
        self.now = now
        self.sink = sink
    }

    /// Passes `report` to the sink unless an identical one passed within the interval.
    public func pinFailure(_ report: PinFailureReport) {
        let current = now()
        let pass = memory.state.withLockedValue { state -> Bool in
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

/// Sends pin failure reports to their policy's report URL: `POST` of a "Pin failure report v1" (docs/FORMAT.md) as
/// JSON, over TLS validated against `trustRoots` with no pins (a report must get through when pins fail). Each
/// upload runs in its own task, so ``pinFailure(_:)`` returns at once; a failed upload is dropped, as TrustKit's are.
public final class PinReportUploader: PinFailureReporter {
    private let trustRoots: TrustRoots
    private let timeout: TimeAmount
    private let inFlight = NIOLockedValueBox<[UUID: Task<Void, Never>]>([:])

    /// An uploader that trusts `trustRoots` for the report endpoints.
    public init(trustRoots: TrustRoots, timeout: TimeAmount = .seconds(10)) {
        self.trustRoots = trustRoots
        self.timeout = timeout
    }

    /// The report's JSON (Pin failure report v1): RFC 7469 §3's keys where they apply, pins as `pin-sha256="…"`.
    public static func body(_ report: PinFailureReport) -> [UInt8] {
        let formatter = ISO8601DateFormatter()
        var object: [String: Any] = [
            "v": 1,
            "date-time": formatter.string(from: report.date),
            "hostname": report.hostname,
            "port": report.port,
            "noted-hostname": report.notedHostname,
            "served-chain-pins": report.servedChainPins.map { "pin-sha256=\"\($0)\"" },
            "known-pins": report.knownPins.map { "pin-sha256=\"\($0)\"" },
            "validation-result": report.result,
            "enforce-pinning": report.enforced,
        ]
        if let expiration = report.expirationDate {
            object["effective-expiration-date"] = formatter.string(from: expiration)
        }
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
        return Array(data)
    }

    /// Starts the upload of `report` to its `reportURL` (nothing when it has none).
    public func pinFailure(_ report: PinFailureReport) {
        guard let url = report.reportURL, url.scheme?.lowercased() == "https", let host = url.host,
            let path = PinnedHTTP.target(of: url)
        else { return }
        let configuration = PinnedTLSConfiguration(
            serverName: host,
            port: url.port ?? 443,
            trustRoots: trustRoots,
            timeout: timeout
        )
        let body = Self.body(report)
        let (timeout, id) = (timeout, UUID())
        let task = Task {
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "application/json")
            _ = try? await PinnedHTTP.exchange(
                configuration,
                tls: true,
                method: .POST,
                path: path,
                headers: headers,
                body: body,
                totalTime: timeout,
                maximumResponse: 64 * 1024
            )
        }
        inFlight.withLockedValue { $0[id] = task }
    }

    /// Waits for every upload started so far (a process about to exit calls it, so that its reports go out).
    public func finish() async {
        let tasks = inFlight.withLockedValue { tasks in
            defer { tasks.removeAll() }
            return Array(tasks.values)
        }
        for task in tasks { await task.value }
    }
}
