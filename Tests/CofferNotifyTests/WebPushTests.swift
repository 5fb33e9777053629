import CofferNotify
import CofferPush
import CofferTesting
import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import Testing

@Suite struct PushEndpointPolicyTests {
    @Test(arguments: [
        "127.0.0.1", "127.8.9.1", "10.0.0.1", "172.16.0.1", "172.31.255.255", "192.168.1.1", "169.254.169.254",
        "100.64.0.1", "0.0.0.0", "224.0.0.1", "255.255.255.255", "192.0.2.1", "198.18.0.1", "::1", "::", "fe80::1",
        "fc00::1", "fd12:3456::1", "ff02::1", "::ffff:127.0.0.1", "::ffff:10.1.2.3", "64:ff9b::a00:1", "2001:db8::1",
        "2002:a00:1::1",
    ])
    func nonPublicAddressesAreRefused(address: String) throws {
        let socket = try SocketAddress(ipAddress: address, port: 443)
        #expect(!PushEndpointPolicy().isAllowed(socket))
    }

    @Test(arguments: ["8.8.8.8", "1.1.1.1", "172.32.0.1", "100.128.0.1", "2a00:1450:4001::1", "::ffff:8.8.8.8"])
    func publicAddressesAreAllowed(address: String) throws {
        #expect(PushEndpointPolicy().isAllowed(try SocketAddress(ipAddress: address, port: 443)))
    }

    @Test func loopbackOnlyWithTheTestFlagAndPrivateNeverEvenThen() throws {
        let flagged = PushEndpointPolicy(allowLoopbackForTests: true)
        #expect(flagged.isAllowed(try SocketAddress(ipAddress: "127.0.0.1", port: 80)))
        #expect(flagged.isAllowed(try SocketAddress(ipAddress: "::1", port: 80)))
        #expect(!flagged.isAllowed(try SocketAddress(ipAddress: "10.0.0.1", port: 80)))
        #expect(!flagged.isAllowed(try SocketAddress(ipAddress: "169.254.169.254", port: 80)))
    }

    @Test(arguments: [
        "http://push.example.org/x", "ftp://push.example.org/x", "https://user:pw@push.example.org/x", "push/x",
        "https:///x", "https://[::1]/x", "https://127.0.0.1/x", "https://169.254.169.254/latest/meta-data",
        "https://10.1.2.3:8443/x", "https://localhost/x",
    ])
    func badEndpointsAreRefusedBeforeAnyConnection(url: String) async {
        await #expect(throws: NotifyError.self) { _ = try await PushEndpointPolicy().resolve(url) }
    }

    @Test func httpIsRefusedForANonLoopbackHostEvenWithTheTestFlag() async {
        await #expect(throws: NotifyError.self) {
            _ = try await PushEndpointPolicy(allowLoopbackForTests: true).resolve("http://8.8.8.8/x")
        }
    }
}

/// What the loopback push service received.
actor Received {
    struct Push: Sendable {
        var path: String
        var headers: [String: String]
        var body: [UInt8]
    }

    var pushes: [Push] = []
    func add(_ push: Push) { pushes.append(push) }

    /// A push service that keeps every push posted to `/push/{id}` here and accepts it (201).
    nonisolated func router() -> Router<BasicRequestContext> {
        let router = Router()
        router.post("/push/{id}") { request, context -> HTTPResponse.Status in
            let body = try await request.body.collect(upTo: 8192)
            var headers: [String: String] = [:]
            for field in request.headers { headers[field.name.canonicalName.lowercased()] = field.value }
            await self.add(.init(path: request.uri.path, headers: headers, body: Array(buffer: body)))
            return .created
        }
        return router
    }
}

