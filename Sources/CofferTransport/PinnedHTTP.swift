import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// One HTTP/1.1 request per connection (`Connection: close`) over ``PinnedTLS`` (chain, host name and pins checked
/// as for IMAP, no way around them), or over plain TCP when `tls` is false (callers allow that only to loopback).
/// The small client that coffer-notify's JSON API and Web Push deliveries share.
public enum PinnedHTTP {
    /// What came back.
    public struct Response: Sendable, Equatable {
        /// The HTTP status code.
        public var status: Int
        /// The body.
        public var body: [UInt8]
        /// The `Retry-After` header as whole seconds, when it is one (a 429 or 503 may carry it); an HTTP date is
        /// not read.
        public var retryAfter: Int?

        /// A response.
        public init(status: Int, body: [UInt8], retryAfter: Int? = nil) {
            self.status = status
            self.body = body
            self.retryAfter = retryAfter
        }
    }

    /// The request target of `url` for the request line: its path (`/` when empty) and query as they are written,
    /// escapes kept, so `%0D%0A` stays three characters each and never becomes a line break in the request; nil
    /// when the target holds anything but visible ASCII (a control character, a space, non-ASCII).
    public static func target(of url: URL) -> String? {
        guard let components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return nil }
        let path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        let target = components.percentEncodedQuery.map { "\(path)?\($0)" } ?? path
        guard target.utf8.allSatisfy({ (0x21...0x7e).contains($0) }) else { return nil }
        return target
    }

    /// The `Host` header for `configuration`: the server's name (an IPv6 address in brackets), with its port unless
    /// it is the scheme's default.
    static func hostHeader(_ configuration: PinnedTLSConfiguration, tls: Bool) -> String {
        let host = configuration.serverName
        let shown = host.contains(":") ? "[\(host)]" : host
        return configuration.port == (tls ? 443 : 80) ? shown : "\(shown):\(configuration.port)"
    }

    /// Sends one request and reads the whole answer.
    ///
    /// `Host`, `Connection: close` and `Content-Length` are set here; `headers` adds the rest. The connection is
    /// closed after `totalTime` whatever state it is in.
    ///
    /// - Throws: the ``TransportError`` of the connection or handshake; ``TransportError/timedOut(host:port:)`` when
    ///   the answer did not end within `totalTime`; ``TransportError/httpFailed(host:reason:)`` when it was cut
    ///   short or is larger than `maximumResponse` bytes.
    public static func exchange(
        _ configuration: PinnedTLSConfiguration,
        tls: Bool,
        method: HTTPMethod,
        path: String,
        headers: HTTPHeaders = [:],
        body: [UInt8]? = nil,
        totalTime: TimeAmount,
        maximumResponse: Int
    ) async throws(TransportError) -> Response {
        let host = configuration.serverName
        var headers = headers
        headers.replaceOrAdd(name: "Host", value: hostHeader(configuration, tls: tls))
        headers.replaceOrAdd(name: "Connection", value: "close")
        if let body {
            headers.replaceOrAdd(name: "Content-Length", value: String(body.count))
        } else if method == .POST || method == .PUT {
            headers.replaceOrAdd(name: "Content-Length", value: "0")
        }
        let head = HTTPRequestHead(version: .http1_1, method: method, uri: path, headers: headers)
        let started = ContinuousClock.now
        let configure: @Sendable (any Channel) -> EventLoopFuture<HTTPChannel> = { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHTTPClientHandlers()
                channel.eventLoop.scheduleTask(in: totalTime) { channel.close(promise: nil) }
                return try HTTPChannel(wrappingChannelSynchronously: channel)
            }
        }
        let channel =
            tls
            ? try await PinnedTLS.connect(configuration, configure: configure).output
            : try await PinnedTLS.connectPlaintext(configuration, configure: configure)
        do {
            return try await channel.executeThenClose { inbound, outbound in
                // The request is written in one go, so no part of it waits for the task to run again while the
                // server may already have answered and closed (a 401 to a GET with `Connection: close`). The write
                // fails only when the channel closed before it was made; whatever the server sent is still read
                // below, and an answer is returned.
                var parts: [HTTPClientRequestPart] = [.head(head)]
                if let body { parts.append(.body(.byteBuffer(ByteBuffer(bytes: body)))) }
                parts.append(.end(nil))
                var requestCutShort = false
                do { try await outbound.write(contentsOf: parts) } catch { requestCutShort = true }
                var response = Response(status: 0, body: [])
                for try await part in inbound {
                    switch part {
                    case .head(let head):
                        response.status = Int(head.status.code)
                        response.retryAfter = head.headers.first(name: "Retry-After").flatMap { Int($0) }
                            .flatMap { $0 >= 0 ? $0 : nil }
                    case .body(var buffer):
                        guard response.body.count + buffer.readableBytes <= maximumResponse else {
                            throw TransportError.httpFailed(host: host, reason: "the answer is too large")
                        }
                        response.body += buffer.readBytes(length: buffer.readableBytes) ?? []
                    case .end: return response
                    }
                }
                // The timer in `configure` closes the channel when the exchange takes too long: say so.
                guard ContinuousClock.now - started < .nanoseconds(totalTime.nanoseconds) else {
                    throw TransportError.timedOut(host: host, port: configuration.port)
                }
                throw TransportError.httpFailed(
                    host: host,
                    reason: requestCutShort
                        ? "the connection closed before the request was sent"
                        : "the connection closed before the answer ended"
                )
            }
        } catch let error as TransportError {
            throw error
        } catch {
            throw .httpFailed(host: host, reason: "the exchange failed (\(type(of: error)))")
        }
    }

    typealias HTTPChannel = NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>
}
