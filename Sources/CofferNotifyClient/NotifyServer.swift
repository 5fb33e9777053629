import CofferModel
import CofferTransport
import Foundation

extension NotifyServer {
    /// Parses `https://HOST[:PORT]` (443 by default) or a loopback `http://HOST[:PORT]` (80 by default).
    ///
    /// - Throws: ``NotifyClientError/invalidServer(_:)`` with the reason.
    public init(
        url: String,
        pins: [String] = [],
        caFile: String? = nil,
        connectAddress: String? = nil
    ) throws(NotifyClientError) {
        let lower = url.lowercased()
        let tls: Bool
        let rest: Substring
        if lower.hasPrefix("https://") {
            (tls, rest) = (true, url.dropFirst("https://".count))
        } else if lower.hasPrefix("http://") {
            (tls, rest) = (false, url.dropFirst("http://".count))
        } else {
            throw .invalidServer("it must start with https://")
        }
        var authority = rest
        if authority.hasSuffix("/") { authority.removeLast() }
        guard !authority.isEmpty, !authority.contains("/"), !authority.contains("@"), !authority.contains("?") else {
            throw .invalidServer("give only https://HOST[:PORT], without a path or user name")
        }
        var host = String(authority)
        var port = tls ? 443 : 80
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw .invalidServer("an IPv6 address lacks its ]") }
            host = String(authority[authority.index(after: authority.startIndex)..<close])
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":"), let value = Int(after.dropFirst()) else {
                    throw .invalidServer("the port is not a number")
                }
                port = value
            }
        } else if let colon = authority.lastIndex(of: ":") {
            host = String(authority[..<colon])
            guard let value = Int(authority[authority.index(after: colon)...]) else {
                throw .invalidServer("the port is not a number")
            }
            port = value
        }
        guard (1...65535).contains(port) else { throw .invalidServer("the port must be from 1 to 65535") }
        guard !host.isEmpty else { throw .invalidServer("the host is empty") }
        if !tls && !Self.isLoopback(connectAddress ?? host) {
            throw .invalidServer("http:// is allowed only to a loopback address; use https://")
        }
        if !pins.isEmpty {
            guard pins.count >= 2 else {
                throw .invalidServer("give at least two --pin-sha256: the server's key and a backup key")
            }
            guard pins.allSatisfy({ SPKIPin(base64: $0) != nil }) else {
                throw .invalidServer("a pin is not the base64 of a SHA-256 hash")
            }
        }
        self.init(host: host, port: port, tls: tls, pins: pins, caFile: caFile, connectAddress: connectAddress)
    }

    /// The pinned TLS configuration (pins enforced with no way around them).
    public func tlsConfiguration(timeout: Int64 = 20) throws(NotifyClientError) -> PinnedTLSConfiguration {
        var policy: PinPolicy?
        if !pins.isEmpty {
            let parsed = pins.compactMap { SPKIPin(base64: $0) }
            do {
                policy = try PinPolicy(hosts: [HostPinPolicy(host: host, pins: parsed)])
            } catch let error as TransportError {
                throw .transport(error)
            } catch {
                throw .invalidServer("the pin policy is invalid")
            }
        }
        return PinnedTLSConfiguration(
            serverName: host,
            port: port,
            connectAddress: connectAddress,
            trustRoots: caFile.map { .caBundle(path: $0) } ?? .system,
            pinPolicy: policy,
            timeout: .seconds(timeout)
        )
    }
}