@Suite struct WebPushDeliveryTests {
    @Test func aPushIsPostedWithVAPIDTTLAndUrgencyAndTheDeviceOpensIt() async throws {
        let received = Received()
        try await Application(router: received.router()).test(.live) { pushService in
            let port = try #require(pushService.port)
            let harness = try Harness()
            defer { harness.remove() }
            let signer = try VAPID.Signer(privateKey: P256.Signing.PrivateKey(), subject: "mailto:ops@coffer.test")
            var logger = Logger(label: "coffer-notify-tests")
            logger.logLevel = .warning
            let service = NotifyService(
                storage: harness.storage,
                authenticator: FakeAuthenticator(passwords: ["alice": "alice-pw"]),
                settings: NotifyService.Settings(eventSecret: Harness.eventSecret),
                logger: logger,
                webPush: WebPushSender(signer: signer, policy: PushEndpointPolicy(allowLoopbackForTests: true))
            )
            let device = Device()
            try await Application(router: NotifyAPI.router(service: service)).test(.router) { client in
                try await client.execute(uri: "/v1/vapid", method: .get) { response in
                    let key = try decode(VAPIDKeyResponse.self, response.body)
                    #expect(Base64URL.decode(key.publicKey) == signer.publicKey)
                }
                var registration = device.registration(user: "alice", password: "alice-pw")
                registration.pushEndpoint = "http://127.0.0.1:\(port)/push/device-1"
                let session = try await client.register(registration)
                try await client.execute(
                    uri: "/v1/events/dovecot",
                    method: .put,
                    headers: basic("dovecot", Harness.eventSecret),
                    body: EventTests.event()
                ) { #expect($0.status == .ok) }
                // Delivered after the event's answer.
                await service.deliveries.drain()
                // Accepted by the push service, so it left the stream.
                try await client.execute(uri: "/v1/stream", method: .get, headers: bearer(session.token)) {
                    let stream = try decode(StreamResponse.self, $0.body)
                    #expect(stream.messages.isEmpty)
                }
            }
            let pushes = await received.pushes
            #expect(pushes.count == 1)
            let push = try #require(pushes.first)
            #expect(push.path == "/push/device-1")
            #expect(push.headers["content-encoding"] == "aes128gcm")
            #expect(push.headers["urgency"] == "normal")
            #expect(Int(push.headers["ttl"] ?? "") ?? 0 > 0)
            let authorization = try #require(push.headers["authorization"])
            let verified = try VAPID.verify(
                authorization: authorization,
                audience: "http://127.0.0.1:\(port)",
                now: Date()
            )
            #expect(verified.publicKey == signer.publicKey)
            #expect(push.body.count == 4096)
            let message = try JSONDecoder().decode(PushMessage.self, from: Data(try device.keys.open(push.body)))
            #expect(message.subject == EventTests.subject)

            // The same push through Python: http_ece opens the body, CofferPushTests/oracle.py's verify_vapid (with
            // cryptography, not CofferPush) checks the header.
            try #require(FileManager.default.isExecutableFile(atPath: NotifyOracleTests.python), "run scripts/setup.sh")
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("coffer-notify-\(UUID())")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: folder) }
            let job: [String: Any] = [
                "ua_private": Base64URL.encode(device.keys.privateKey.rawRepresentation),
                "auth": device.keys.authSecret.withUnsafeBytes { Base64URL.encode($0) },
                "body": Base64URL.encode(push.body), "authorization": authorization,
                "audience": "http://127.0.0.1:\(port)",
                "oracle": TestServers.repoRoot.appendingPathComponent("Tests/CofferPushTests").path,
            ]
            let input = folder.appendingPathComponent("job.json")
            try JSONSerialization.data(withJSONObject: job).write(to: input)
            let script = """
                import base64, json, sys, time
                job = json.load(open(sys.argv[1]))
                sys.path.insert(0, job["oracle"])
                import http_ece
                from cryptography.hazmat.primitives.asymmetric import ec
                from oracle import b64d, verify_vapid
                verify_vapid(job["authorization"], job["audience"], int(time.time()))
                ua = ec.derive_private_key(int.from_bytes(b64d(job["ua_private"]), "big"), ec.SECP256R1())
                text = http_ece.decrypt(b64d(job["body"]), private_key=ua, auth_secret=b64d(job["auth"]),
                                        version="aes128gcm")
                print(json.loads(text)["subject"])
                """
            let result = try runCommand([NotifyOracleTests.python, "-c", script, input.path])
            #expect(result.code == 0, "\(result.output)")
            #expect(result.output.trimmingCharacters(in: .whitespacesAndNewlines) == EventTests.subject)
        }
    }

    @Test func aRefusedOrUnreachableEndpointLeavesThePushOnTheStream() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        let signer = try VAPID.Signer(privateKey: P256.Signing.PrivateKey(), subject: "mailto:ops@coffer.test")
        var logger = Logger(label: "coffer-notify-tests")
        logger.logLevel = .critical
        let service = NotifyService(
            storage: harness.storage,
            authenticator: FakeAuthenticator(passwords: ["alice": "alice-pw"]),
            settings: NotifyService.Settings(eventSecret: Harness.eventSecret),
            logger: logger,
            webPush: WebPushSender(signer: signer)
        )
        try await Application(router: NotifyAPI.router(service: service)).test(.router) { client in
            // http is refused at registration.
            var plain = Device().registration(user: "alice", password: "alice-pw")
            plain.pushEndpoint = "http://push.example.org/x"
            try await client.execute(uri: "/v1/sessions", method: .post, headers: jsonHeaders, body: json(plain)) {
                #expect($0.status == .badRequest)
            }
            // An https URL to loopback passes the form check but is never connected to.
            var looped = Device().registration(user: "alice", password: "alice-pw")
            looped.pushEndpoint = "https://127.0.0.1:9/x"
            let session = try await client.register(looped)
            try await client.execute(
                uri: "/v1/events/dovecot",
                method: .put,
                headers: basic("dovecot", Harness.eventSecret),
                body: EventTests.event()
            ) { #expect($0.status == .ok) }
            await service.deliveries.drain()
            try await client.execute(uri: "/v1/stream", method: .get, headers: bearer(session.token)) {
                let stream = try decode(StreamResponse.self, $0.body)
                #expect(stream.messages.count == 1)
            }
        }
    }

    @Test func withoutWebPushAnEndpointIsRefusedAndTheVAPIDRouteIsAbsent() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        try await harness.application.test(.router) { client in
            var registration = Device().registration(user: "alice", password: "alice-pw")
            registration.pushEndpoint = "https://push.example.org/x"
            try await client.execute(
                uri: "/v1/sessions",
                method: .post,
                headers: jsonHeaders,
                body: json(registration)
            ) { #expect($0.status == .badRequest) }
            try await client.execute(uri: "/v1/vapid", method: .get) { #expect($0.status == .notFound) }
        }
    }
}

