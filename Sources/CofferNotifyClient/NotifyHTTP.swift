import CofferTransport
import NIOCore
import NIOHTTP1

/// The JSON exchanges with the notification service: CofferTransport's ``PinnedHTTP`` (pinned TLS, or plain TCP to
/// a loopback address) with the bearer token and JSON headers, its errors as ``NotifyClientError``.
struct NotifyHTTP: Sendable {
    /// The largest answer read: a full stream page is 100 pushes of 4096 bytes in base64url plus JSON.
    static let maximumResponse = 2 * 1024 * 1024

    let server: NotifyServer
    /// The limit for connecting, for the handshake, and for the whole exchange (a long poll adds its wait).
    var timeout: Int64 = 20

    typealias Response = PinnedHTTP.Response

    func request(
        _ method: HTTPMethod,
        _ path: String,
        token: String? = nil,
        json body: [UInt8]? = nil,
        extraTime: Int64 = 0
    ) async throws(NotifyClientError) -> Response {
        var headers = HTTPHeaders()
        headers.add(name: "Accept", value: "application/json")
        if let token { headers.add(name: "Authorization", value: "Bearer \(token)") }
        if body != nil { headers.add(name: "Content-Type", value: "application/json") }
        let configuration = try server.tlsConfiguration(timeout: timeout)
        do throws(TransportError) {
            return try await PinnedHTTP.exchange(
                configuration,
                tls: server.tls,
                method: method,
                path: path,
                headers: headers,
                body: body,
                totalTime: .seconds(timeout + extraTime),
                maximumResponse: Self.maximumResponse
            )
        } catch {
            guard case .httpFailed(_, let reason) = error else { throw .transport(error) }
            throw .malformedResponse(reason)
        }
    }
}
