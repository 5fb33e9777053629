import CofferPush
import CofferTransport
import Foundation
import NIOCore
import NIOHTTP1

/// Sends a sealed push to an RFC 8030 push service: `POST` to the subscription URL with `TTL`, `Urgency`,
/// `Content-Encoding: aes128gcm` and a VAPID (RFC 8292) `Authorization`, over TLS with the system trust store (CofferTransport's
/// ``PinnedHTTP`` without pins), to the address ``PushEndpointPolicy`` checked.
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

    /// The request target (path and query) of `url` exactly as encoded in it: `%0D%0A` stays three-character
    /// escapes and never becomes a line break in the request. Anything that is not visible ASCII is refused.
    ///
    /// - Throws: `NotifyError.invalidRequest` for a target with a control character, a space or non-ASCII.
    public static func requestTarget(of url: URL) throws(NotifyError) -> String {
        guard let target = PinnedHTTP.target(of: url) else {
            throw .invalidRequest("the push endpoint's path holds a character a request line cannot carry")
        }
        return target
    }

    /// Posts one body; returns the push service's HTTP status (201 means accepted) and its `Retry-After` seconds.
    ///
    /// - Throws: `NotifyError.invalidRequest` when the endpoint breaks the URL rules, `.pushServiceUnavailable` when
    ///   the exchange fails (the sentence says how).
    public func send(
        _ body: [UInt8],
        to endpoint: String,
        ttl: Int,
        urgency: String = "normal",
        now: Date
    ) async throws(NotifyError) -> (status: Int, retryAfter: Int?) {
        let resolved = try await policy.resolve(endpoint)
        let audience: String
        let authorization: String
        do {
            audience = try VAPID.audience(for: resolved.url)
            authorization = try signer.authorization(audience: audience, now: now)
        } catch {
            throw .invalidRequest("the push endpoint has no origin for VAPID")
        }
        let path = try Self.requestTarget(of: resolved.url)
        var headers = HTTPHeaders()
        headers.add(name: "TTL", value: String(max(0, ttl)))
        headers.add(name: "Urgency", value: urgency)
        headers.add(name: "Content-Encoding", value: "aes128gcm")
        headers.add(name: "Content-Type", value: "application/octet-stream")
        headers.add(name: "Authorization", value: authorization)
        // To the address the policy checked (no second DNS lookup to rebind), with the system's trust store.
        let configuration = PinnedTLSConfiguration(
            serverName: resolved.host,
            port: resolved.port,
            connectAddress: resolved.address.ipAddress,
            timeout: timeout
        )
        do throws(TransportError) {
            let answer = try await PinnedHTTP.exchange(
                configuration,
                tls: resolved.tls,
                method: .POST,
                path: path,
                headers: headers,
                body: body,
                totalTime: timeout,
                maximumResponse: 64 * 1024
            )
            return (answer.status, answer.retryAfter)
        } catch {
            // One sentence: the transport's own, without its full stop.
            throw .pushServiceUnavailable(String(error.description.dropLast(error.description.hasSuffix(".") ? 1 : 0)))
        }
    }
}
