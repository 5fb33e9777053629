import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOConcurrencyHelpers
import NIOCore
import ServiceLifecycle

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How many connections the service holds and for how long a connection may stay without a request.
public struct ConnectionLimits: Sendable, Equatable {
    /// From accept to the end of the first request's head (TLS handshake included): a connection that has not sent
    /// a whole request head by then is closed (10 s).
    public var headerTimeout: Duration = .seconds(10)
    /// Connections open at once from one client (one IPv4 address or one IPv6 /64) (64).
    public var perClient: Int = 64
    /// Connections open at once in all (accepting pauses at this many) (4096, and always below the descriptor
    /// limit; see ``fitting(descriptors:)``).
    public var total: Int = 4096

    /// The defaults.
    public init() {}

    /// These limits with ``total`` lowered to leave `reserve` descriptors for files, databases and outgoing
    /// connections below a limit of `descriptors`.
    public func fitting(descriptors: Int, reserve: Int = 128) -> ConnectionLimits {
        var limits = self
        limits.total = max(8, min(total, descriptors - reserve))
        return limits
    }
}

/// Connections open per client, shared by every connection's ``ConnectionGuardHandler``.
public final class ConnectionCounter: Sendable {
    private let counts = NIOLockedValueBox([String: Int]())
    /// Connections open at once from one client.
    public let perClient: Int
    /// Trusted proxies, which carry many clients' connections and are not capped.
    public let exempt: ClientResolver

    /// Creates a counter allowing `perClient` connections per client, any number from a trusted proxy.
    public init(perClient: Int, exempt: ClientResolver = ClientResolver()) {
        self.perClient = perClient
        self.exempt = exempt
    }

    /// Counts one more connection for `client`; false (and nothing counted) when it already has `perClient`.
    func open(_ client: String) -> Bool {
        counts.withLockedValue { counts in
            let current = counts[client, default: 0]
            guard current < perClient else { return false }
            counts[client] = current + 1
            return true
        }
    }

    /// Counts one connection of `client` closed.
    func close(_ client: String) {
        counts.withLockedValue { counts in
            let remaining = counts[client, default: 0] - 1
            counts[client] = remaining > 0 ? remaining : nil
        }
    }

    /// Connections open now from `client` (tests, metrics).
    package func count(_ client: String) -> Int { counts.withLockedValue { $0[client, default: 0] } }
}

