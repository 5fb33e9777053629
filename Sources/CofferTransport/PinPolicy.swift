import Crypto
import Foundation
import SwiftASN1
import X509

/// The pin of one public key: the base64 SHA-256 of its DER SubjectPublicKeyInfo (TrustKit's and RFC 7469's form).
public struct SPKIPin: Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    /// The pin as written in configurations: 44 characters of standard base64.
    public let base64: String

    /// Reads a pin as written by `coffer pin` or `openssl … | openssl dgst -sha256 -binary | base64`.
    ///
    /// - Returns: nil unless `base64` is standard base64 of exactly 32 bytes.
    public init?(base64: String) {
        guard let data = Data(base64Encoded: base64), data.count == SHA256.byteCount else { return nil }
        self.base64 = data.base64EncodedString()
    }

    /// The pin of a DER-encoded SubjectPublicKeyInfo.
    public init(subjectPublicKeyInfoDER: some DataProtocol) {
        self.base64 = Data(SHA256.hash(data: subjectPublicKeyInfoDER)).base64EncodedString()
    }

    /// The pin of a certificate's public key.
    ///
    /// - Throws: `TransportError.untrustedChain` if the key cannot be encoded (not expected for a parsed certificate).
    public init(certificate: Certificate) throws(TransportError) {
        var serializer = DER.Serializer()
        do {
            try serializer.serialize(certificate.publicKey)
        } catch {
            throw TransportError.untrustedChain(
                host: "\(certificate.subject)",
                reason: "its public key cannot be encoded"
            )
        }
        self.init(subjectPublicKeyInfoDER: serializer.serializedBytes)
    }

    /// Decodes a pin, refusing anything that is not base64 of 32 bytes.
    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let pin = SPKIPin(base64: text) else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "a pin is base64 of a 32-byte SHA-256")
            )
        }
        self = pin
    }

    /// Encodes the pin as its base64 string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(self.base64)
    }

    /// Orders pins by their text, so lists print the same way every time.
    public static func < (lhs: SPKIPin, rhs: SPKIPin) -> Bool { lhs.base64 < rhs.base64 }

    /// The base64 text, as `sha256/…` would print without its prefix.
    public var description: String { self.base64 }
}

/// The pins of one host, with TrustKit's semantics (see docs/FORMAT.md, "Certificate pinning").
///
/// - Warning: There is no switch to turn enforcement off. Before `expirationDate` a mismatch refuses the connection;
///   after it, chain and hostname validation still apply and a mismatch is only reported.
public struct HostPinPolicy: Hashable, Sendable, Codable {
    /// The host name the pins apply to, lowercased, without a trailing dot.
    public var host: String
    /// Whether the pins also apply to every name below `host` (a more specific entry wins).
    public var includeSubdomains: Bool
    /// The accepted keys: at least two distinct pins, one of which must be a backup not in the served chain.
    public var pins: [SPKIPin]
    /// After this instant the pins are reported but no longer enforced (TrustKit's `kTSKExpirationDate`).
    public var expirationDate: Date?
    /// Where pin failures are to be reported (https only; ``PinReportUploader`` sends them).
    public var reportURL: URL?

    /// Creates and checks a host policy.
    ///
    /// - Throws: `TransportError.invalidPinPolicy` if the policy could not be enforced (see ``validate()``).
    public init(
        host: String,
        pins: [SPKIPin],
        includeSubdomains: Bool = false,
        expirationDate: Date? = nil,
        reportURL: URL? = nil
    ) throws {
        self.host = Self.normalize(host)
        self.pins = pins
        self.includeSubdomains = includeSubdomains
        self.expirationDate = expirationDate
        self.reportURL = reportURL
        try self.validate()
    }

    /// Checks the rules enforcement needs: a plausible host name, at least two distinct pins (TrustKit refuses a
    /// policy without a backup pin at configuration), no `includeSubdomains` on a single label, an https report URL.
    ///
    /// - Throws: `TransportError.invalidPinPolicy` naming the host and the broken rule.
    public func validate() throws {
        let allowed = Set("abcdefghijklmnopqrstuvwxyz0123456789-.:")
        guard !host.isEmpty, host.count <= 253, host.allSatisfy({ allowed.contains($0) }),
            !host.hasPrefix("."), !host.contains("..")
        else {
            throw TransportError.invalidPinPolicy(host: host.isEmpty ? "(empty host)" : host, reason: "the host name")
        }
        if Set(pins).count < 2 {
            throw TransportError.invalidPinPolicy(
                host: host,
                reason: "it needs at least two distinct pins, one of them a backup key that the server does not use yet"
            )
        }
        if includeSubdomains && !host.contains(".") {
            throw TransportError.invalidPinPolicy(host: host, reason: "includeSubdomains needs a domain, not a suffix")
        }
        if let url = reportURL, url.scheme?.lowercased() != "https" || url.host == nil {
            throw TransportError.invalidPinPolicy(host: host, reason: "the report URL must be an https URL")
        }
    }

    /// Whether these pins apply to `hostname`: the same name, or a name below it when `includeSubdomains` is set.
    public func applies(to hostname: String) -> Bool {
        let name = Self.normalize(hostname)
        return name == host || (includeSubdomains && name.hasSuffix("." + host))
    }

