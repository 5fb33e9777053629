import CofferPush
import Foundation
import Hummingbird
import HummingbirdWebSocket
import NIOCore

/// The request context of the WebSocket upgrade router.
public struct NotifyWebSocketContext: RequestContext, WebSocketRequestContext {
    /// Hummingbird's per-request storage.
    public var coreContext: CoreRequestContextStorage
    /// The upgraded connection's handler.
    public let webSocket: WebSocketHandlerReference<Self>

    /// Creates the context for one upgrade request.
    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        webSocket = .init()
    }
}

extension NotifyAPI {
    /// The WebSocket router: `GET /v1/stream/ws` with `Authorization: Bearer cnt1_…` upgrades to a WebSocket on which
    /// the service sends each pending message once, as a text frame holding the long poll's JSON
    /// (`{"messages":[{"id","body","created"}]}`), and the client sends acks as `{"ids":[…]}` (≤ 1000, frames ≤ 64 KiB).
    /// A bad token is 401 before any upgrade; a revoked session's socket is closed.
    public static func webSocketRouter(service: NotifyService) -> Router<NotifyWebSocketContext> {
        let router = Router(context: NotifyWebSocketContext.self)
        router.ws(
            "/v1/stream/ws",
            shouldUpgrade: { request, _ in
                _ = try await session(request, service)
                return .upgrade([:])
            },
            onUpgrade: { inbound, outbound, context in
                guard let session = try? await session(context.request, service) else { return }
                // At most ``NotifyService/Settings/maximumStreamsPerSession`` streams per session, long polls included.
                guard service.streams.enter(session.id, limit: service.settings.maximumStreamsPerSession) else {
                    return
                }
                defer { service.streams.leave(session.id) }
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        for try await message in inbound.messages(maxSize: 64 * 1024) {
                            guard case .text(let text) = message,
                                let ack = try? JSONDecoder().decode(AckRequest.self, from: Data(text.utf8)),
                                ack.ids.count <= 1000
                            else { return }
                            _ = try await service.storage.ack(sessionID: session.id, ids: ack.ids)
                        }
                    }
                    group.addTask { try await sendPending(to: outbound, session: session, service: service) }
                    // Either side ending (the client closed, a bad frame, the session revoked) ends the socket.
                    try await group.next()
                    group.cancelAll()
                }
            }
        )
        return router
    }

    private static func session(
        _ request: Request,
        _ service: NotifyService
    ) async throws(NotifyError)
        -> NotifySession
    {
        guard let header = request.headers[.authorization], header.prefix(7).lowercased() == "bearer " else {
            throw .unauthorized
        }
        return try await service.authenticate(bearer: header.dropFirst(7))
    }

    private static func sendPending(
        to outbound: WebSocketOutboundWriter,
        session: NotifySession,
        service: NotifyService
    ) async throws {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        var sent = Set<String>()
        while !Task.isCancelled {
            let seen = await service.signal.generation(sessionID: session.id)
            let pending = try await service.storage.pending(
                sessionID: session.id,
                now: service.now(),
                limit: service.settings.streamBatch
            )
            let fresh = pending.filter { !sent.contains($0.id) }
            // Forget ids that are gone (acked or expired), so the set stays as small as the queue.
            sent.formIntersection(pending.map(\.id))
            if !fresh.isEmpty {
                let response = StreamResponse(
                    messages: fresh.map { .init(id: $0.id, body: Base64URL.encode($0.body), created: $0.created) }
                )
                try await outbound.write(.text(String(decoding: try encoder.encode(response), as: UTF8.self)))
                sent.formUnion(fresh.map(\.id))
                continue
            }
            service.metrics.streamWaiters.increment()
            await service.signal.wait(sessionID: session.id, after: seen, timeout: .seconds(30))
            service.metrics.streamWaiters.decrement()
            guard let current = try await service.storage.session(id: session.id), current.isLive(at: service.now())
            else { return }
        }
    }
}
