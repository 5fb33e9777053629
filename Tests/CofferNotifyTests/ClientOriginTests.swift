import CofferNotify
import Foundation
import Testing

/// Issue 24, findings 3 and 4 on the live binary: behind a trusted proxy each forwarded client has its own limits;
/// and every login used to reach Dovecot from the service's one address, so Dovecot's failure penalty (and its log)
/// fell on everyone. The service now names the client with IMAP ID before LOGIN, and the test Dovecot, which lists
/// 127.0.0.0/8 in `login_trusted_networks`, logs and penalises that address.
@Suite(.serialized) struct ClientOriginTests {
    /// A registration for `user` over a fresh connection from `source`, through `forwardedFor` when given.
    static func register(
        _ server: LiveNotify,
        user: String,
        password: String,
        from source: String,
        forwardedFor: String? = nil
    ) async throws -> Int? {
        let body = try JSONEncoder().encode(Device().registration(user: user, password: password))
        return try await server.post(
            "/v1/sessions",
            json: body,
            headers: forwardedFor.map { ["X-Forwarded-For: \($0)"] } ?? [],
            from: source
        )
    }

    @Test func theMailServerIsToldTheAddressAsWrittenAndOnlyThePeersPort() {
        let resolver = ClientResolver(trustedProxies: [CIDR("10.0.0.0/8")!])
        // The peer itself: its address and port; the limits count an IPv6 peer by its /64.
        let direct = resolver.origin(peer: "2001:db8:1:2::77", port: 40123, forwardedFor: ["198.51.100.9"])
        #expect(direct == ClientOrigin(address: "2001:db8:1:2::77", port: 40123))
        #expect(direct.bucket == "2001:db8:1:2::/64")
        // Through the proxy: the forwarded address, whole, and no port (the proxy's says nothing of the client).
        let forwarded = resolver.origin(peer: "10.1.2.3", port: 40124, forwardedFor: ["[2001:db8::5]"])
        #expect(forwarded == ClientOrigin(address: "2001:db8::5"))
        #expect(forwarded.bucket == "2001:db8:0:0::/64")
        #expect(resolver.origin(peer: "10.1.2.3", port: 1, forwardedFor: ["nonsense"]).address == "10.1.2.3")
        // The in-process router has no peer: nothing to pass on.
        #expect(!ClientOrigin(address: "unknown").isIPAddress)
        #expect(ClientOrigin(address: "192.0.2.1").isIPAddress)
    }

