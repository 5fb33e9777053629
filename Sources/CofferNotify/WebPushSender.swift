import CofferPush
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// Sends a sealed push to an RFC 8030 push service: `POST` to the subscription URL with `TTL`, `Urgency`,
/// `Content-Encoding: aes128gcm` and a VAPID (RFC 8292) `Authorization`, over TLS with the system trust store, to the
/// address ``PushEndpointPolicy`` checked.
public struct WebPushSender: Sendable {
    /// The service's VAPID key and contact.
    public let signer: VAPID.Signer
    /// The URL rules.
    public let policy: PushEndpointPolicy
    /// The limit for connecting and for the whole exchange.
    public var timeout: TimeAmount = .seconds(15)

    /// Creates a sender.
    public init(signer: VAPID.Signer, policy: PushEndpointPolicy = PushEndpointPolicy()) {
        self.signer = signer
        self.policy = policy
    }

    /// Posts one body; returns the push service's HTTP status (201 means accepted).
    ///
    /// - Throws: `NotifyError.invalidRequest` when the endpoint breaks the URL rules, `.pushServiceUnavailable` when
    ///   the exchange fails (the sentence says how).
    public func send(
        _ body: [UInt8],
        to endpoint: String,
        ttl: Int,
        urgency: String = "normal",
        now: Date
    ) async throws(NotifyError) -> Int {
        let resolved = try await policy.resolve(endpoint)
        let audience: String
        let authorization: String
        do {
            audience = try VAPID.audience(for: resolved.url)
            authorization = try signer.authorization(audience: audience, now: now)
        } catch {
            throw .invalidRequest("the push endpoint has no origin for VAPID")
        }
        var path = resolved.url.path.isEmpty ? "/" : resolved.url.path
        if let query = resolved.url.query { path += "?" + query }
        var headers = HTTPHeaders()
        let defaultPort = resolved.tls ? 443 : 80
        headers.add(
            name: "Host",
            value: resolved.port == defaultPort ? resolved.host : "\(resolved.host):\(resolved.port)"
        )
        headers.add(name: "TTL", value: String(max(0, ttl)))
        headers.add(name: "Urgency", value: urgency)
        headers.add(name: "Content-Encoding", value: "aes128gcm")
        headers.add(name: "Content-Type", value: "application/octet-stream")
        headers.add(name: "Content-Length", value: String(body.count))
        headers.add(name: "Authorization", value: authorization)
        headers.add(name: "Connection", value: "close")
        let head = HTTPRequestHead(version: .http1_1, method: .POST, uri: path, headers: headers)
        do {
            return try await exchange(resolved, head: head, body: body)
        } catch let error as NotifyError {
            throw error
        } catch {
            throw .pushServiceUnavailable(
                "the push service at \(resolved.host) could not be reached (\(type(of: error)))"
            )
        }
    }

    private func exchange(
        _ resolved: PushEndpointPolicy.Resolved,
        head: HTTPRequestHead,
        body: [UInt8]
    ) async throws
        -> Int
    {
        let timeout = self.timeout
        let sslContext = resolved.tls ? try NIOSSLContext(configuration: .makeClientConfiguration()) : nil
        let isLiteral = (try? SocketAddress(ipAddress: resolved.host, port: 0)) != nil
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(timeout)
            .connect(to: resolved.address) { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let sslContext {
                        try channel.pipeline.syncOperations.addHandler(
                            NIOSSLClientHandler(context: sslContext, serverHostname: isLiteral ? nil : resolved.host)
                        )
                    }
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    channel.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
                    return try NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>(
                        wrappingChannelSynchronously: channel
                    )
                }
            }
        return try await channel.executeThenClose { inbound, outbound in
            try await outbound.write(.head(head))
            try await outbound.write(.body(.byteBuffer(ByteBuffer(bytes: body))))
            try await outbound.write(.end(nil))
            var status = 0
            for try await part in inbound {
                switch part {
                case .head(let response): status = Int(response.status.code)
                case .body: continue
                case .end: return status
                }
            }
            return status
        }
    }
}
