import Foundation

/// Failed logins (registration and `/account` sign-in), counted per (user, client) and per client in a sliding
/// window, with a back-off that doubles with each failure past the free ones. A login in back-off is refused before
/// it reaches the mail server. Only failures count, and only the client that made them is slowed: a stranger's wrong
/// passwords from elsewhere do not keep a user out. A success clears the (user, client) count.
public actor LoginThrottle {
    /// The rules.
    public struct Policy: Sendable, Equatable {
        /// The sliding window failures are counted in (15 minutes).
        public var window: TimeInterval = 15 * 60
        /// Failures of one user from one client before back-off starts (5).
        public var freeFailuresPerUser = 5
        /// Failures from one client, over all users, before back-off starts (30).
        public var freeFailuresPerClient = 30
        /// The first back-off; each further failure doubles it (1 s).
        public var baseDelay: TimeInterval = 1
        /// The longest back-off (the window).
        public var maximumDelay: TimeInterval = 15 * 60

        /// The defaults.
        public init() {}
    }

    /// The rules in force.
    public let policy: Policy
    private let now: @Sendable () -> Date
    private var failures: [String: [Date]] = [:]
    private var lastPrune = Date.distantPast

    /// Creates a throttle.
    public init(policy: Policy = Policy(), now: @escaping @Sendable () -> Date = { Date() }) {
        self.policy = policy
        self.now = now
    }

    private static func pair(_ user: String, _ client: String) -> String { "u:\(user)\u{0}c:\(client)" }
    private static func client(_ client: String) -> String { "c:\(client)" }

    /// Whether a login of `user` from `client` may go to the mail server now.
    public func admit(user: String, client: String) -> Bool {
        let date = now()
        prune(date)
        return !inBackOff(Self.pair(user, client), free: policy.freeFailuresPerUser, at: date)
            && !inBackOff(Self.client(client), free: policy.freeFailuresPerClient, at: date)
    }

    /// Counts a failed login (the mail server refused the password).
    public func failed(user: String, client: String) {
        let date = now()
        for key in [Self.pair(user, client), Self.client(client)] {
            failures[key, default: []].append(date)
        }
    }

    /// Clears the (user, client) failures after a successful login.
    public func succeeded(user: String, client: String) {
        failures[Self.pair(user, client)] = nil
    }

    /// The back-off still to wait before `user` may log in from `client`, 0 when none (tests, logs).
    public func delay(user: String, client: String) -> TimeInterval {
        let date = now()
        return max(
            remaining(Self.pair(user, client), free: policy.freeFailuresPerUser, at: date),
            remaining(Self.client(client), free: policy.freeFailuresPerClient, at: date)
        )
    }

    private func inBackOff(_ key: String, free: Int, at date: Date) -> Bool {
        remaining(key, free: free, at: date) > 0
    }

    private func remaining(_ key: String, free: Int, at date: Date) -> TimeInterval {
        guard var times = failures[key] else { return 0 }
        times.removeAll { date.timeIntervalSince($0) >= policy.window }
        failures[key] = times.isEmpty ? nil : times
        guard times.count >= free, let last = times.last else { return 0 }
        let exponent = min(times.count - free, 30)
        let delay = min(policy.baseDelay * Double(1 << exponent), policy.maximumDelay)
        return max(0, last.addingTimeInterval(delay).timeIntervalSince(date))
    }

    /// Drops keys whose failures all left the window, at most once a minute (never a walk of the table per call).
    private func prune(_ date: Date) {
        guard date.timeIntervalSince(lastPrune) >= 60 else { return }
        lastPrune = date
        failures = failures.filter { _, times in times.contains { date.timeIntervalSince($0) < policy.window } }
    }
}

/// An IPv4 or IPv6 network in CIDR notation (`10.0.0.0/8`, `2001:db8::/32`, or a single address).
public struct CIDR: Sendable, Equatable, CustomStringConvertible {
    /// The network's address bytes (4 or 16).
    public let bytes: [UInt8]
    /// The prefix length.
    public let prefix: Int

    /// Parses `text`; nil when it is not an address with an optional prefix length in range.
    public init?(_ text: String) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count <= 2, let address = Self.parse(String(parts[0])) else { return nil }
        let length: Int
        if parts.count == 2 {
            guard let value = Int(parts[1]), (0...(address.count * 8)).contains(value) else { return nil }
            length = value
        } else {
            length = address.count * 8
        }
        bytes = address
        prefix = length
    }

    /// The address bytes of `text` (an IPv4-mapped IPv6 address as its 4 IPv4 bytes), nil when it is none.
    static func parse(_ text: String) -> [UInt8]? {
        if let v4 = IPv4Address(text) { return v4.bytes }
        guard let v6 = IPv6Bytes(text) else { return nil }
        if v6[0..<10].allSatisfy({ $0 == 0 }) && v6[10] == 0xff && v6[11] == 0xff { return Array(v6[12..<16]) }
        return v6
    }

    /// Whether the address `text` is inside this network.
    public func contains(_ text: String) -> Bool {
        guard let address = Self.parse(text), address.count == bytes.count else { return false }
        var remaining = prefix
        for index in 0..<bytes.count where remaining > 0 {
            let bits = min(8, remaining)
            let mask = UInt8(truncatingIfNeeded: 0xff << (8 - bits))
            if address[index] & mask != bytes[index] & mask { return false }
            remaining -= bits
        }
        return true
    }

    /// `address/prefix`.
    public var description: String {
        let address =
            bytes.count == 4
            ? bytes.map(String.init).joined(separator: ".")
            : stride(from: 0, to: 16, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
                .joined(separator: ":")
        return "\(address)/\(prefix)"
    }
}

/// Who a request comes from: the TCP peer, or, when the peer is a trusted proxy, the last address in
/// `X-Forwarded-For` that is not a trusted proxy itself (the proxy appends the address it saw; anything before it
/// was written by the client and is not believed).
public struct ClientResolver: Sendable {
    /// The proxies whose `X-Forwarded-For` is believed (`--trusted-proxy`); none by default.
    public let trustedProxies: [CIDR]

    /// Creates a resolver.
    public init(trustedProxies: [CIDR] = []) { self.trustedProxies = trustedProxies }

    /// Whether `address` is a trusted proxy.
    public func isTrusted(_ address: String) -> Bool { trustedProxies.contains { $0.contains(address) } }

    /// The client's bucket (``ClientAddress/bucket(text:)``: an IPv6 client as its /64).
    public func client(peer: String, forwardedFor: [String]) -> String {
        origin(peer: peer, forwardedFor: forwardedFor).bucket
    }

    /// The client's address as written: the peer (with `port`), or the address a trusted proxy forwarded (without
    /// a port: the proxy's own port says nothing about the client).
    public func origin(peer: String, port: Int? = nil, forwardedFor: [String]) -> ClientOrigin {
        let direct = ClientOrigin(address: peer, port: port)
        guard isTrusted(peer) else { return direct }
        let hops = forwardedFor.flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces) }
        for hop in hops.reversed() {
            let address = hop.hasPrefix("[") ? String(hop.dropFirst().prefix { $0 != "]" }) : hop
            guard CIDR.parse(address) != nil else { return direct }
            if !isTrusted(address) { return ClientOrigin(address: address) }
        }
        return direct
    }
}
