import CofferNotify
import CofferPush
import Foundation
import Hummingbird
import HummingbirdTesting
import HummingbirdWSClient
import HummingbirdWSTesting
import HummingbirdWebSocket
import NIOCore
import Testing

@Suite struct WebSocketStreamTests {
    func application(_ harness: Harness) -> some ApplicationProtocol {
        Application(
            router: NotifyAPI.router(service: harness.service),
            server: .http1WebSocketUpgrade(webSocketRouter: NotifyAPI.webSocketRouter(service: harness.service))
        )
    }

    @Test func pushesArriveOnTheSocketOnceAndAcksDeleteThem() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        let device = Device()
        try await application(harness).test(.live) { client in
            let phone = try await client.register(device.registration(user: "alice", password: "alice-pw"))
            // One push queued before the socket opens, one after.
            _ = try await harness.service.handle(
                DovecotEvent(user: "alice", folder: "INBOX", uid: 1, from: "a@example.org", subject: "first")
            )
            let service = harness.service
            let received = SocketReceived()
            var configuration = WebSocketClientConfiguration()
            configuration.additionalHeaders = [.authorization: "Bearer \(phone.token)"]
            try await client.ws("/v1/stream/ws", configuration: configuration) { inbound, outbound, _ in
                var iterator = inbound.messages(maxSize: 1 << 20).makeAsyncIterator()
                for round in 0..<2 {
                    guard case .text(let text) = try await iterator.next() else { return }
                    let decoder = JSONDecoder()
                    decoder.dateDecodingStrategy = .iso8601
                    let batch = try decoder.decode(StreamResponse.self, from: Data(text.utf8))
                    for message in batch.messages {
                        let body = try #require(Base64URL.decode(message.body))
                        await received.add(message.id, String(decoding: try device.keys.open(body), as: UTF8.self))
                    }
                    try await outbound.write(
                        .text(
                            String(
                                decoding: try JSONEncoder().encode(["ids": batch.messages.map(\.id)]),
                                as: UTF8.self
                            )
                        )
                    )
                    if round == 0 {
                        _ = try await service.handle(
                            DovecotEvent(
                                user: "alice",
                                folder: "INBOX",
                                uid: 2,
                                from: "b@example.org",
                                subject: "second"
                            )
                        )
                    }
                }
                try await outbound.close(.normalClosure, reason: nil)
            }
            let texts = await received.texts
            #expect(texts.count == 2)
            #expect(texts.first?.contains("first") == true)
            #expect(texts.last?.contains("second") == true)
            #expect(Set(await received.ids).count == 2)
            // Acked over the socket: nothing is left for the long poll.
            try await client.execute(uri: "/v1/stream", method: .get, headers: bearer(phone.token)) { response in
                let left = try decode(StreamResponse.self, response.body)
                #expect(left.messages.isEmpty)
            }
        }
    }

    /// A revocation from the /account page wakes the session's open socket, which the service then closes, as a
    /// revocation through the API does (both go through `NotifyService.revokeSession(id:)`). Made while the socket
    /// waits for pushes, so only the wake (the signal's generation moves on) ends it before its 30 s wait.
    @Test func aRevocationFromTheAccountPageClosesTheSessionsSocket() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        try await application(harness).test(.live) { client in
            let phone = try await client.register(Device().registration(user: "alice", password: "alice-pw"))
            let (browser, csrf) = try await client.signIn(user: "alice", password: "alice-pw")
            var configuration = WebSocketClientConfiguration()
            configuration.additionalHeaders = [.authorization: "Bearer \(phone.token)"]
            let generations = Generations()
            try await client.ws("/v1/stream/ws", configuration: configuration) { inbound, _, _ in
                try #require(try await harness.waitForStreamWaiters(1) == 1)
                let before = await harness.service.signal.generation(sessionID: phone.sessionID)
                try await client.revokeOnAccountPage(phone.sessionID, browser: browser, csrf: csrf)
                let after = await harness.service.signal.generation(sessionID: phone.sessionID)
                await generations.record(before: before, after: after)
                // The service closes the socket: the inbound stream ends without a message.
                for try await message in inbound.messages(maxSize: 1 << 20) {
                    Issue.record("a message came on a revoked session's socket: \(message)")
                }
            }
            let before = try #require(await generations.before)
            #expect(await generations.after == before + 1)
            #expect(try await harness.waitForStreamWaiters(0) == 0)
            #expect(try await harness.storage.session(id: phone.sessionID)?.revoked == true)
        }
    }

    @Test func aBadTokenIsRefusedBeforeTheUpgrade() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        try await application(harness).test(.live) { client in
            var configuration = WebSocketClientConfiguration()
            configuration.additionalHeaders = [
                .authorization: "Bearer cnt1_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
            ]
            await #expect(throws: (any Error).self) {
                try await client.ws("/v1/stream/ws", configuration: configuration) { _, _, _ in
                    Issue.record("the socket opened with a bad token")
                }
            }
            await #expect(throws: (any Error).self) {
                try await client.ws("/v1/stream/ws") { _, _, _ in Issue.record("the socket opened without a token") }
            }
        }
    }
}

actor SocketReceived {
    var ids: [String] = []
    var texts: [String] = []
    func add(_ id: String, _ text: String) {
        ids.append(id)
        texts.append(text)
    }
}

/// The session's signal generation before and after a revocation, as the socket's handler saw them.
actor Generations {
    var before: UInt64?
    var after: UInt64?
    func record(before: UInt64, after: UInt64) {
        self.before = before
        self.after = after
    }
}