/// Web Push against a push service written in Python (Tests/CofferNotifyTests/push_receiver.py): it decrypts every
/// push with `http_ece` and verifies its VAPID header with `cryptography`, and answers as each test device's path
/// asks, so the retries, the `Retry-After`, and a gone subscription are seen from outside.
@Suite struct WebPushRetryTests {
    @Test func retriesOn503And429HonourRetryAfterStopAtAnAckAndAGoneSubscriptionLosesItsEndpoint() async throws {
        let python = NotifyOracleTests.python
        try #require(FileManager.default.isExecutableFile(atPath: python), "run scripts/setup.sh")
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("coffer-push-receiver-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let flaky = Device()
        let gone = Device()
        let busy = Device()
        let acked = Device()
        func entry(_ device: Device, _ answers: [Int], retryAfter: Int = 1) -> [String: Any] {
            [
                "ua_private": Base64URL.encode(device.keys.privateKey.rawRepresentation),
                "auth": device.keys.authSecret.withUnsafeBytes { Base64URL.encode($0) }, "answers": answers,
                "retry_after": retryAfter,
            ]
        }
        let config: [String: Any] = [
            "oracle": TestServers.repoRoot.appendingPathComponent("Tests/CofferPushTests").path,
            "devices": [
                "/flaky": entry(flaky, [503, 201]), "/gone": entry(gone, [410]), "/busy": entry(busy, [429]),
                // Acked from the stream during its 10 s Retry-After: never posted again.
                "/acked": entry(acked, [503], retryAfter: 10),
            ],
        ]
        try JSONSerialization.data(withJSONObject: config).write(to: folder.appendingPathComponent("config.json"))
        let output = folder.appendingPathComponent("receiver.log")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        let receiver = Process()
        receiver.executableURL = URL(fileURLWithPath: python)
        receiver.arguments = [
            TestServers.repoRoot.appendingPathComponent("Tests/CofferNotifyTests/push_receiver.py").path,
            folder.appendingPathComponent("config.json").path,
        ]
        receiver.standardOutput = try FileHandle(forWritingTo: output)
        receiver.standardError = receiver.standardOutput
        try receiver.run()
        defer {
            kill(receiver.processIdentifier, SIGKILL)
            receiver.waitUntilExit()
        }
        @Sendable func lines() -> [String] {
            (try? String(contentsOf: output, encoding: .utf8))?.split(separator: "\n").map(String.init) ?? []
        }
        var port: Int?
        for _ in 0..<300 where port == nil {
            port = lines().first { $0.hasPrefix("listening ") }.flatMap { Int($0.dropFirst(10)) }
            if port == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        let receiverPort = try #require(port, "the receiver did not start: \(lines())")

        let harness = try Harness()
        defer { harness.remove() }
        var logger = Logger(label: "coffer-notify-tests")
        logger.logLevel = .critical
        var settings = NotifyService.Settings(eventSecret: Harness.eventSecret)
        settings.webPushRetryDelay = .milliseconds(20)
        let service = NotifyService(
            storage: harness.storage,
            authenticator: FakeAuthenticator(passwords: ["alice": "alice-pw"]),
            settings: settings,
            logger: logger,
            webPush: WebPushSender(
                signer: try VAPID.Signer(privateKey: P256.Signing.PrivateKey(), subject: "mailto:ops@coffer.test"),
                policy: PushEndpointPolicy(allowLoopbackForTests: true)
            )
        )
        try await Application(router: NotifyAPI.router(service: service)).test(.router) { client in
            var sessions: [String: String] = [:]
            for (name, device) in [("flaky", flaky), ("gone", gone), ("busy", busy), ("acked", acked)] {
                var registration = device.registration(user: "alice", password: "alice-pw", name: name)
                registration.pushEndpoint = "http://127.0.0.1:\(receiverPort)/\(name)"
                sessions[name] = try await client.register(registration).token
            }
            try await client.execute(
                uri: "/v1/events/dovecot",
                method: .put,
                headers: basic("dovecot", Harness.eventSecret),
                body: EventTests.event()
            ) { #expect($0.status == .ok) }
            // The "acked" device reads and acks its push from the stream once the push service refused it.
            for _ in 0..<200 where !lines().contains(where: { $0.contains(#""/acked""#) }) {
                try await Task.sleep(for: .milliseconds(25))
            }
            let ackedToken = try #require(sessions["acked"])
            let waiting = try await client.execute(uri: "/v1/stream", method: .get, headers: bearer(ackedToken)) {
                try decode(StreamResponse.self, $0.body).messages.map(\.id)
            }
            var ackHeaders = bearer(ackedToken)
            ackHeaders[.contentType] = "application/json"
            try await client.execute(
                uri: "/v1/stream/ack",
                method: .post,
                headers: ackHeaders,
                body: try json(AckRequest(ids: waiting))
            ) { #expect($0.status == .ok) }
            await service.deliveries.drain()

            struct Record: Decodable {
                var path: String
                var status: Int
                var subject: String?
                var error: String?
                var time: Double
            }
            let records = try lines().filter { $0.hasPrefix("{") }.map {
                try JSONDecoder().decode(Record.self, from: Data($0.utf8))
            }
            // Every push that reached Python opened with http_ece and carried a valid VAPID header.
            #expect(records.allSatisfy { $0.error == nil && $0.subject == EventTests.subject }, "\(records)")
            let flakyRecords = records.filter { $0.path == "/flaky" }
            #expect(flakyRecords.map(\.status) == [503, 201])
            // The second post waited for the 503's "Retry-After: 1", not the 20 ms of the settings (a lower bound,
            // which no slow machine can break).
            if flakyRecords.count == 2 { #expect(flakyRecords[1].time - flakyRecords[0].time >= 0.9) }
            #expect(records.filter { $0.path == "/gone" }.map(\.status) == [410])
            #expect(records.filter { $0.path == "/busy" }.map(\.status) == [429, 429, 429])
            #expect(records.filter { $0.path == "/acked" }.map(\.status) == [503])

            func pending(_ name: String) async throws -> Int {
                try await client.execute(uri: "/v1/stream", method: .get, headers: bearer(sessions[name]!)) {
                    try decode(StreamResponse.self, $0.body).messages.count
                }
            }
            // Delivered on the second try, so it left the stream; the others wait there for the device.
            #expect(try await pending("flaky") == 0)
            #expect(try await pending("gone") == 1)
            #expect(try await pending("busy") == 1)
            let endpoints = try await harness.storage.sessions(user: "alice").map { ($0.deviceName, $0.pushEndpoint) }
            #expect(endpoints.first { $0.0 == "gone" }?.1 == nil)
            #expect(endpoints.first { $0.0 == "busy" }?.1 != nil)
            let metrics = service.metrics.registry.emitToString()
            for (result, count) in [("delivered", 1), ("gone", 1), ("retry", 4), ("failed", 1)] {
                #expect(metrics.contains(#"notify_web_push_total{result="\#(result)"} \#(count)"#), "\(result)")
            }
        }
    }
}
