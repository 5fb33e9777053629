import CofferNotify
import CofferPush
import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

@Suite struct APITests {
    @Test func healthNeedsNoToken() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        try await harness.application.test(.router) { client in
            try await client.execute(uri: "/v1/health", method: .get) { response in
                #expect(response.status == .ok)
                let decoded = try decode(HealthResponse.self, response.body)
                #expect(decoded.status == "ok")
            }
        }
    }

    @Test func registrationReturnsATokenThatListsAndRefreshes() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        try await harness.application.test(.router) { client in
            let phone = try await client.register(Device().registration(user: "alice", password: "alice-pw"))
            #expect(phone.token.hasPrefix("cnt1_"))
            let laptop = try await client.register(
                Device().registration(user: "alice", password: "alice-pw", name: "laptop")
            )
            try await client.execute(uri: "/v1/sessions", method: .get, headers: bearer(phone.token)) { response in
                #expect(response.status == .ok)
                let list = try decode(SessionList.self, response.body)
                #expect(list.sessions.map(\.deviceName).sorted() == ["laptop", "phone"])
                #expect(list.sessions.first { $0.current }?.id == phone.sessionID)
                #expect(!String(buffer: response.body).contains(laptop.token))
            }
            func refresh(_ token: String) async throws -> TokenResponse {
                try await client.execute(uri: "/v1/sessions/refresh", method: .post, headers: bearer(token)) {
                    response in
                    #expect(response.status == .ok)
                    return try decode(TokenResponse.self, response.body)
                }
            }
            func status(_ token: String) async throws -> HTTPResponse.Status {
                try await client.execute(uri: "/v1/sessions", method: .get, headers: bearer(token)) { $0.status }
            }
            // A refresh whose answer the device never got (killed, cut off): the old token still works and
            // refreshes again; the first answer's token is then dead.
            let lost = try await refresh(phone.token)
            #expect(lost.sessionID == phone.sessionID && lost.token != phone.token)
            #expect(try await status(phone.token) == .ok)
            let refreshed = try await refresh(phone.token)
            #expect(refreshed.sessionID == phone.sessionID)
            #expect(try await status(lost.token) == .unauthorized)
            // The old token works until the new one is first used, then never again.
            #expect(try await status(phone.token) == .ok)
            #expect(try await status(refreshed.token) == .ok)
            #expect(try await status(phone.token) == .unauthorized)
            #expect(try await status(refreshed.token) == .ok)
            // Another session's token is no previous token of this one.
            #expect(try await status(laptop.token) == .ok)
        }
    }

    @Test func wrongPasswordIsRefusedAndStoresNothing() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        try await harness.application.test(.router) { client in
            let request = Device().registration(user: "alice", password: "bob-pw")
            try await client.execute(uri: "/v1/sessions", method: .post, headers: jsonHeaders, body: json(request)) {
                response in
                #expect(response.status == .unauthorized)
                #expect(String(buffer: response.body).contains("refused this user name and password"))
            }
        }
        #expect(try await harness.storage.allSessions().isEmpty)
    }

    @Test(arguments: [
        "/v1/sessions", "/v1/stream", "/v1/sessions/refresh", "/v1/stream/ack", "/v1/sessions/some-id",
    ])
    func protectedRoutesRefuseMissingWrongAndMalformedTokens(path: String) async throws {
        let harness = try Harness()
        defer { harness.remove() }
        let method: HTTPRequest.Method =
            switch path {
            case "/v1/sessions/refresh", "/v1/stream/ack": .post
            case "/v1/sessions/some-id": .delete
            default: .get
            }
        try await harness.application.test(.router) { client in
            let registered = try await client.register(Device().registration(user: "alice", password: "alice-pw"))
            let wrong: [HTTPFields] = [
                [:], bearer(SessionToken().text), bearer("cnt1_short"), bearer(registered.token + "x"),
                [.authorization: "Basic " + Data("alice:alice-pw".utf8).base64EncodedString()],
                [.authorization: registered.token],
            ]
            for headers in wrong {
                try await client.execute(uri: path, method: method, headers: headers, body: json(["ids": [String]()])) {
                    response in
                    #expect(response.status == .unauthorized)
                    #expect(response.body.readableBytes == 0)
                }
            }
        }
    }

    @Test func aRevokedSessionGets401AndOnlyOwnSessionsCanBeRevoked() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        try await harness.application.test(.router) { client in
            let alicePhone = try await client.register(Device().registration(user: "alice", password: "alice-pw"))
            let aliceLaptop = try await client.register(Device().registration(user: "alice", password: "alice-pw"))
            let bob = try await client.register(Device().registration(user: "bob", password: "bob-pw"))
            // Bob can neither revoke nor see Alice's session: it does not exist for him.
            try await client.execute(
                uri: "/v1/sessions/\(alicePhone.sessionID)",
                method: .delete,
                headers: bearer(bob.token)
            ) { response in
                #expect(response.status == .notFound)
            }
            try await client.execute(uri: "/v1/sessions", method: .get, headers: bearer(bob.token)) { response in
                let list = try decode(SessionList.self, response.body)
                #expect(list.sessions.map(\.id) == [bob.sessionID])
            }
            try await client.execute(uri: "/v1/sessions", method: .get, headers: bearer(alicePhone.token)) {
                response in
                #expect(response.status == .ok)
            }
            // Alice revokes her phone from her laptop.
            try await client.execute(
                uri: "/v1/sessions/\(alicePhone.sessionID)",
                method: .delete,
                headers: bearer(aliceLaptop.token)
            ) { response in
                #expect(response.status == .noContent)
            }
            for path in ["/v1/sessions", "/v1/stream"] {
                try await client.execute(uri: path, method: .get, headers: bearer(alicePhone.token)) { response in
                    #expect(response.status == .unauthorized)
                    #expect(response.body.readableBytes == 0)
                }
            }
            try await client.execute(uri: "/v1/sessions/refresh", method: .post, headers: bearer(alicePhone.token)) {
                response in
                #expect(response.status == .unauthorized)
            }
            try await client.execute(uri: "/v1/sessions", method: .get, headers: bearer(aliceLaptop.token)) {
                response in
                let list = try decode(SessionList.self, response.body)
                #expect(list.sessions.first { $0.id == alicePhone.sessionID }?.revoked == true)
            }
        }
    }

    @Test func anExpiredTokenGets401() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("coffer-notify-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let storage = try SQLiteNotifyStorage(
            path: folder.appendingPathComponent("n.sqlite").path,
            masterKey: testMasterKey
        )
        let clock = Clock()
        var settings = NotifyService.Settings(eventSecret: [1])
        settings.sessionLifetime = 3600
        let service = NotifyService(
            storage: storage,
            authenticator: FakeAuthenticator(passwords: ["alice": "alice-pw"]),
            settings: settings,
            now: { clock.now }
        )
        try await Application(router: NotifyAPI.router(service: service)).test(.router) { client in
            let registered = try await client.register(Device().registration(user: "alice", password: "alice-pw"))
            try await client.execute(uri: "/v1/sessions", method: .get, headers: bearer(registered.token)) {
                #expect($0.status == .ok)
            }
            clock.advance(3601)
            try await client.execute(uri: "/v1/sessions", method: .get, headers: bearer(registered.token)) {
                #expect($0.status == .unauthorized)
            }
        }
    }

    @Test(arguments: [
        ("not json", "/v1/sessions"), (#"{"user":"alice"}"#, "/v1/sessions"), ("[1,2", "/v1/sessions"),
        (
            #"{"user":"alice","password":"alice-pw","deviceName":"x","pushPublicKey":"AAAA","pushAuthSecret":"AAAA"}"#,
            "/v1/sessions"
        ),
    ])
    func badJSONIsA400WithASentence(body: String, path: String) async throws {
        let harness = try Harness()
        defer { harness.remove() }
        try await harness.application.test(.router) { client in
            try await client.execute(uri: path, method: .post, headers: jsonHeaders, body: ByteBuffer(string: body)) {
                response in
                #expect(response.status == .badRequest)
                let text = String(buffer: response.body)
                #expect(text.contains(#""message""#))
                #expect(!text.contains("alice-pw"))
            }
        }
        #expect(try await harness.storage.allSessions().isEmpty)
    }

    @Test func aHugeBodyIsRefusedWith413() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        let huge = ByteBuffer(string: #"{"user":""# + String(repeating: "a", count: 200_000) + #""}"#)
        try await harness.application.test(.router) { client in
            try await client.execute(uri: "/v1/sessions", method: .post, headers: jsonHeaders, body: huge) {
                #expect($0.status == .contentTooLarge)
            }
            try await client.execute(
                uri: "/v1/events/dovecot",
                method: .post,
                headers: basic("dovecot", Harness.eventSecret),
                body: huge
            ) {
                #expect($0.status == .contentTooLarge)
            }
        }
    }

    @Test func aSecondSessionCannotReuseAPushKey() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        let device = Device()
        try await harness.application.test(.router) { client in
            _ = try await client.register(device.registration(user: "alice", password: "alice-pw"))
            try await client.execute(
                uri: "/v1/sessions",
                method: .post,
                headers: jsonHeaders,
                body: json(device.registration(user: "bob", password: "bob-pw"))
            ) { response in
                #expect(response.status == .conflict)
            }
        }
    }

    @Test func registrationIsRateLimitedPerUserAndPerAddress() async throws {
        let harness = try Harness(registrationsPerMinute: 3)
        defer { harness.remove() }
        try await harness.application.test(.router) { client in
            var statuses: [HTTPResponse.Status] = []
            for _ in 0..<4 {
                try await client.execute(
                    uri: "/v1/sessions",
                    method: .post,
                    headers: jsonHeaders,
                    body: json(Device().registration(user: "alice", password: "wrong"))
                ) { statuses.append($0.status) }
            }
            #expect(statuses == [.unauthorized, .unauthorized, .unauthorized, .tooManyRequests])
            // The right password does not get past the limit either.
            try await client.execute(
                uri: "/v1/sessions",
                method: .post,
                headers: jsonHeaders,
                body: json(Device().registration(user: "alice", password: "alice-pw"))
            ) { #expect($0.status == .tooManyRequests) }
        }
        #expect(try await harness.storage.allSessions().isEmpty)
    }

    @Test func theLimiterCountsEachKeyInItsOwnWindow() async {
        let clock = Clock()
        let limiter = RateLimiter(limit: 2, window: 60, now: { clock.now })
        #expect(await limiter.allow(["address:a", "user:x"]))
        #expect(await limiter.allow(["address:a", "user:y"]))
        #expect(await limiter.allow(["address:a", "user:z"]) == false)  // the address is over
        #expect(await limiter.allow(["address:b", "user:x"]))
        #expect(await limiter.allow(["address:c", "user:x"]) == false)  // the user is over
        clock.advance(61)
        #expect(await limiter.allow(["address:a", "user:x"]))
    }
}

/// A clock tests move by hand.
final class Clock: @unchecked Sendable {
    private let lock = NSLock()
    private var date = Date(timeIntervalSince1970: 1_800_000_000)
    var now: Date { lock.withLock { date } }
    func advance(_ seconds: TimeInterval) { lock.withLock { date += seconds } }
}
