import NIOCore
import NIOHTTP1
import NIOWebSocket

/// A WebSocket (RFC 6455) client over ``PinnedTLS`` (chain, host name and pins checked as for every other
/// connection), or over plain TCP when `tls` is false (callers allow that only to loopback): one connection that
/// stays open, so a stream of small messages costs no handshake each.
///
/// The pipeline keeps the time: a ping goes out after ``pingInterval`` without a write, and the connection is closed
/// after ``silenceLimit`` without a frame from the server (its pongs count), so a dead peer is noticed without any
/// task sleeping. Messages split over continuation frames are joined (at most `maximumMessage` bytes); every frame
/// this side sends is masked, as the RFC requires of clients.
public enum PinnedWebSocket {
    /// Seconds without a write after which a ping is sent.
    public static let pingInterval: TimeAmount = .seconds(25)
    /// Seconds without a frame from the server after which the connection is closed.
    public static let silenceLimit: TimeAmount = .seconds(70)

    /// The upgraded connection.
    public typealias Channel = NIOAsyncChannel<WebSocketFrame, WebSocketFrame>

    /// What the upgrade request got.
    public enum Upgrade: Sendable {
        /// The server switched protocols.
        case upgraded(Channel)
        /// The server answered without switching (an error status, or no WebSocket there); the caller asks again
        /// over plain HTTP to learn why.
        case refused
    }

    /// Connects, sends `GET path` with `headers` as a WebSocket upgrade, and returns the upgraded channel.
    ///
    /// - Throws: the ``TransportError`` of the connection or the handshake.
    public static func connect(
        _ configuration: PinnedTLSConfiguration,
        tls: Bool,
        path: String,
        headers: HTTPHeaders = [:],
        maximumMessage: Int
    ) async throws(TransportError) -> Upgrade {
        var headers = headers
        let host = configuration.serverName
        headers.replaceOrAdd(name: "Host", value: PinnedHTTP.hostHeader(configuration, tls: tls))
        headers.replaceOrAdd(name: "Content-Length", value: "0")
        let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: path, headers: headers)
        let configure: @Sendable (any NIOCore.Channel) -> EventLoopFuture<EventLoopFuture<Upgrade>> = { channel in
            channel.eventLoop.makeCompletedFuture {
                let upgrader = NIOTypedWebSocketClientUpgrader<Upgrade>(
                    maxFrameSize: maximumMessage,
                    upgradePipelineHandler: { channel, _ in
                        channel.eventLoop.makeCompletedFuture {
                            try channel.pipeline.syncOperations.addHandlers(
                                NIOWebSocketFrameAggregator(
                                    minNonFinalFragmentSize: 0,
                                    maxAccumulatedFrameCount: 1024,
                                    maxAccumulatedFrameSize: maximumMessage
                                ),
                                IdleStateHandler(readTimeout: silenceLimit, writeTimeout: pingInterval),
                                WebSocketKeepalive()
                            )
                            return Upgrade.upgraded(try Channel(wrappingChannelSynchronously: channel))
                        }
                    }
                )
                let upgrade = NIOTypedHTTPClientUpgradeConfiguration<Upgrade>(
                    upgradeRequestHead: head,
                    upgraders: [upgrader],
                    notUpgradingCompletionHandler: { channel in
                        channel.close(promise: nil)
                        return channel.eventLoop.makeSucceededFuture(.refused)
                    }
                )
                return try channel.pipeline.syncOperations.configureUpgradableHTTPClientPipeline(
                    configuration: .init(upgradeConfiguration: upgrade)
                )
            }
        }
        let negotiated: EventLoopFuture<Upgrade> =
            tls
            ? try await PinnedTLS.connect(configuration, configure: configure).output
            : try await PinnedTLS.connectPlaintext(configuration, configure: configure)
        do {
            return try await negotiated.get()
        } catch {
            throw .httpFailed(host: host, reason: "the WebSocket upgrade failed (\(type(of: error)))")
        }
    }

    /// A text frame as a client sends it: masked with a fresh key.
    public static func text(_ bytes: [UInt8]) -> WebSocketFrame {
        WebSocketFrame(fin: true, opcode: .text, maskKey: .random(), data: ByteBuffer(bytes: bytes))
    }
}

/// Answers the server's pings, pings the server when nothing was written for a while, and closes the connection
/// when the server has been silent too long (``IdleStateHandler``'s events).
final class WebSocketKeepalive: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias InboundOut = WebSocketFrame
    typealias OutboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .ping:
            let pong = WebSocketFrame(fin: true, opcode: .pong, maskKey: .random(), data: frame.unmaskedData)
            context.writeAndFlush(wrapOutboundOut(pong), promise: nil)
        case .pong:
            break
        default:
            context.fireChannelRead(data)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event as? IdleStateHandler.IdleStateEvent {
        case .write?:
            let ping = WebSocketFrame(fin: true, opcode: .ping, maskKey: .random(), data: ByteBuffer())
            context.writeAndFlush(wrapOutboundOut(ping), promise: nil)
        case .read?:
            context.close(promise: nil)
        default:
            context.fireUserInboundEventTriggered(event)
        }
    }
}
