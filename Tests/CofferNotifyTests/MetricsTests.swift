import CofferNotify
import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

@Suite struct MetricsTests {
    /// The value of the series whose line starts with `series` (name and labels), if any.
    func value(_ text: String, _ series: String) -> Double? {
        text.split(separator: "\n").first { $0.hasPrefix(series + " ") }.flatMap { Double($0.split(separator: " ")[1]) }
    }

    @Test func requestsPushesAndSessionsAreCountedWithoutNames() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        try await harness.application.test(.router) { client in
            _ = try await client.register(
                Device().registration(user: "alice", password: "alice-pw", name: "device-name-canary")
            )
            _ = try await client.register(Device().registration(user: "alice", password: "alice-pw", name: "laptop"))
            let revoked = try await client.register(Device().registration(user: "bob", password: "bob-pw"))
            try await client.execute(
                uri: "/v1/sessions/\(revoked.sessionID)",
                method: .delete,
                headers: bearer(revoked.token)
            ) { _ in }
            try await client.execute(uri: "/v1/sessions", method: .get, headers: bearer("cnt1_not-a-token")) {
                response in
                #expect(response.status == .unauthorized)
            }
            try await client.execute(uri: "/v1/no/such/route/alice", method: .get) { _ in }
            let event =
                #"{"user":"alice","event":"messageNew","folder":"INBOX","imap-uid":7,"#
                + #""from":"sender-canary@example.org","subject":"subject-canary"}"#
            try await client.execute(
                uri: "/v1/events/dovecot",
                method: .put,
                headers: basic("dovecot", Harness.eventSecret),
                body: ByteBuffer(string: event)
            ) { response in #expect(response.status == .ok) }
        }
        let text = String(
            decoding: await harness.service.metrics.exposition(storage: harness.storage, now: Date()),
            as: UTF8.self
        )
        #expect(value(text, #"notify_requests_total{route="/v1/sessions",method="POST",status="201"}"#) == 3)
        #expect(value(text, #"notify_requests_total{route="/v1/sessions/{id}",method="DELETE",status="204"}"#) == 1)
        #expect(value(text, #"notify_requests_total{route="/v1/sessions",method="GET",status="401"}"#) == 1)
        #expect(!text.contains("no/such"))
        #expect(value(text, #"notify_pushes_total{result="queued"}"#) == 2)
        #expect(value(text, #"notify_pushes_total{result="failed"}"#) == 0)
        #expect(value(text, "notify_active_sessions") == 2)
        #expect(value(text, "notify_stream_waiters") == 0)
        #expect(value(text, #"notify_web_push_total{result="delivered"}"#) == 0)
        for secret in ["alice", "bob", "canary", "cnt1_", "sender", "subject", "INBOX"] {
            #expect(!text.contains(secret), "\(secret)")
        }
    }

    @Test func theAPIListenerDoesNotServeMetricsAndTheMetricsRouterDoes() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        try await harness.application.test(.router) { client in
            try await client.execute(uri: "/metrics", method: .get) { response in #expect(response.status == .notFound)
            }
        }
        try await Application(router: NotifyAPI.metricsRouter(service: harness.service)).test(.router) { client in
            try await client.execute(uri: "/metrics", method: .get) { response in
                #expect(response.status == .ok)
                #expect(String(buffer: response.body).contains("notify_active_sessions 0"))
            }
        }
    }

    @Test func aLongPollIsAWaiterWhileItWaits() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        try await harness.application.test(.router) { client in
            let phone = try await client.register(Device().registration(user: "alice", password: "alice-pw"))
            async let poll: Void = client.execute(uri: "/v1/stream?wait=10", method: .get, headers: bearer(phone.token))
            { _ in }
            var waiting: Double?
            for _ in 0..<200 {
                let text = String(decoding: harness.service.metrics.registry.emitToBuffer(), as: UTF8.self)
                waiting = value(text, "notify_stream_waiters")
                if waiting == 1 { break }
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(waiting == 1)
            _ = try await harness.service.handle(
                DovecotEvent(user: "alice", folder: "INBOX", uid: 1, from: "a@b", subject: "s")
            )
            try await poll
            let text = String(decoding: harness.service.metrics.registry.emitToBuffer(), as: UTF8.self)
            #expect(value(text, "notify_stream_waiters") == 0)
        }
    }
}
