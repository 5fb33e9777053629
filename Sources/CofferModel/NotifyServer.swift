#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Where the notification service is and how its certificate is checked: the same pinning as an IMAP account
/// (chain and host name against the system store or a CA bundle, then at least two SPKI pins when given).
///
/// `https://HOST[:PORT]` is the only form for a real service. `http://` is accepted only for a loopback address
/// (127.0.0.0/8, ::1, localhost): the test service and a service reached through a local TLS terminator.
public struct NotifyServer: Sendable, Equatable, Codable {
    /// The host name the certificate must carry.
    public var host: String
    /// The TCP port.
    public var port: Int
    /// Whether the connection is TLS (false only for loopback `http://`).
    public var tls: Bool
    /// SPKI pins (base64 SHA-256); empty means chain and host name only.
    public var pins: [String]
    /// A PEM bundle of the CAs to trust instead of the system store.
    public var caFile: String?
    /// An address to connect to instead of `host` (the certificate must still name `host`).
    public var connectAddress: String?

    /// Creates it from fields already checked (by ``init(url:pins:caFile:connectAddress:)``, in CofferNotifyClient).
    package init(host: String, port: Int, tls: Bool, pins: [String], caFile: String?, connectAddress: String?) {
        self.host = host
        self.port = port
        self.tls = tls
        self.pins = pins
        self.caFile = caFile
        self.connectAddress = connectAddress
    }

    /// The URL as the person gave it (without pins).
    public var url: String {
        let shownHost = host.contains(":") ? "[\(host)]" : host
        let defaultPort = tls ? 443 : 80
        return "\(tls ? "https" : "http")://\(shownHost)\(port == defaultPort ? "" : ":\(port)")"
    }

    /// Whether `host` names this machine: `localhost`, 127.0.0.0/8 or ::1.
    public static func isLoopback(_ host: String) -> Bool {
        let lower = host.lowercased()
        if lower == "localhost" || lower == "::1" || lower == "0:0:0:0:0:0:0:1" { return true }
        let parts = lower.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }
}