    @Test func behindTheTrustedProxyOneClientsAttemptsDoNotLimitAnother() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: NotifyBinary.path), "build coffer-notify first")
        // No --imap: every login that gets past the limits is answered 502 (no mail server), which is enough to
        // tell the limits' 429 apart.
        let server = try await LiveNotify(arguments: ["--trusted-proxy", "127.0.0.250/32"])
        defer { server.stop() }
        var stranger: [Int?] = []
        for _ in 0..<11 {
            stranger.append(
                try await Self.register(
                    server,
                    user: "alice",
                    password: "guess",
                    from: "127.0.0.250",
                    forwardedFor: "198.51.100.66"
                )
            )
        }
        // Ten attempts a minute per client, then 429.
        #expect(stranger.prefix(10).allSatisfy { $0 == 502 }, "\(stranger)")
        #expect(stranger.last == 429)
        // Another client through the same proxy is not limited: before the fix the proxy's one address was the
        // client, and this was 429 too.
        #expect(
            try await Self.register(
                server,
                user: "alice",
                password: "pw",
                from: "127.0.0.250",
                forwardedFor: "203.0.113.7"
            ) == 502
        )
        // A forwarded header from a peer that is not the trusted proxy is not believed: it counts as that peer.
        for _ in 0..<10 {
            _ = try await Self.register(
                server,
                user: "bob",
                password: "guess",
                from: "127.0.0.77",
                forwardedFor: "203.0.113.8"
            )
        }
        #expect(
            try await Self.register(
                server,
                user: "bob",
                password: "guess",
                from: "127.0.0.77",
                forwardedFor: "203.0.113.9"
            ) == 429
        )
        #expect(
            try await Self.register(
                server,
                user: "bob",
                password: "pw",
                from: "127.0.0.250",
                forwardedFor: "203.0.113.8"
            ) == 502
        )
    }

    /// Finding 3 on the binary with no option the binary before the fix lacked: every attempt counted in one bucket
    /// per user, so a stranger's requests from one address kept the user, from another, at 429.
    @Test func aStrangersAttemptsFromOneAddressDoNotLockTheUserOutFromAnother() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: NotifyBinary.path), "build coffer-notify first")
        // No --imap: every login that gets past the limits is answered 502, which tells the limits' 429 apart.
        let server = try await LiveNotify()
        defer { server.stop() }
        var stranger: [Int?] = []
        for _ in 0..<11 {
            stranger.append(try await Self.register(server, user: "alice", password: "guess", from: "127.0.0.66"))
        }
        #expect(stranger.prefix(10).allSatisfy { $0 == 502 }, "\(stranger)")
        #expect(stranger.last == 429)
        // The user, from another address: before the fix the user's shared bucket was full and this was 429.
        #expect(try await Self.register(server, user: "alice", password: "pw", from: "127.0.0.9") == 502)
        #expect(try await Self.register(server, user: "ALICE", password: "pw", from: "127.0.0.10") == 502)
    }

    /// The `imap-login` lines of Dovecot's log for `user`: logins and failed authentications.
    static func loginLines(_ dovecot: NotifyDovecot, user: String) throws -> [Substring] {
        let log = try String(contentsOfFile: "\(dovecot.server.dir)/dovecot.log", encoding: .utf8)
        return log.split(separator: "\n").filter { $0.contains("imap-login:") && $0.contains("user=<\(user)>") }
    }

    /// The `rip=` of a log line.
    static func remoteAddress(_ line: Substring) -> String? {
        guard let start = line.range(of: "rip=") else { return nil }
        return String(line[start.upperBound...].prefix { $0 != "," && $0 != " " })
    }

    @Test func dovecotSeesTheClientsAddressNotTheServices() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: NotifyBinary.path), "build coffer-notify first")
        let dovecot = try await NotifyDovecot.start()
        defer { dovecot.stop() }
        let server = try await LiveNotify(
            arguments: try dovecot.serveArguments() + ["--trusted-proxy", "127.0.0.250/32"]
        )
        defer { server.stop() }
        func register(password: String, from source: String, forwardedFor: String? = nil) async throws -> Int? {
            try await Self.register(
                server,
                user: NotifyDovecot.user,
                password: password,
                from: source,
                forwardedFor: forwardedFor
            )
        }
        // A stranger behind the proxy: two wrong passwords, from an IPv4 and an IPv6 address (the latter as written,
        // not as the /64 the service's own limits count).
        #expect(try await register(password: "wrong-1", from: "127.0.0.250", forwardedFor: "198.51.100.66") == 401)
        #expect(try await register(password: "wrong-2", from: "127.0.0.250", forwardedFor: "2001:db8::66") == 401)
        // The user, directly from another address: created.
        #expect(try await register(password: NotifyDovecot.password, from: "127.0.0.9") == 201)
        // Dovecot logs a failed authentication when the connection ends; give it a moment to write.
        var lines: [Substring] = []
        for _ in 0..<50 {
            lines = try Self.loginLines(dovecot, user: NotifyDovecot.user)
            if lines.count >= 3 { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        let addresses = lines.compactMap(Self.remoteAddress)
        // Before the change every line said rip=127.0.0.1, the service's own address.
        #expect(addresses.sorted() == ["127.0.0.9", "198.51.100.66", "2001:db8::66"], "\(lines)")
        let login = try #require(lines.first { $0.contains("Login: ") })
        #expect(Self.remoteAddress(login) == "127.0.0.9")
        #expect(server.process.isRunning)
    }

    /// Finding 3's mail-server half with no option the binary before the fix lacked: two direct clients, a stranger
    /// with a wrong password and the user with the right one, are two addresses in Dovecot's log (and its failure
    /// penalty), not the service's own.
    @Test func dovecotSeesEachDirectClientsAddress() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: NotifyBinary.path), "build coffer-notify first")
        let dovecot = try await NotifyDovecot.start()
        defer { dovecot.stop() }
        let server = try await LiveNotify(arguments: try dovecot.serveArguments())
        defer { server.stop() }
        let user = NotifyDovecot.user
        #expect(try await Self.register(server, user: user, password: "wrong", from: "127.0.0.66") == 401)
        #expect(try await Self.register(server, user: user, password: NotifyDovecot.password, from: "127.0.0.9") == 201)
        var lines: [Substring] = []
        for _ in 0..<50 {
            lines = try Self.loginLines(dovecot, user: user)
            if lines.count >= 2 { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        // Before the change both lines said rip=127.0.0.1.
        #expect(lines.compactMap(Self.remoteAddress).sorted() == ["127.0.0.66", "127.0.0.9"], "\(lines)")
        let login = try #require(lines.first { $0.contains("Login: ") })
        #expect(Self.remoteAddress(login) == "127.0.0.9")
    }
}
