import CofferPush
import Foundation
import NIOHTTP1

/// The notification service's API, as the device uses it (docs/NOTIFY.md, "API").
public struct NotifyClient: Sendable {
    /// The service.
    public let server: NotifyServer
    /// Seconds for connecting and for each exchange.
    public var timeout: Int64 = 20

    /// Creates a client.
    public init(server: NotifyServer) { self.server = server }

    /// A new session's token.
    public struct Token: Decodable, Sendable {
        /// The session id.
        public var sessionID: String
        /// The bearer token (`cnt1_…`).
        public var token: String
        /// When it expires unless refreshed.
        public var expires: Date
    }

    /// One pending push on the stream.
    public struct StreamMessage: Decodable, Sendable {
        /// The id to ack.
        public var id: String
        /// The RFC 8291 body, base64url.
        public var body: String
        /// When the service made it.
        public var created: Date
    }

    struct StreamPage: Decodable { var messages: [StreamMessage] }

    private var http: NotifyHTTP { NotifyHTTP(server: server, timeout: timeout) }

    static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }

    private static func check(
        _ response: NotifyHTTP.Response,
        _ expected: Int,
        _ what: String
    )
        throws(NotifyClientError)
    {
        if response.status == 401 { throw .sessionRevoked }
        guard response.status == expected else { throw .unexpectedStatus(response.status, what) }
    }

    /// `POST /v1/sessions`: proves the mail credentials and registers the session's push keys.
    ///
    /// - Throws: `.unexpectedStatus(401, …)` is mapped to ``NotifyClientError/unexpectedStatus(_:_:)`` with
    ///   "registration (wrong mail credentials)"; transport errors as ``NotifyClientError/transport(_:)``.
    public func register(
        user: String,
        password: String,
        deviceName: String,
        keys: WebPush.UserAgentKeys
    ) async throws(NotifyClientError) -> Token {
        let secret = keys.authSecret.withUnsafeBytes { Base64URL.encode($0) }
        let body: [String: String] = [
            "user": user, "password": password, "deviceName": deviceName,
            "pushPublicKey": Base64URL.encode(keys.subscription.publicKeyBytes), "pushAuthSecret": secret,
        ]
        guard let json = try? JSONEncoder().encode(body) else { throw .malformedResponse("the request") }
        let response = try await http.request(.POST, "/v1/sessions", json: Array(json))
        switch response.status {
        case 201: break
        case 401: throw .unexpectedStatus(401, "the registration (the mail server refused the user name or password)")
        case 429: throw .unexpectedStatus(429, "the registration (too many attempts; wait a minute)")
        case 502: throw .unexpectedStatus(502, "the registration (it could not reach its mail server)")
        default: throw .unexpectedStatus(response.status, "the registration")
        }
        guard let token = try? Self.decoder().decode(Token.self, from: Data(response.body)) else {
            throw .malformedResponse("the registration answer")
        }
        return token
    }

    /// `DELETE /v1/sessions/{id}`: revokes the session (404 counts as already gone).
    public func revoke(sessionID: String, token: String) async throws(NotifyClientError) {
        guard sessionID.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }) else {
            throw .invalidRecord("the session id has unexpected characters")
        }
        let response = try await http.request(.DELETE, "/v1/sessions/\(sessionID)", token: token)
        if response.status == 404 { return }
        try Self.check(response, 204, "the revocation")
    }

    /// `GET /v1/stream?wait=S`: the pending pushes, waiting up to `wait` seconds (0…30) for one.
    public func stream(token: String, wait: Int = 0) async throws(NotifyClientError) -> [StreamMessage] {
        let seconds = min(max(wait, 0), 30)
        let response = try await http.request(
            .GET,
            "/v1/stream?wait=\(seconds)",
            token: token,
            extraTime: Int64(seconds)
        )
        try Self.check(response, 200, "the stream")
        guard let page = try? Self.decoder().decode(StreamPage.self, from: Data(response.body)) else {
            throw .malformedResponse("the stream page")
        }
        return page.messages
    }

    /// `POST /v1/stream/ack`: deletes handled pushes.
    public func ack(token: String, ids: [String]) async throws(NotifyClientError) {
        guard !ids.isEmpty else { return }
        guard let json = try? JSONEncoder().encode(["ids": ids]) else { throw .malformedResponse("the request") }
        let response = try await http.request(.POST, "/v1/stream/ack", token: token, json: Array(json))
        try Self.check(response, 200, "the ack")
    }

    /// `POST /v1/sessions/refresh`: a new token; the old one works until the new one is first used.
    public func refresh(token: String) async throws(NotifyClientError) -> Token {
        let response = try await http.request(.POST, "/v1/sessions/refresh", token: token)
        try Self.check(response, 200, "the refresh")
        guard let token = try? Self.decoder().decode(Token.self, from: Data(response.body)) else {
            throw .malformedResponse("the refresh answer")
        }
        return token
    }

    private struct KeyAnswer: Decodable { var publicKey: String }
    private struct StatusAnswer: Decodable { var expires: Int64? }

    /// `GET /v1/fastsync/key`: the user's escrow public key (32 raw X25519 octets).
    public func fastSyncKey(token: String) async throws(NotifyClientError) -> [UInt8] {
        let response = try await http.request(.GET, "/v1/fastsync/key", token: token)
        try Self.check(response, 200, "the FastSync key request")
        guard let answer = try? JSONDecoder().decode(KeyAnswer.self, from: Data(response.body)),
            let key = Base64URL.decode(answer.publicKey), key.count == 32
        else { throw .malformedResponse("the FastSync key") }
        return key
    }

    /// `PUT /v1/fastsync/kek`: escrows the sealed KEK for this session.
    public func putKEK(token: String, upload: FastSyncEscrowFormat.Upload) async throws(NotifyClientError) {
        guard let json = try? JSONEncoder().encode(upload) else { throw .malformedResponse("the request") }
        let response = try await http.request(.PUT, "/v1/fastsync/kek", token: token, json: Array(json))
        try Self.check(response, 204, "the FastSync key upload")
    }

    /// `DELETE /v1/fastsync/kek`: the service forgets this session's KEK.
    public func deleteKEK(token: String) async throws(NotifyClientError) {
        let response = try await http.request(.DELETE, "/v1/fastsync/kek", token: token)
        try Self.check(response, 204, "the FastSync key deletion")
    }

    /// `GET /v1/fastsync/kek`: the expiry of the escrowed KEK (Unix seconds), or nil.
    public func kekExpiry(token: String) async throws(NotifyClientError) -> Int64? {
        let response = try await http.request(.GET, "/v1/fastsync/kek", token: token)
        try Self.check(response, 200, "the FastSync status")
        guard let answer = try? JSONDecoder().decode(StatusAnswer.self, from: Data(response.body)) else {
            throw .malformedResponse("the FastSync status")
        }
        return answer.expires
    }
}
