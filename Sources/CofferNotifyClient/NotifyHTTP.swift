import CofferTransport
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// One HTTP/1.1 exchange per connection (`Connection: close`) with the notification service over
/// CofferTransport's pinned TLS, or plain TCP to a loopback address.
struct NotifyHTTP: Sendable {
    /// The largest answer read: a full stream page is 100 pushes of 4096 bytes in base64url plus JSON.
    static let maximumResponse = 2 * 1024 * 1024

    let server: NotifyServer
    /// The limit for connecting, for the handshake, and for the whole exchange (a long poll adds its wait).
    var timeout: Int64 = 20

    struct Response: Sendable {
        var status: Int
        var body: [UInt8]
    }

    func request(
        _ method: HTTPMethod,
        _ path: String,
        token: String? = nil,
        json body: [UInt8]? = nil,
        extraTime: Int64 = 0
    ) async throws(NotifyClientError) -> Response {
        var headers = HTTPHeaders()
        let defaultPort = server.tls ? 443 : 80
        let shownHost = server.host.contains(":") ? "[\(server.host)]" : server.host
        headers.add(name: "Host", value: server.port == defaultPort ? shownHost : "\(shownHost):\(server.port)")
        headers.add(name: "Accept", value: "application/json")
        headers.add(name: "Connection", value: "close")
        if let token { headers.add(name: "Authorization", value: "Bearer \(token)") }
        if let body {
            headers.add(name: "Content-Type", value: "application/json")
            headers.add(name: "Content-Length", value: String(body.count))
        } else if method == .POST || method == .PUT {
            headers.add(name: "Content-Length", value: "0")
        }
        let head = HTTPRequestHead(version: .http1_1, method: method, uri: path, headers: headers)
        let total = TimeAmount.seconds(timeout + extraTime)
        let started = ContinuousClock.now
        let configure: @Sendable (any Channel) -> EventLoopFuture<HTTPChannel> = { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHTTPClientHandlers()
                channel.eventLoop.scheduleTask(in: total) { channel.close(promise: nil) }
                return try HTTPChannel(wrappingChannelSynchronously: channel)
            }
        }
        let channel: HTTPChannel
        var configuration = try server.tlsConfiguration(timeout: timeout)
        configuration.timeout = .seconds(timeout)
        do throws(TransportError) {
            if server.tls {
                channel = try await PinnedTLS.connect(configuration, configure: configure).output
            } else {
                channel = try await PinnedTLS.connectPlaintext(configuration, configure: configure)
            }
        } catch {
            throw .transport(error)
        }
        do {
            return try await channel.executeThenClose { inbound, outbound in
                try await outbound.write(.head(head))
                if let body { try await outbound.write(.body(.byteBuffer(ByteBuffer(bytes: body)))) }
                try await outbound.write(.end(nil))
                var response = Response(status: 0, body: [])
                for try await part in inbound {
                    switch part {
                    case .head(let head): response.status = Int(head.status.code)
                    case .body(var buffer):
                        guard response.body.count + buffer.readableBytes <= Self.maximumResponse else {
                            throw NotifyClientError.malformedResponse("the answer is larger than 2 MiB")
                        }
                        response.body += buffer.readBytes(length: buffer.readableBytes) ?? []
                    case .end: return response
                    }
                }
                // The timer below `configure` closes the channel when the exchange takes too long: say so.
                guard ContinuousClock.now - started < .seconds(timeout + extraTime) else {
                    throw NotifyClientError.malformedResponse("no answer came within \(timeout + extraTime) seconds")
                }
                throw NotifyClientError.malformedResponse("the connection closed before the answer ended")
            }
        } catch let error as NotifyClientError {
            throw error
        } catch {
            throw .malformedResponse("the exchange failed (\(type(of: error)))")
        }
    }
}

typealias HTTPChannel = NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>
