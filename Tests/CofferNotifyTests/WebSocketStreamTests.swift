import CofferNotify
import CofferPush
import Foundation
import Hummingbird
import HummingbirdTesting
import HummingbirdWSClient
import HummingbirdWSTesting
import HummingbirdWebSocket
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
