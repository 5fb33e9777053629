import CofferNotify
import CofferPush
import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

/// The generic webhook (`POST /v1/events`): a signed event becomes the same pushes as Dovecot's; anything unsigned,
/// mis-signed, stale or replayed is 401 with no body and queues nothing.
@Suite struct WebhookTests {
    static let body = Array(
        #"{"user":"alice","folder":"Archive","uidValidity":7,"uid":99,"from":"Ann <ann@example.org>","subject":"Über"}"#
            .utf8
    )

    static func headers(body: [UInt8], timestamp: Int64, secret: [UInt8] = Harness.eventSecret) -> HTTPFields {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        headers[.init(Webhook.timestampHeader)!] = String(timestamp)
        headers[.init(Webhook.signatureHeader)!] = Webhook.signature(
            body: body,
            timestamp: timestamp,
            secret: secret
        )
        return headers
    }

    static var now: Int64 { Int64(Date().timeIntervalSince1970) }

    @Test func aSignedEventIsPushedToTheUsersSessionsAndAReplayIsRefused() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        let device = Device()
        try await harness.application.test(.router) { client in
            let session = try await client.register(device.registration(user: "alice", password: "alice-pw"))
            let headers = Self.headers(body: Self.body, timestamp: Self.now)
            try await client.execute(
                uri: "/v1/events",
                method: .post,
                headers: headers,
                body: ByteBuffer(bytes: Self.body)
            ) { response in
                #expect(response.status == .ok)
                let decoded = try decode(CountResponse.self, response.body)
                #expect(decoded.count == 1)
            }
            // The same request again, within the window: refused, nothing queued.
            try await client.execute(
                uri: "/v1/events",
                method: .post,
                headers: headers,
                body: ByteBuffer(bytes: Self.body)
            ) { response in
                #expect(response.status == .unauthorized)
                #expect(response.body.readableBytes == 0)
            }
            let stream = try await client.execute(uri: "/v1/stream", method: .get, headers: bearer(session.token)) {
                try decode(StreamResponse.self, $0.body)
            }
            #expect(stream.messages.count == 1)
            let first = try #require(stream.messages.first)
            let body = try #require(Base64URL.decode(first.body))
            let message = try JSONDecoder().decode(PushMessage.self, from: Data(try device.keys.open(body)))
            #expect(message.subject == "Über")
            #expect(message.from == "Ann <ann@example.org>")
            #expect(message.folder == "Archive")
            #expect(message.uid == 99)
            #expect(message.uidValidity == 7)
        }
    }

    @Test func unsignedWronglySignedStaleAndFutureEventsAreRefused() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        try await harness.application.test(.router) { client in
            _ = try await client.register(Device().registration(user: "alice", password: "alice-pw"))
            let now = Self.now
            var cases: [(String, HTTPFields, [UInt8])] = []
            var unsigned = HTTPFields()
            unsigned[.contentType] = "application/json"
            cases.append(("no signature", unsigned, Self.body))
            cases.append(
                ("another secret", Self.headers(body: Self.body, timestamp: now, secret: Array("x".utf8)), Self.body)
            )
            // Signed for one body, sent with another (the user changed).
            let other = Array(
                String(decoding: Self.body, as: UTF8.self).replacingOccurrences(of: "alice", with: "bob").utf8
            )
            cases.append(("another body", Self.headers(body: Self.body, timestamp: now), other))
            // An hour beyond the window: under load the test's clock reading and the service's are seconds apart.
            cases.append(("stale", Self.headers(body: Self.body, timestamp: now - Webhook.window - 3600), Self.body))
            cases.append(("future", Self.headers(body: Self.body, timestamp: now + Webhook.window + 3600), Self.body))
            cases.append(("lowest time", Self.headers(body: Self.body, timestamp: .min), Self.body))
            cases.append(("highest time", Self.headers(body: Self.body, timestamp: .max), Self.body))
            var garbled = Self.headers(body: Self.body, timestamp: now)
            garbled[.init(Webhook.timestampHeader)!] = "soon"
            cases.append(("time not a number", garbled, Self.body))
            for (name, headers, body) in cases {
                try await client.execute(
                    uri: "/v1/events",
                    method: .post,
                    headers: headers,
                    body: ByteBuffer(bytes: body)
                ) { response in
                    #expect(response.status == .unauthorized, "\(name)")
                    #expect(response.body.readableBytes == 0, "\(name)")
                }
            }
            #expect(try await harness.storage.allSessions().count == 1)
            let session = try #require(try await harness.storage.allSessions().first)
            #expect(try await harness.storage.pending(sessionID: session.id, now: Date(), limit: 10).isEmpty)
        }
    }

    @Test func aSignedBodyThatIsNotAnEventIs400AndAHugeOne413() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        try await harness.application.test(.router) { client in
            for body in [Array(#"{"folder":"INBOX"}"#.utf8), Array("not json".utf8), Array(#"{"user":7}"#.utf8)] {
                try await client.execute(
                    uri: "/v1/events",
                    method: .post,
                    headers: Self.headers(body: body, timestamp: Self.now),
                    body: ByteBuffer(bytes: body)
                ) { response in
                    #expect(response.status == .badRequest)
                }
            }
            let huge = Array(repeating: UInt8(ascii: " "), count: 65 * 1024)
            try await client.execute(
                uri: "/v1/events",
                method: .post,
                headers: Self.headers(body: huge, timestamp: Self.now),
                body: ByteBuffer(bytes: huge)
            ) { response in
                #expect(response.status == .contentTooLarge)
            }
        }
    }

    /// Python's `hmac` signs as docs/NOTIFY.md tells a sender to, and `urllib` posts to the live service.
    @Test func aSenderWrittenFromTheDocsInPythonIsAccepted() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        let device = Device()
        try await harness.application.test(.live) { client in
            let port = try #require(client.port)
            let session = try await client.register(device.registration(user: "alice", password: "alice-pw"))
            let script = """
                import hmac, hashlib, json, sys, time, urllib.request
                secret = sys.argv[2].encode()
                body = json.dumps({"user": "alice", "folder": "INBOX", "uid": 5, "subject": "from python"}).encode()
                timestamp = str(int(time.time()))
                mac = hmac.new(secret, timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
                request = urllib.request.Request(sys.argv[1], data=body, method="POST", headers={
                    "Content-Type": "application/json", "Coffer-Timestamp": timestamp,
                    "Coffer-Signature": "v1=" + mac})
                print(urllib.request.urlopen(request).read().decode())
                """
            let result = try await runProcess(
                "/usr/bin/env",
                [
                    "python3", "-c", script, "http://127.0.0.1:\(port)/v1/events",
                    String(decoding: Harness.eventSecret, as: UTF8.self),
                ]
            )
            #expect(result.status == 0, "\(result.output)")
            #expect(result.output.contains(#""count":1"#))
            let stream = try await client.execute(uri: "/v1/stream", method: .get, headers: bearer(session.token)) {
                try decode(StreamResponse.self, $0.body)
            }
            let first = try #require(stream.messages.first)
            let body = try #require(Base64URL.decode(first.body))
            let message = try JSONDecoder().decode(PushMessage.self, from: Data(try device.keys.open(body)))
            #expect(message.subject == "from python")
        }
    }
}
