import CofferBlocking
import CofferCrypto
import Foundation
import NIOCore

/// The rules for a client-given RFC 8030 push subscription URL: https only, and every address its host resolves to
/// must be public (not loopback, private, link-local, shared, multicast, reserved or unspecified), so the service
/// cannot be used to reach its own network. The connection goes to the address that was checked (no second lookup).
public struct PushEndpointPolicy: Sendable {
    /// Tests only: allow `http` and loopback addresses (the loopback test receiver). A test hook, so `package`: no
    /// program outside this package can turn the guard off, and `serve` never does.
    package var allowLoopbackForTests: Bool

    /// Creates the policy, which refuses loopback.
    public init() { self.allowLoopbackForTests = false }

    /// Tests only: a policy that allows `http` and loopback addresses when `allowLoopbackForTests` is true.
    package init(allowLoopbackForTests: Bool) { self.allowLoopbackForTests = allowLoopbackForTests }

    /// A checked endpoint: where to connect and what to ask for.
    public struct Resolved: Sendable {
        /// The URL as given.
        public var url: URL
        /// The host name (for SNI, certificate checks and `Host`).
        public var host: String
        /// The port.
        public var port: Int
        /// Whether TLS is used (always, except loopback in tests).
        public var tls: Bool
        /// The checked address to connect to.
        public var address: SocketAddress
    }

    /// Checks the URL's form (no resolution): scheme, host, no user info. Used at registration.
    public func checkForm(_ text: String) throws(NotifyError) -> URL {
        guard text.utf8.count <= 2048, let url = URL(string: text), let scheme = url.scheme?.lowercased(),
            let host = url.host, !host.isEmpty, url.user == nil, url.password == nil
        else { throw .invalidRequest("pushEndpoint must be an absolute URL without user info, at most 2048 bytes") }
        guard scheme == "https" || (allowLoopbackForTests && scheme == "http") else {
            throw .invalidRequest("pushEndpoint must be an https URL")
        }
        return url
    }

    /// Checks the form, resolves the host and checks every address.
    public func resolve(_ text: String) async throws(NotifyError) -> Resolved {
        let url = try checkForm(text)
        let host = url.host ?? ""
        let tls = url.scheme?.lowercased() == "https"
        let port = url.port ?? (tls ? 443 : 80)
        let addresses: [SocketAddress]
        do {
            addresses = try await Self.lookup(host: host, port: port)
        } catch {
            throw .invalidRequest("the push endpoint's host does not resolve")
        }
        guard let first = addresses.first else { throw .invalidRequest("the push endpoint's host does not resolve") }
        for address in addresses where !isAllowed(address) {
            throw .invalidRequest("the push endpoint resolves to a loopback, private or reserved address")
        }
        if !tls && !addresses.allSatisfy({ Loopback.isLoopback($0) }) {
            throw .invalidRequest("pushEndpoint must be an https URL")
        }
        return Resolved(url: url, host: host, port: port, tls: tls, address: first)
    }

    /// Whether one address may be connected to under this policy.
    public func isAllowed(_ address: SocketAddress) -> Bool {
        if Loopback.isLoopback(address) { return allowLoopbackForTests }
        return Self.isPublic(address)
    }

    static func bytes(_ address: SocketAddress) -> [UInt8]? {
        switch address {
        case .v4(let v4):
            return withUnsafeBytes(of: v4.address.sin_addr.s_addr) { Array($0) }
        case .v6(let v6):
            return withUnsafeBytes(of: v6.address.sin6_addr) { Array($0) }
        default:
            return nil
        }
    }

    /// Public unicast: not in any special-purpose block of RFC 6890 and its successors.
    static func isPublic(_ address: SocketAddress) -> Bool {
        guard let b = bytes(address) else { return false }
        if b.count == 4 { return isPublicV4(b) }
        guard b.count == 16 else { return false }
        if b.prefix(12) == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF] { return isPublicV4(Array(b.suffix(4))) }
        // NAT64 (64:ff9b::/96) embeds an IPv4 address: judge that one.
        if b.prefix(12) == [0, 0x64, 0xFF, 0x9B, 0, 0, 0, 0, 0, 0, 0, 0] { return isPublicV4(Array(b.suffix(4))) }
        if b.prefix(15).allSatisfy({ $0 == 0 }) { return false }  // :: and ::1
        if b[0] == 0xFF { return false }  // multicast
        if b[0] & 0xFE == 0xFC { return false }  // fc00::/7 unique local
        if b[0] == 0xFE && b[1] & 0xC0 == 0x80 { return false }  // fe80::/10 link-local
        if b[0] == 0xFE && b[1] & 0xC0 == 0xC0 { return false }  // fec0::/10 site-local (deprecated)
        if b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0D && b[3] == 0xB8 { return false }  // 2001:db8::/32
        if b[0] == 0x20 && b[1] == 0x02 { return false }  // 6to4 may embed a private address
        if b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0 { return false }  // Teredo
        return b[0] & 0xE0 == 0x20  // global unicast 2000::/3
    }

    static func isPublicV4(_ b: [UInt8]) -> Bool {
        switch (b[0], b[1]) {
        case (0, _), (10, _), (127, _): return false
        case (100, 64...127): return false  // shared address space (CGNAT)
        case (169, 254): return false  // link-local (cloud metadata services live here)
        case (172, 16...31): return false
        case (192, 168): return false
        case (192, 0) where b[2] == 0 || b[2] == 2: return false  // IETF assignments, TEST-NET-1
        case (198, 18...19): return false  // benchmarking
        case (198, 51) where b[2] == 100: return false  // TEST-NET-2
        case (203, 0) where b[2] == 113: return false  // TEST-NET-3
        case (224...255, _): return false  // multicast, reserved, broadcast
        default: return true
        }
    }

    static func lookup(host: String, port: Int) async throws -> [SocketAddress] {
        // A literal address needs no lookup.
        if let literal = try? SocketAddress(ipAddress: host.trimmingCharacters(in: ["[", "]"]), port: port) {
            return [literal]
        }
        // getaddrinfo blocks: on the blocking pool, never the cooperative pool (docs/ARCHITECTURE.md, "Concurrency").
        return try await BlockingPool.run { () throws(NotifyError) -> [SocketAddress] in
            var hints = addrinfo()
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
            var result: UnsafeMutablePointer<addrinfo>?
            guard getaddrinfo(host, String(port), &hints, &result) == 0, let first = result else {
                throw NotifyError.invalidRequest("the push endpoint's host does not resolve")
            }
            defer { freeaddrinfo(result) }
            var addresses: [SocketAddress] = []
            var cursor: UnsafeMutablePointer<addrinfo>? = first
            while let info = cursor {
                if let sockaddr = info.pointee.ai_addr {
                    switch Int32(info.pointee.ai_family) {
                    case AF_INET:
                        let v4 = sockaddr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee }
                        addresses.append(SocketAddress(v4, host: host))
                    case AF_INET6:
                        let v6 = sockaddr.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee }
                        addresses.append(SocketAddress(v6, host: host))
                    default:
                        break
                    }
                }
                cursor = info.pointee.ai_next
            }
            return addresses
        }
    }
}
