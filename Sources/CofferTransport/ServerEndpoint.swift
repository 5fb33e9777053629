import Foundation
import NIOCore

/// A mail server a client connects to: where it is, how TLS starts, and what it must present.
///
/// IMAP and SMTP submission both connect through one: the store seals it inside an account record (docs/FORMAT.md,
/// "IMAP account record"), and ``tlsConfiguration(timeout:)`` is the one place its pins, CA bundle and report URL
/// become a ``PinnedTLSConfiguration``.
public struct ServerEndpoint: Sendable, Equatable {
    /// How TLS starts on the connection.
    public enum Security: Sendable, Equatable {
        /// TLS from the first byte (RFC 8314: `imaps://`, `submissions://`).
        case implicitTLS
        /// Plaintext until the protocol's STARTTLS upgrade, which is required (`imap://`, `submission://`); a server
        /// that does not offer it is refused.
        case startTLS
    }

    /// The server's host name (the certificate must carry it).
    public var host: String
    /// The port.
    public var port: Int
    /// How TLS starts.
    public var security: Security
    /// SPKI pins (base64 SHA-256); empty means chain and host name validation only.
    public var pins: [String]
    /// A PEM bundle of the CAs to trust instead of the system store.
    public var caFile: String?
    /// The address to connect to instead of `host` (the certificate must still carry `host`).
    public var connectAddress: String?
    /// Where pin failures of this server are reported (an https URL), or nil.
    public var pinReportURL: String?
    /// When the pins stop being enforced and are only reported (TrustKit's expiration date), or nil. Kept in whole
    /// seconds, as account records store it.
    public var pinExpires: Date? {
        didSet { pinExpires = Self.wholeSeconds(pinExpires) }
    }

    /// Creates an endpoint.
    public init(
        host: String,
        port: Int,
        security: Security = .implicitTLS,
        pins: [String] = [],
        caFile: String? = nil,
        connectAddress: String? = nil,
        pinReportURL: String? = nil,
        pinExpires: Date? = nil
    ) {
        self.host = host
        self.port = port
        self.security = security
        self.pins = pins
        self.caFile = caFile
        self.connectAddress = connectAddress
        self.pinReportURL = pinReportURL
        self.pinExpires = Self.wholeSeconds(pinExpires)
    }

    private static func wholeSeconds(_ date: Date?) -> Date? {
        date.map { Date(timeIntervalSince1970: $0.timeIntervalSince1970.rounded(.down)) }
    }

    /// The endpoint as a URL of `scheme` (implicit TLS) or `plainScheme` (STARTTLS): `imaps://HOST:PORT`.
    public func url(scheme: String, plainScheme: String) -> String {
        "\(security == .startTLS ? plainScheme : scheme)://\(host):\(port)"
    }

    /// The pinned TLS configuration of this endpoint: its CA bundle (or the system store) and, with pins, a pin
    /// policy for its host, enforced with no way around it; with a report URL, the uploader its pin failures go to
    /// (rate-limited per process, as TrustKit's are). Call `finish()` on the uploader before the process ends.
    ///
    /// - Throws: ``TransportError/invalidPinPolicy(host:reason:)`` for a malformed pin or report URL.
    public func tlsConfiguration(
        timeout: TimeAmount
    ) throws(TransportError) -> (configuration: PinnedTLSConfiguration, reports: PinReportUploader?) {
        let trustRoots: TrustRoots = caFile.map { .caBundle(path: $0) } ?? .system
        var reportURL: URL?
        if let text = pinReportURL {
            guard let url = URL(string: text) else {
                throw .invalidPinPolicy(host: host, reason: "the pin report URL is not a URL")
            }
            reportURL = url
        }
        var policy: PinPolicy?
        if !pins.isEmpty {
            var parsed: [SPKIPin] = []
            for text in pins {
                guard let pin = SPKIPin(base64: text) else {
                    throw .invalidPinPolicy(host: host, reason: "a pin is not the base64 of a SHA-256 hash")
                }
                parsed.append(pin)
            }
            do {
                policy = try PinPolicy(
                    hosts: [HostPinPolicy(host: host, pins: parsed, expirationDate: pinExpires, reportURL: reportURL)]
                )
            } catch let error as TransportError {
                throw error
            } catch {
                throw .invalidPinPolicy(host: host, reason: "the pin policy is invalid")
            }
        }
        let reports = policy != nil && reportURL != nil ? PinReportUploader(trustRoots: trustRoots) : nil
        let configuration = PinnedTLSConfiguration(
            serverName: host,
            port: port,
            connectAddress: connectAddress,
            trustRoots: trustRoots,
            pinPolicy: policy,
            timeout: timeout,
            reporter: reports.map { uploader in
                RateLimitedPinReporter(memory: .process) { uploader.pinFailure($0) }
            }
        )
        return (configuration, reports)
    }
}
