import CofferNotify
import NIOCore
import Testing

/// One loopback rule (`Loopback`) for `serve --host` and the push endpoint guard: the same answer for an address
/// whether it comes as an operator's text or as a socket address, for every form.
@Suite struct LoopbackTests {
    static let loopback = [
        "127.0.0.1", "127.0.0.0", "127.1.2.3", "127.255.255.255", "::1", "0:0:0:0:0:0:0:1", "0::1", "::0001",
        "::ffff:127.0.0.1", "::ffff:127.9.8.7", "0:0:0:0:0:ffff:7f00:1", "::FFFF:7F00:1",
    ]
    static let notLoopback = [
        "126.255.255.255", "128.0.0.1", "0.0.0.0", "10.0.0.1", "169.254.169.254", "::", "::2", "::ffff:10.0.0.1",
        "::ffff:128.0.0.1", "::127.0.0.1", "64:ff9b::7f00:1", "fe80::1", "1::1", "2001:db8::1", "::fffe:7f00:1",
    ]

    @Test(arguments: loopback)
    func loopbackAddressesAreLoopbackAsTextAndAsSocketAddresses(address: String) throws {
        #expect(Loopback.isLoopback(host: address))
        #expect(Loopback.isLoopback(try SocketAddress(ipAddress: address, port: 80)))
    }

    @Test(arguments: notLoopback)
    func otherAddressesAreNotLoopbackAsTextNorAsSocketAddresses(address: String) throws {
        #expect(!Loopback.isLoopback(host: address))
        #expect(!Loopback.isLoopback(try SocketAddress(ipAddress: address, port: 80)))
    }

    /// Only the name `localhost` is loopback as text; other names, a prefix of an address, forms `inet_pton`
    /// refuses (which `getaddrinfo` would read as 127.0.0.1) and bracketed or zoned text are not.
    @Test(arguments: [
        "127.evil.example", "127.0.0.1.nip.io", "localhost.", "localhost.evil.example", "evil.localhost", "127.1",
        "0x7f.0.0.1", "0177.0.0.1", "2130706433", "127.0.0.1 ", " 127.0.0.1", "[::1]", "::1%lo", "127.0.0.1/8", "",
    ])
    func namesAndOddFormsAreNotLoopback(host: String) {
        #expect(!Loopback.isLoopback(host: host))
    }

    @Test(arguments: ["localhost", "LOCALHOST", "LocalHost"])
    func theNameLocalhostIsLoopbackAsText(host: String) {
        #expect(Loopback.isLoopback(host: host))
    }

    @Test func rawAddressesOfOtherLengthsAreNotLoopback() {
        #expect(Loopback.isLoopback(address: [127, 0, 0, 1]))
        #expect(!Loopback.isLoopback(address: []))
        #expect(!Loopback.isLoopback(address: [127]))
        #expect(!Loopback.isLoopback(address: [127, 0, 0, 1, 0]))
        #expect(!Loopback.isLoopback(address: Array(repeating: 0, count: 15)))
    }

    /// The push endpoint guard uses the same rule: a loopback address passes only with the test flag, and never as
    /// a public address.
    @Test(arguments: loopback)
    func thePushGuardRefusesLoopbackUnlessFlagged(address: String) throws {
        let socket = try SocketAddress(ipAddress: address, port: 80)
        #expect(!PushEndpointPolicy().isAllowed(socket))
        #expect(PushEndpointPolicy(allowLoopbackForTests: true).isAllowed(socket))
    }
}
