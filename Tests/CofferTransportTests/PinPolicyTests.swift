import Foundation
import Testing

@testable import CofferTransport

struct PinPolicyTests {
    static let pinA = SPKIPin(subjectPublicKeyInfoDER: Array("key A".utf8))
    static let pinB = SPKIPin(subjectPublicKeyInfoDER: Array("key B".utf8))
    static let pinC = SPKIPin(subjectPublicKeyInfoDER: Array("key C".utf8))

    @Test(arguments: [[SPKIPin](), [pinA], [pinA, pinA]])
    func fewerThanTwoDistinctPinsAreRejectedAtConfiguration(pins: [SPKIPin]) {
        #expect(throws: TransportError.self) { try HostPinPolicy(host: "mail.example.org", pins: pins) }
    }

    @Test(arguments: ["", "abc", "not base64!", "AAAA", String(repeating: "A", count: 42) + "==", "Zm9v"])
    func malformedPinsAreRejected(text: String) {
        #expect(SPKIPin(base64: text) == nil)
    }

    @Test(arguments: ["", ".example.org", "exa mple.org", "a..b", "ex/ample.org"])
    func malformedHostsAreRejected(host: String) {
        #expect(throws: TransportError.self) { try HostPinPolicy(host: host, pins: [Self.pinA, Self.pinB]) }
    }

