import NIOCore

/// coffer-notify's one rule for loopback, used by `serve --host` (what it may listen on without TLS) and the push
/// endpoint guard (``PushEndpointPolicy``).
///
/// An address is loopback when it is in 127.0.0.0/8, is `::1`, or is the IPv4-mapped form (`::ffff:127.x.y.z`) of
/// one in 127.0.0.0/8. Nothing else is: not `::`, `0.0.0.0`, the IPv4-compatible `::127.0.0.1`, NAT64's
/// `64:ff9b::7f00:1`, nor an address written any way `inet_pton` refuses (`127.1`, `0x7f.0.0.1`, `2130706433`).
///
/// A host *name* is never looked up here. The one name that counts is `localhost` (any case, no trailing dot, no
/// label in front of it), and only where an operator names the host (``isLoopback(host:)``, for `serve --host`):
/// RFC 6761 §6.3 reserves it for loopback and the machine's own hosts file answers it. A host from a client (a push
/// endpoint's) is resolved by ``PushEndpointPolicy`` and each address it resolves to is judged by this rule, so
/// `localhost` there is loopback only because it resolves to 127.0.0.1 or ::1.
public enum Loopback {
    /// Whether `address` (4 bytes of IPv4, or 16 of IPv6, in network order) is a loopback address.
    public static func isLoopback(address: [UInt8]) -> Bool {
        switch address.count {
        case 4:
            return address[0] == 127
        case 16:
            if address.prefix(15).allSatisfy({ $0 == 0 }) { return address[15] == 1 }
            let mapped: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF]
            return Array(address.prefix(12)) == mapped && address[12] == 127
        default:
            return false
        }
    }

    /// Whether the socket address is loopback (never a Unix socket).
    public static func isLoopback(_ address: SocketAddress) -> Bool {
        PushEndpointPolicy.bytes(address).map { isLoopback(address: $0) } ?? false
    }

    /// Whether a host as an operator writes it is loopback: `localhost`, or a literal IPv4 or IPv6 address (parsed,
    /// never judged on a prefix of the text: `127.evil.example` is a name, not loopback) that ``isLoopback(address:)``
    /// accepts.
    public static func isLoopback(host: String) -> Bool {
        if host.lowercased() == "localhost" { return true }
        guard let bytes = CIDR.parse(host) else { return false }
        return isLoopback(address: bytes)
    }
}