    static func normalize(_ host: String) -> String {
        var name = host.lowercased()
        while name.hasSuffix(".") { name.removeLast() }
        return name
    }

    /// Decodes and checks a host policy: a stored policy that could not be enforced is an error, not a pass.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.host = Self.normalize(try container.decode(String.self, forKey: .host))
        self.includeSubdomains = try container.decodeIfPresent(Bool.self, forKey: .includeSubdomains) ?? false
        self.pins = try container.decode([SPKIPin].self, forKey: .pins)
        self.expirationDate = try container.decodeIfPresent(Date.self, forKey: .expirationDate)
        self.reportURL = try container.decodeIfPresent(URL.self, forKey: .reportURL)
        try self.validate()
    }
}

/// The pin policies of an account, one entry per host; stored sealed with the account (docs/FORMAT.md).
public struct PinPolicy: Hashable, Sendable, Codable {
    /// The format version this build writes; it reads every version up to it.
    public static let currentVersion = 1
    /// TrustKit's rate limit: an identical report is sent at most once per 24 hours.
    public static let defaultReportInterval: TimeInterval = 24 * 3600

    /// The format version of this record.
    public var version: Int
    /// The host entries, at most one per host name.
    public var hosts: [HostPinPolicy]
    /// The shortest time between two identical reports, in seconds.
    public var reportInterval: TimeInterval

    /// Creates and checks a policy.
    ///
    /// - Throws: `TransportError.invalidPinPolicy` for a broken entry or a host listed twice.
    public init(hosts: [HostPinPolicy], reportInterval: TimeInterval = Self.defaultReportInterval) throws {
        self.version = Self.currentVersion
        self.hosts = hosts
        self.reportInterval = reportInterval
        try self.validate()
    }

    /// Checks every entry, that no host is listed twice, and that the report interval is positive.
    ///
    /// - Throws: `TransportError.invalidPinPolicy` or `TransportError.unsupportedPinPolicyVersion`.
    public func validate() throws {
        guard (1...Self.currentVersion).contains(version) else {
            throw TransportError.unsupportedPinPolicyVersion(version)
        }
        var seen = Set<String>()
        for entry in hosts {
            try entry.validate()
            guard seen.insert(entry.host).inserted else {
                throw TransportError.invalidPinPolicy(host: entry.host, reason: "the host is listed twice")
            }
        }
        guard reportInterval.isFinite, reportInterval > 0 else {
            throw TransportError.invalidPinPolicy(host: "(all hosts)", reason: "the report interval must be positive")
        }
    }

    /// The entry that applies to `hostname`: an exact entry first, else the longest domain with `includeSubdomains`.
    public func entry(for hostname: String) -> HostPinPolicy? {
        let name = HostPinPolicy.normalize(hostname)
        if let exact = hosts.first(where: { $0.host == name }) { return exact }
        return hosts.filter { $0.applies(to: name) }.max { $0.host.count < $1.host.count }
    }

    /// Decides what a validated chain means for `hostname` under this policy.
    ///
    /// - Parameters:
    ///   - hostname: The name that was validated against the certificate.
    ///   - chainPins: The pins of every certificate of the validated chain, leaf to root.
    ///   - now: The current time, passed in so tests need no clock.
    public func evaluate(hostname: String, chainPins: [SPKIPin], now: Date) -> PinEvaluation {
        guard let entry = entry(for: hostname) else { return .notPinned }
        let expected = entry.pins.sorted()
        let seen = chainPins
        let failure: TransportError?
        if let match = expected.first(where: { seen.contains($0) }) {
            if expected.allSatisfy({ seen.contains($0) }) {
                failure = .noBackupPin(host: hostname, pins: expected.map(\.base64))
            } else {
                return .matched(entry: entry, pin: match)
            }
        } else {
            failure = .pinMismatch(host: hostname, expected: expected.map(\.base64), seen: seen.map(\.base64))
        }
        guard let failure else { return .notPinned }
        if let expiry = entry.expirationDate, now > expiry {
            return .expired(entry: entry, failure: failure)
        }
        return .refused(entry: entry, failure: failure)
    }

    /// Decodes and checks a policy; an unknown version or a broken entry is an error.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.version = try container.decode(Int.self, forKey: .version)
        guard (1...Self.currentVersion).contains(version) else {
            throw TransportError.unsupportedPinPolicyVersion(version)
        }
        self.hosts = try container.decode([HostPinPolicy].self, forKey: .hosts)
        self.reportInterval =
            try container.decodeIfPresent(TimeInterval.self, forKey: .reportInterval) ?? Self.defaultReportInterval
        try self.validate()
    }
}

/// What a pin policy says about one validated chain.
public enum PinEvaluation: Sendable, Equatable {
    /// No entry applies to the host: chain and hostname validation alone decide.
    case notPinned
    /// A pin matched and the policy has a backup pin: connect.
    case matched(entry: HostPinPolicy, pin: SPKIPin)
    /// The policy is past its expiration date and would have refused: connect, and report the failure.
    case expired(entry: HostPinPolicy, failure: TransportError)
    /// Refuse the connection with `failure`.
    case refused(entry: HostPinPolicy, failure: TransportError)
}