    @Test func includeSubdomainsOnASingleLabelIsRejected() {
        #expect(throws: TransportError.self) {
            try HostPinPolicy(host: "org", pins: [Self.pinA, Self.pinB], includeSubdomains: true)
        }
    }

    @Test func aPlainHTTPReportURLIsRejected() {
        #expect(throws: TransportError.self) {
            try HostPinPolicy(
                host: "mail.example.org",
                pins: [Self.pinA, Self.pinB],
                reportURL: URL(string: "http://report.example.org/pins")
            )
        }
    }

    @Test func aHostListedTwiceIsRejected() throws {
        let entry = try HostPinPolicy(host: "mail.example.org", pins: [Self.pinA, Self.pinB])
        #expect(throws: TransportError.self) { try PinPolicy(hosts: [entry, entry]) }
    }

    @Test func entryLookupPrefersExactThenTheLongestParentWithIncludeSubdomains() throws {
        let parent = try HostPinPolicy(host: "example.org", pins: [Self.pinA, Self.pinB], includeSubdomains: true)
        let mail = try HostPinPolicy(host: "mail.example.org", pins: [Self.pinB, Self.pinC], includeSubdomains: true)
        let exactOnly = try HostPinPolicy(host: "www.example.net", pins: [Self.pinA, Self.pinC])
        let policy = try PinPolicy(hosts: [parent, mail, exactOnly])
        #expect(policy.entry(for: "example.org") == parent)
        #expect(policy.entry(for: "IMAP.Example.ORG.") == parent)
        #expect(policy.entry(for: "mail.example.org") == mail)
        #expect(policy.entry(for: "a.mail.example.org") == mail)
        #expect(policy.entry(for: "badexample.org") == nil)
        #expect(policy.entry(for: "a.www.example.net") == nil)
        #expect(policy.entry(for: "www.example.net") == exactOnly)
    }

    @Test func evaluationFollowsTheRules() throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let entry = try HostPinPolicy(host: "mail.example.org", pins: [Self.pinA, Self.pinB])
        let policy = try PinPolicy(hosts: [entry])
        #expect(policy.evaluate(hostname: "other.example.org", chainPins: [Self.pinC], now: now) == .notPinned)
        #expect(
            policy.evaluate(hostname: "mail.example.org", chainPins: [Self.pinC, Self.pinA], now: now)
                == .matched(entry: entry, pin: Self.pinA)
        )
        guard
            case .refused(_, .pinMismatch) = policy.evaluate(
                hostname: "mail.example.org",
                chainPins: [Self.pinC],
                now: now
            )
        else {
            Issue.record("a chain without a pinned key must be refused")
            return
        }
        guard
            case .refused(_, .noBackupPin) = policy.evaluate(
                hostname: "mail.example.org",
                chainPins: [Self.pinA, Self.pinB],
                now: now
            )
        else {
            Issue.record("a policy whose pins are all served has no backup")
            return
        }
        var expiring = entry
        expiring.expirationDate = now.addingTimeInterval(-1)
        let expired = try PinPolicy(hosts: [expiring])
        guard
            case .expired(_, .pinMismatch) = expired.evaluate(
                hostname: "mail.example.org",
                chainPins: [Self.pinC],
                now: now
            )
        else {
            Issue.record("after expiration a mismatch is reported, not enforced")
            return
        }
    }

    @Test func codableRoundTripAndTheDocumentedJSON() throws {
        let policy = try PinPolicy(hosts: [
            HostPinPolicy(
                host: "mail.example.org",
                pins: [Self.pinA, Self.pinB],
                includeSubdomains: true,
                expirationDate: Date(timeIntervalSince1970: 1_900_000_000),
                reportURL: URL(string: "https://report.example.org/pins")
            )
        ])
        let data = try JSONEncoder().encode(policy)
        #expect(try JSONDecoder().decode(PinPolicy.self, from: data) == policy)
        let documented = """
            {"version":1,"reportInterval":86400,"hosts":[{"host":"mail.example.org","includeSubdomains":false,
            "pins":["\(Self.pinA.base64)","\(Self.pinB.base64)"]}]}
            """
        let decoded = try JSONDecoder().decode(PinPolicy.self, from: Data(documented.utf8))
        #expect(decoded.hosts.first?.pins == [Self.pinA, Self.pinB])
    }

    @Test(arguments: [
        #"{"version":2,"hosts":[]}"#,
        #"{"version":0,"hosts":[]}"#,
        #"{"version":1,"hosts":[{"host":"mail.example.org","pins":["AAAA"]}]}"#,
        #"{"version":1,"hosts":[{"host":"mail.example.org","pins":["47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="]}]}"#,
        #"{"version":1,"reportInterval":-1,"hosts":[]}"#,
    ])
    func storedPoliciesThatCannotBeEnforcedDoNotDecode(json: String) {
        #expect(throws: (any Error).self) { try JSONDecoder().decode(PinPolicy.self, from: Data(json.utf8)) }
    }

    @Test func theRateLimiterPassesAnIdenticalReportOncePerInterval() {
        let clock = Clock()
        let passed = Passed()
        let limiter = RateLimitedPinReporter(interval: 100, now: { clock.now }, sink: { passed.add($0) })
        let report = PinFailureReport(
            hostname: "mail.example.org",
            port: 993,
            notedHostname: "mail.example.org",
            servedChainPins: [Self.pinC.base64],
            knownPins: [Self.pinA.base64, Self.pinB.base64],
            result: "pinMismatch",
            enforced: true,
            date: clock.now
        )
        limiter.pinFailure(report)
        var later = report
        later.date = report.date.addingTimeInterval(10)
        clock.advance(10)
        limiter.pinFailure(later)
        #expect(passed.count == 1)
        var other = report
        other.servedChainPins = [Self.pinB.base64]
        limiter.pinFailure(other)
        #expect(passed.count == 2)
        clock.advance(100)
        limiter.pinFailure(report)
        #expect(passed.count == 3)
    }

    @Test func errorsNameTheHostAndNeverLeaveSentencesUnfinished() {
        let errors: [TransportError] = [
            .pinMismatch(host: "h.example", expected: ["x", "y"], seen: ["z"]),
            .noBackupPin(host: "h.example", pins: ["x"]),
            .untrustedChain(host: "h.example", reason: "r"), .hostnameMismatch(host: "h.example"),
            .certificateExpired(host: "h.example", notValidAfter: Date(timeIntervalSince1970: 0)),
            .connectFailed(host: "h.example", port: 993, reason: "r"), .timedOut(host: "h.example", port: 993),
            .handshakeFailed(host: "h.example", reason: "r"), .noCertificate(host: "h.example"),
        ]
        for error in errors {
            #expect(error.description.contains("h.example"))
            #expect(error.description.hasSuffix("."))
        }
    }
}

private final class Clock: @unchecked Sendable {
    private let lock = NSLock()
    private var value = Date(timeIntervalSince1970: 1_800_000_000)
    var now: Date { lock.withLock { value } }
    func advance(_ seconds: TimeInterval) { lock.withLock { value += seconds } }
}

private final class Passed: @unchecked Sendable {
    private let lock = NSLock()
    private var reports: [PinFailureReport] = []
    var count: Int { lock.withLock { reports.count } }
    func add(_ report: PinFailureReport) { lock.withLock { reports.append(report) } }
}