/// The first handler of every accepted connection: closes it at once when its client already holds
/// ``ConnectionCounter/perClient`` connections, and closes it when no whole request head (the blank line that ends
/// it) has arrived ``ConnectionLimits/headerTimeout`` after accept. It sits in front of the HTTP decoder (behind TLS,
/// when there is TLS), sees bytes only, and passes every byte on unchanged; once a head has arrived it only counts.
final class ConnectionGuardHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let counter: ConnectionCounter
    private let headerTimeout: Duration
    private var started = false
    private var headSeen = false
    /// The last three bytes read, to find a CRLF CRLF split across reads.
    private var tail: [UInt8] = []
    private var deadline: Scheduled<Void>?

    init(counter: ConnectionCounter, headerTimeout: Duration) {
        self.counter = counter
        self.headerTimeout = headerTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { start(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        start(context)
        context.fireChannelActive()
    }

    private func start(_ context: ChannelHandlerContext) {
        guard !started else { return }
        started = true
        let peer = context.channel.remoteAddress
        if !counter.exempt.isTrusted(peer?.ipAddress ?? "") {
            let client = peer.map(ClientAddress.bucket) ?? "unknown"
            guard counter.open(client) else {
                context.close(promise: nil)
                return
            }
            let counter = self.counter
            context.channel.closeFuture.whenComplete { _ in counter.close(client) }
        }
        let nanoseconds =
            headerTimeout.components.seconds * 1_000_000_000 + headerTimeout.components.attoseconds
            / 1_000_000_000
        deadline = context.eventLoop.assumeIsolated().scheduleTask(in: .nanoseconds(nanoseconds)) {
            // Ended as a peer's half-close would end it: the HTTP upgrade handler then lets the connection go quietly
            // (a plain close made Hummingbird log an error for every silent connection, a log flood under attack).
            context.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
            context.close(promise: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if !headSeen {
            let buffer = unwrapInboundIn(data)
            if Self.endsHead(tail: &tail, buffer.readableBytesView) {
                headSeen = true
                deadline?.cancel()
                deadline = nil
                tail = []
            }
        }
        context.fireChannelRead(data)
    }

    func channelInactive(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
    }

    /// Whether `bytes`, after the `tail` of earlier reads, hold CRLF CRLF; keeps the last three bytes in `tail`.
    static func endsHead(tail: inout [UInt8], _ bytes: some Collection<UInt8>) -> Bool {
        let pattern: [UInt8] = [13, 10, 13, 10]
        var window = tail
        for byte in bytes {
            window.append(byte)
            if window.count > 4 { window.removeFirst() }
            if window == pattern { return true }
        }
        tail = Array(window.suffix(3))
        return false
    }
}

/// An accepted connection's setup with a ``ConnectionGuardHandler`` in front of `base`'s handlers.
public struct GuardedChildChannel<Base: ServerChildChannel>: ServerChildChannel {
    public typealias Value = Base.Value
    /// The HTTP (or WebSocket-upgrading) channel setup.
    public let base: Base
    /// The shared per-client counter.
    public let counter: ConnectionCounter
    /// See ``ConnectionLimits/headerTimeout``.
    public let headerTimeout: Duration

    /// Wraps `base`.
    public init(_ base: Base, counter: ConnectionCounter, headerTimeout: Duration) {
        self.base = base
        self.counter = counter
        self.headerTimeout = headerTimeout
    }

    /// Adds the guard, then `base`'s handlers.
    public func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(
                ConnectionGuardHandler(counter: counter, headerTimeout: headerTimeout)
            )
        }.flatMap {
            base.setup(channel: channel, logger: logger)
        }
    }

    /// `base`'s handling.
    public func handle(value: Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}

/// The client of a connection or request, as the rate limits and connection caps count it.
public enum ClientAddress {
    /// The IP address as text; an IPv6 address reduced to its /64 (`2001:db8:1:2::/64`), since one subscriber holds
    /// a whole /64; an IPv4-mapped IPv6 address as its IPv4 address.
    public static func bucket(_ address: SocketAddress) -> String {
        switch address {
        case .v4:
            return address.ipAddress ?? "unknown"
        case .v6(let v6):
            var raw = v6.address.sin6_addr
            let bytes = withUnsafeBytes(of: &raw) { Array($0) }
            return bucket(ipv6: bytes)
        default:
            return "unknown"
        }
    }

    /// ``bucket(_:)`` for text (a forwarded address); text that is not an IP address is returned unchanged.
    public static func bucket(text: String) -> String {
        if let v4 = IPv4Address(text) { return v4.text }
        if let v6 = IPv6Bytes(text) { return bucket(ipv6: v6) }
        return text
    }

    static func bucket(ipv6 bytes: [UInt8]) -> String {
        if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xff && bytes[11] == 0xff {
            return bytes[12..<16].map(String.init).joined(separator: ".")
        }
        let groups = stride(from: 0, to: 8, by: 2).map {
            String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16)
        }
        return groups.joined(separator: ":") + "::/64"
    }
}

/// A dotted IPv4 address.
struct IPv4Address {
    let bytes: [UInt8]
    init?(_ text: String) {
        var address = in_addr()
        guard inet_pton(AF_INET, text, &address) == 1 else { return nil }
        bytes = withUnsafeBytes(of: &address) { Array($0) }
    }
    var text: String { bytes.map(String.init).joined(separator: ".") }
}

/// The 16 bytes of an IPv6 address in text, or nil.
func IPv6Bytes(_ text: String) -> [UInt8]? {
    var address = in6_addr()
    guard inet_pton(AF_INET6, text, &address) == 1 else { return nil }
    return withUnsafeBytes(of: &address) { Array($0) }
}

/// The process's descriptor limit.
public enum DescriptorLimit {
    /// Raises the soft `RLIMIT_NOFILE` to the hard limit (or to 1,048,576 when the hard limit is unlimited) and
    /// returns the soft limit in force afterwards.
    public static func raise() -> Int {
        var limit = rlimit()
        #if os(Linux)
        let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
        #else
        let resource = RLIMIT_NOFILE
        #endif
        guard getrlimit(resource, &limit) == 0 else { return 1024 }
        let target = limit.rlim_max == rlim_t.max ? rlim_t(1 << 20) : limit.rlim_max
        if limit.rlim_cur < target {
            var raised = limit
            raised.rlim_cur = target
            if setrlimit(resource, &raised) == 0 { limit = raised }
        }
        return Int(clamping: limit.rlim_cur)
    }
}

/// The plain-HTTP server `serve` runs (without `--tls-cert`), for tools that run the service in process (the
/// bench): the API router, the WebSocket stream and the connection guard, with the same limits.
public enum NotifyServer {
    /// The HTTP/1.1 and WebSocket-upgrade channel behind a ``ConnectionGuardHandler``.
    public static func builder(
        service: NotifyService,
        limits: ConnectionLimits,
        idleTimeout: TimeAmount = .seconds(60)
    ) -> HTTPServerBuilder {
        let webSocketResponder = NotifyAPI.webSocketRouter(service: service).buildResponder()
        let configuration = HTTP1WebSocketUpgradeChannel.Configuration(
            http1: .init(idleTimeout: idleTimeout),
            ws: .init(maxFrameSize: 64 * 1024)
        )
        let counter = ConnectionCounter(perClient: limits.perClient, exempt: service.clients)
        let headerTimeout = limits.headerTimeout
        return HTTPServerBuilder { responder in
            GuardedChildChannel(
                HTTP1WebSocketUpgradeChannel(
                    responder: responder,
                    webSocketResponder: webSocketResponder,
                    configuration: configuration
                ),
                counter: counter,
                headerTimeout: headerTimeout
            )
        }
    }

    /// The service on `host`:`port` with the limits (``ConnectionLimits/total`` as the accept cap); `onRunning`
    /// gets the bound port. Run it with `runService()` or in a service group.
    public static func application(
        service: NotifyService,
        host: String,
        port: Int,
        limits: ConnectionLimits,
        onRunning: @escaping @Sendable (Int) async -> Void
    ) -> some Service {
        Application(
            router: NotifyAPI.router(service: service),
            server: builder(service: service, limits: limits),
            configuration: .init(
                address: .hostname(host, port: port),
                serverName: nil,
                availableConnectionsDelegate: MaximumAvailableConnections(limits.total)
            ),
            onServerRunning: { channel in await onRunning(channel.localAddress?.port ?? port) },
            logger: service.logger
        )
    }
}
