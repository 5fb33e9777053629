import CofferNotify
import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

/// Issue 24, findings 3 and 4: failed logins slow only the client that made them (per user and client, with a
/// growing back-off, before the mail server is asked); a trusted proxy's `X-Forwarded-For` names the client; an
/// IPv6 client is its /64.
@Suite struct LoginLimitTests {
    func forwarded(_ address: String) -> HTTPFields {
        var headers = jsonHeaders
        headers[.init("X-Forwarded-For")!] = address
        return headers
    }

    /// A service behind a trusted proxy on 127.0.0.0/8, three free failures per user, then a minute's back-off.
    static func behindTheProxy(
        _ authenticator: CountingAuthenticator,
        registrationsPerMinute: Int = 100
    ) throws -> Harness {
        try Harness(registrationsPerMinute: registrationsPerMinute, authenticator: authenticator) { settings in
            settings.trustedProxies = [CIDR("127.0.0.0/8")!]
            settings.loginPolicy.freeFailuresPerUser = 3
            settings.loginPolicy.baseDelay = 60
        }
    }

    @Test func aStrangersWrongPasswordsThroughTheProxyDoNotLockTheUserOut() async throws {
        let authenticator = CountingAuthenticator(passwords: ["alice": "alice-pw"])
        let harness = try Self.behindTheProxy(authenticator, registrationsPerMinute: 5)
        defer { harness.remove() }
        try await harness.application.test(.live) { client in
            var statuses: [HTTPResponse.Status] = []
            for _ in 0..<8 {
                try await client.execute(
                    uri: "/v1/sessions",
                    method: .post,
                    headers: forwarded("198.51.100.66"),
                    body: json(Device().registration(user: "alice", password: "wrong"))
                ) { statuses.append($0.status) }
            }
            // Three failures, then back-off: the mail server was asked three times only.
            #expect(statuses.prefix(3).allSatisfy { $0 == .unauthorized })
            #expect(statuses.dropFirst(3).allSatisfy { $0 == .tooManyRequests })
            #expect(authenticator.count == 3)
            // The user, from another client behind the same proxy, registers; before the fix the shared per-user
            // bucket and the proxy's one address answered 429.
            try await client.execute(
                uri: "/v1/sessions",
                method: .post,
                headers: forwarded("203.0.113.7"),
                body: json(Device().registration(user: "alice", password: "alice-pw"))
            ) { #expect($0.status == .created) }
            // The stranger's own right guess stays in back-off from its address.
            try await client.execute(
                uri: "/v1/sessions",
                method: .post,
                headers: forwarded("198.51.100.66"),
                body: json(Device().registration(user: "alice", password: "alice-pw"))
            ) { #expect($0.status == .tooManyRequests) }
        }
    }

    /// Signs in to `/account` as a browser behind the trusted proxy at `address` would: opens the page for its CSRF
    /// cookie, posts the form, and on success opens the signed-in page; returns the sign-in's status and that page.
    func signInToAccount(
        _ client: some TestClientProtocol,
        user: String,
        password: String,
        from address: String
    ) async throws -> (HTTPResponse.Status, String?) {
        var browser = Browser()
        func headers() -> HTTPFields {
            var fields = browser.headers
            fields[.init("X-Forwarded-For")!] = address
            return fields
        }
        let csrf = try await client.execute(uri: "/account", method: .get, headers: headers()) { response in
            browser.take(response)
            return try #require(csrfField(String(buffer: response.body)))
        }
        let status = try await client.execute(
            uri: "/account/sign-in",
            method: .post,
            headers: headers(),
            body: ByteBuffer(string: "csrf=\(csrf)&user=\(user)&password=\(password)")
        ) { response in
            browser.take(response)
            return response.status
        }
        guard status == .seeOther else { return (status, nil) }
        let page = try await client.execute(uri: "/account", method: .get, headers: headers()) {
            String(buffer: $0.body)
        }
        return (status, page)
    }

    /// The `/account` page takes the same path: a stranger's wrong passwords for alice from one client put that
    /// client in back-off, while alice signs in from another.
    @Test func aStrangersWrongPasswordsDoNotKeepTheUserOutOfTheAccountPage() async throws {
        let authenticator = CountingAuthenticator(passwords: ["alice": "alice-pw"])
        let harness = try Self.behindTheProxy(authenticator)
        defer { harness.remove() }
        try await harness.application.test(.live) { client in
            var statuses: [HTTPResponse.Status] = []
            for index in 0..<8 {
                let (status, _) = try await signInToAccount(
                    client,
                    user: "alice",
                    password: "wrong-\(index)",
                    from: "198.51.100.66"
                )
                statuses.append(status)
            }
            // The stranger is throttled: three failures reach the mail server, then 429 without asking it.
            #expect(statuses.prefix(3).allSatisfy { $0 == .unauthorized }, "\(statuses)")
            #expect(statuses.dropFirst(3).allSatisfy { $0 == .tooManyRequests }, "\(statuses)")
            #expect(authenticator.count == 3)
            // Alice, from another client, signs in and sees her page.
            let (status, page) = try await signInToAccount(
                client,
                user: "alice",
                password: "alice-pw",
                from: "203.0.113.7"
            )
            #expect(status == .seeOther, "alice's sign-in from another client answered \(status)")
            #expect(page?.contains("/account/sign-out") == true)
            #expect(authenticator.count == 4)
            // The stranger's own right guess stays in back-off from its address.
            let (guess, _) = try await signInToAccount(
                client,
                user: "alice",
                password: "alice-pw",
                from: "198.51.100.66"
            )
            #expect(guess == .tooManyRequests)
        }
    }

    @Test func forwardedForFromAnUntrustedPeerIsIgnored() async throws {
        let harness = try Harness(registrationsPerMinute: 3)
        defer { harness.remove() }
        try await harness.application.test(.live) { client in
            var statuses: [HTTPResponse.Status] = []
            for index in 0..<5 {
                try await client.execute(
                    uri: "/v1/sessions",
                    method: .post,
                    headers: forwarded("192.0.2.\(index)"),
                    body: json(Device().registration(user: "bob", password: "wrong"))
                ) { statuses.append($0.status) }
            }
            // A fresh X-Forwarded-For per request does not make a fresh client: the peer is over its attempts.
            #expect(statuses == [.unauthorized, .unauthorized, .unauthorized, .tooManyRequests, .tooManyRequests])
        }
    }

    @Test func theBackOffDoublesAndFailuresLeaveTheWindow() async {
        let clock = Clock()
        var policy = LoginThrottle.Policy()
        policy.freeFailuresPerUser = 2
        policy.baseDelay = 1
        policy.window = 600
        let throttle = LoginThrottle(policy: policy, now: { clock.now })
        #expect(await throttle.admit(user: "alice", client: "a"))
        await throttle.failed(user: "alice", client: "a")
        #expect(await throttle.admit(user: "alice", client: "a"))
        await throttle.failed(user: "alice", client: "a")
        // Two failures: 1 s; three: 2 s; four: 4 s.
        #expect(await throttle.delay(user: "alice", client: "a") == 1)
        #expect(await throttle.admit(user: "alice", client: "a") == false)
        #expect(await throttle.admit(user: "alice", client: "b"))
        #expect(await throttle.admit(user: "bob", client: "a"))
        clock.advance(1)
        #expect(await throttle.admit(user: "alice", client: "a"))
        await throttle.failed(user: "alice", client: "a")
        #expect(await throttle.delay(user: "alice", client: "a") == 2)
        clock.advance(2)
        await throttle.failed(user: "alice", client: "a")
        #expect(await throttle.delay(user: "alice", client: "a") == 4)
        // The window slides: ten minutes later nothing is counted.
        clock.advance(600)
        #expect(await throttle.delay(user: "alice", client: "a") == 0)
        // A success clears the pair.
        await throttle.failed(user: "alice", client: "a")
        await throttle.failed(user: "alice", client: "a")
        #expect(await throttle.admit(user: "alice", client: "a") == false)
        await throttle.succeeded(user: "alice", client: "a")
        #expect(await throttle.admit(user: "alice", client: "a"))
    }

    @Test func oneClientSprayingManyUsersIsSlowedToo() async {
        let clock = Clock()
        var policy = LoginThrottle.Policy()
        policy.freeFailuresPerClient = 4
        let throttle = LoginThrottle(policy: policy, now: { clock.now })
        for index in 0..<4 { await throttle.failed(user: "user\(index)", client: "a") }
        #expect(await throttle.admit(user: "user9", client: "a") == false)
        #expect(await throttle.admit(user: "user9", client: "b"))
    }

    @Test func anIPv6ClientIsItsSlash64() {
        #expect(ClientAddress.bucket(text: "2001:db8:1:2::1") == "2001:db8:1:2::/64")
        #expect(ClientAddress.bucket(text: "2001:db8:1:2:ffff:ffff:ffff:ffff") == "2001:db8:1:2::/64")
        #expect(ClientAddress.bucket(text: "2001:db8:1:3::1") != ClientAddress.bucket(text: "2001:db8:1:2::1"))
        #expect(ClientAddress.bucket(text: "::ffff:192.0.2.1") == "192.0.2.1")
        #expect(ClientAddress.bucket(text: "192.0.2.1") == "192.0.2.1")
    }

    @Test func theResolverBelievesOnlyTrustedProxies() {
        let resolver = ClientResolver(trustedProxies: [CIDR("10.0.0.0/8")!, CIDR("fd00::/8")!])
        // The last hop that is not a proxy: what the client wrote before it is not believed.
        #expect(resolver.client(peer: "10.1.2.3", forwardedFor: ["6.6.6.6, 198.51.100.9"]) == "198.51.100.9")
        #expect(resolver.client(peer: "10.1.2.3", forwardedFor: ["198.51.100.9, 10.9.9.9"]) == "198.51.100.9")
        #expect(resolver.client(peer: "10.1.2.3", forwardedFor: ["2001:db8::5"]) == "2001:db8:0:0::/64")
        #expect(resolver.client(peer: "fd00::1", forwardedFor: ["[2001:db8::5]"]) == "2001:db8:0:0::/64")
        #expect(resolver.client(peer: "198.51.100.1", forwardedFor: ["203.0.113.5"]) == "198.51.100.1")
        #expect(resolver.client(peer: "10.1.2.3", forwardedFor: ["not an address"]) == "10.1.2.3")
        #expect(resolver.client(peer: "10.1.2.3", forwardedFor: []) == "10.1.2.3")
        #expect(CIDR("10.0.0.0/33") == nil)
        #expect(CIDR("example.org") == nil)
        #expect(CIDR("192.0.2.0/24")?.contains("192.0.2.255") == true)
        #expect(CIDR("192.0.2.0/24")?.contains("192.0.3.0") == false)
    }
}
