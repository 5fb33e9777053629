import CofferTransport
import Foundation
import NIOCore
import NIOHTTP1
import NIOWebSocket

extension NotifyClient {
    /// The largest message read from the WebSocket: a full page of 100 pushes, as for the long poll.
    static let maximumSocketMessage = NotifyHTTP.maximumResponse

    /// `GET /v1/stream/ws`: holds one WebSocket to the service for as long as it stays open. Each page of pending
    /// pushes goes to `handle`, and the ids it returns are acked on the same socket, so a new mail costs the device
    /// no connection and no TLS handshake of its own (the long poll costs two: the poll and the ack).
    ///
    /// - Parameters:
    ///   - opened: Called once the socket is upgraded.
    ///   - handle: Handles one page and returns the ids to ack (a push is a hint: every id, handled or not).
    /// - Returns: `true` when the socket was held and then closed (by the service, or a silent peer); `false` when
    ///   the service has no WebSocket stream there (the caller long-polls with ``stream(token:wait:)``).
    /// - Throws: ``NotifyClientError/sessionRevoked`` when the service refuses the token; transport errors as
    ///   ``NotifyClientError/transport(_:)``; ``NotifyClientError/malformedResponse(_:)`` for a frame that is not
    ///   a page.
    public func holdStream(
        token: String,
        opened: @Sendable () -> Void = {},
        handle: @Sendable ([StreamMessage]) async -> [String]
    ) async throws(NotifyClientError) -> Bool {
        var headers = HTTPHeaders()
        headers.add(name: "Authorization", value: "Bearer \(token)")
        let configuration = try server.tlsConfiguration(timeout: timeout)
        let upgrade: PinnedWebSocket.Upgrade
        do throws(TransportError) {
            upgrade = try await PinnedWebSocket.connect(
                configuration,
                tls: server.tls,
                path: "/v1/stream/ws",
                headers: headers,
                maximumMessage: Self.maximumSocketMessage
            )
        } catch {
            throw .transport(error)
        }
        guard case .upgraded(let channel) = upgrade else {
            // No upgrade: a refused token or no WebSocket here. One plain request tells which (401 is thrown).
            _ = try await stream(token: token, wait: 0)
            return false
        }
        opened()
        let decoder = Self.decoder()
        do {
            try await channel.executeThenClose { inbound, outbound in
                for try await frame in inbound {
                    switch frame.opcode {
                    case .text:
                        guard
                            let page = try? decoder.decode(
                                StreamPage.self,
                                from: Data(frame.unmaskedData.readableBytesView)
                            )
                        else { throw NotifyClientError.malformedResponse("a stream frame") }
                        let ids = await handle(page.messages)
                        guard !ids.isEmpty else { continue }
                        let ack = try JSONEncoder().encode(["ids": ids])
                        try await outbound.write(PinnedWebSocket.text(Array(ack)))
                    case .connectionClose:
                        return
                    default:
                        throw NotifyClientError.malformedResponse("a stream frame that is not text")
                    }
                }
            }
        } catch let error as NotifyClientError {
            throw error
        } catch {
            throw .malformedResponse("the WebSocket stream ended (\(type(of: error)))")
        }
        return true
    }
}
