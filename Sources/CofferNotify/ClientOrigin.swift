/// Where a login comes from: the client's IP address as written (an IPv6 address whole, not its /64) and, when the
/// client is the TCP peer rather than someone a trusted proxy forwarded, its port.
///
/// The limits count ``bucket``; the mail server is told ``address`` and ``port`` (IMAP `ID` `x-originating-ip`,
/// `x-originating-port`), so its own penalty for failed logins falls on the client, not on the service.
public struct ClientOrigin: Sendable, Equatable, CustomStringConvertible {
    /// The IP address as text, or `unknown` (the in-process test router has no peer).
    public var address: String
    /// The client's TCP port, when the service saw it (nil for an address a proxy forwarded).
    public var port: Int?

    /// Creates an origin.
    public init(address: String, port: Int? = nil) {
        self.address = address
        self.port = port
    }

    /// What rate limits and connection caps count: ``ClientAddress/bucket(text:)`` of the address.
    public var bucket: String { ClientAddress.bucket(text: address) }

    /// Whether ``address`` is an IPv4 or IPv6 address, which alone is passed on to the mail server.
    public var isIPAddress: Bool { CIDR.parse(address) != nil }

    /// `address` or `address` and port.
    public var description: String { port.map { "\(address) port \($0)" } ?? address }
}
