import CofferPush
import Foundation
import Hummingbird
import NIOCore

/// The request context: the client's address for rate limits and, after the bearer check, the caller's session.
public struct NotifyRequestContext: RequestContext {
    /// Hummingbird's per-request storage.
    public var coreContext: CoreRequestContextStorage
    /// The client's IP address, or "unknown" (the in-process test router has none).
    public let clientAddress: String
    /// The client's TCP port, when there is a peer.
    public let clientPort: Int?
    /// The session the bearer token proved, on protected routes.
    public var session: NotifySession?

    /// Creates the context for one request.
    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        clientAddress = source.channel.remoteAddress?.ipAddress ?? "unknown"
        clientPort = source.channel.remoteAddress?.port
        session = nil
    }

    /// Request bodies over 64 KiB are refused with 413 before they are decoded.
    public var maxUploadSize: Int { 64 * 1024 }
}

extension NotifyError: HTTPResponseError {
    /// The HTTP status for each case.
    public var status: HTTPResponse.Status {
        switch self {
        case .storage, .configuration: .internalServerError
        case .invalidRequest: .badRequest
        case .pushKeyInUse: .conflict
        case .unauthorized, .wrongCredentials: .unauthorized
        case .mailServerUnavailable, .pushServiceUnavailable: .badGateway
        case .rateLimited, .tooManyStreams: .tooManyRequests
        case .tooManySessions: .conflict
        case .sessionNotFound: .notFound
        }
    }

    /// JSON `{"error":{"message":"…"}}` (Hummingbird's own error shape); 401 for a token carries no body at all.
    public func response(from request: Request, context: some RequestContext) throws -> Response {
        if self == .unauthorized { return Response(status: .unauthorized) }
        return try HTTPError(status, message: publicDescription).response(from: request, context: context)
    }
}

/// `POST /v1/sessions`: register a device.
public struct RegisterRequest: Codable, Sendable {
    /// The mail user name.
    public var user: String
    /// The mail password: checked once with the IMAP server, never stored.
    public var password: String
    /// The device's name, shown in session lists.
    public var deviceName: String
    /// The session's P-256 public key, 65 bytes uncompressed, base64url.
    public var pushPublicKey: String
    /// The session's 16-byte auth secret, base64url.
    public var pushAuthSecret: String
    /// Optional: an RFC 8030 push subscription URL (https) the service also posts each push to.
    public var pushEndpoint: String?

    /// Creates a request.
    public init(
        user: String,
        password: String,
        deviceName: String,
        pushPublicKey: String,
        pushAuthSecret: String,
        pushEndpoint: String? = nil
    ) {
        self.user = user
        self.password = password
        self.deviceName = deviceName
        self.pushPublicKey = pushPublicKey
        self.pushAuthSecret = pushAuthSecret
        self.pushEndpoint = pushEndpoint
    }
}

/// The answer to registration and refresh: the token (shown once) and its expiry.
public struct TokenResponse: Codable, Sendable, ResponseEncodable {
    /// The session id.
    public var sessionID: String
    /// The bearer token (`cnt1_…`).
    public var token: String
    /// When the token stops working unless refreshed.
    public var expires: Date
}

/// One session as the API lists it (no token hash, no keys).
public struct SessionInfo: Codable, Sendable, Equatable {
    /// The session id.
    public var id: String
    /// The device name.
    public var deviceName: String
    /// When it was registered.
    public var created: Date
    /// When it last used its token.
    public var lastSeen: Date
    /// When its token expires.
    public var expires: Date
    /// Whether it was revoked.
    public var revoked: Bool
    /// Whether this is the session making the request.
    public var current: Bool
}

/// `GET /v1/sessions`.
public struct SessionList: Codable, Sendable, ResponseEncodable {
    /// The user's sessions, oldest first.
    public var sessions: [SessionInfo]
}

/// `GET /v1/stream`: pending messages.
public struct StreamResponse: Codable, Sendable, ResponseEncodable {
    /// One sealed message.
    public struct Message: Codable, Sendable {
        /// The id to ack.
        public var id: String
        /// The RFC 8291 body, base64url.
        public var body: String
        /// When it was queued.
        public var created: Date
    }

    /// Oldest first.
    public var messages: [Message]
}

/// `POST /v1/stream/ack`.
public struct AckRequest: Codable, Sendable {
    /// The ids of messages the client has opened.
    public var ids: [String]

    /// Creates an ack.
    public init(ids: [String]) { self.ids = ids }
}

/// The answer to an ack or an event.
public struct CountResponse: Codable, Sendable, ResponseEncodable {
    /// Messages deleted (ack) or queued (event).
    public var count: Int
}

/// `GET /v1/vapid`: the key subscriptions are bound to (`applicationServerKey`).
public struct VAPIDKeyResponse: Codable, Sendable, ResponseEncodable {
    /// The 65-byte uncompressed P-256 VAPID public key, base64url.
    public var publicKey: String
}

/// `GET /v1/health`.
public struct HealthResponse: Codable, Sendable, ResponseEncodable {
    /// "ok".
    public var status: String
}

/// Builds the HTTP API on Hummingbird.
public enum NotifyAPI {
    /// The longest long-poll wait a client may ask for.
    public static let maximumWait = 30

    /// The router with every route.
    public static func router(service: NotifyService) -> Router<NotifyRequestContext> {
        let router = Router(context: NotifyRequestContext.self)
        router.add(middleware: NotifyMetricsMiddleware(metrics: service.metrics))
        router.get("/v1/health") { _, _ in HealthResponse(status: "ok") }
        router.get("/v1/vapid") { _, _ -> VAPIDKeyResponse in
            guard let sender = service.webPush else { throw HTTPError(.notFound, message: "Web Push is not enabled.") }
            return VAPIDKeyResponse(publicKey: Base64URL.encode(sender.signer.publicKey))
        }

        router.post("/v1/sessions") { request, context -> Response in
            let body = try await request.decode(as: RegisterRequest.self, context: context)
            guard let key = Base64URL.decode(body.pushPublicKey), let secret = Base64URL.decode(body.pushAuthSecret)
            else { throw NotifyError.invalidRequest("pushPublicKey and pushAuthSecret must be base64url") }
            let (session, token) = try await service.register(
                user: body.user,
                password: body.password,
                deviceName: body.deviceName,
                pushPublicKey: key,
                pushAuthSecret: secret,
                pushEndpoint: body.pushEndpoint,
                client: service.client(request, context)
            )
            var response = try TokenResponse(sessionID: session.id, token: token.text, expires: session.expires)
                .response(from: request, context: context)
            response.status = .created
            response.headers[.cacheControl] = "no-store"
            return response
        }

        // Dovecot's ox driver sends PUT; POST is accepted for other senders.
        for method in [HTTPRequest.Method.put, .post] {
            router.on("/v1/events/dovecot", method: method) { request, context -> CountResponse in
                guard let password = basicPassword(request), service.eventSecretMatches(password) else {
                    throw NotifyError.unauthorized
                }
                let event = try await request.decode(as: DovecotEvent.self, context: context)
                return CountResponse(count: try await service.handle(event))
            }
        }

        // The generic webhook: any other delivery agent, the body signed with the event secret (``Webhook``).
        router.post("/v1/events") { request, context -> CountResponse in
            var request = request
            let body = try await request.collectBody(upTo: context.maxUploadSize)
            try await service.verifyWebhook(
                timestamp: field(request, Webhook.timestampHeader),
                signature: field(request, Webhook.signatureHeader),
                body: Array(buffer: body)
            )
            let event = try await request.decode(as: Webhook.Event.self, context: context)
            return CountResponse(count: try await service.handle(event.dovecotEvent))
        }

        let protected = router.group("/v1").add(middleware: BearerMiddleware(service: service))

        protected.post("/sessions/refresh") { request, context -> Response in
            let session = try context.requireSession()
            let (expires, token) = try await service.refresh(session)
            var response = try TokenResponse(sessionID: session.id, token: token.text, expires: expires)
                .response(from: request, context: context)
            response.headers[.cacheControl] = "no-store"
            return response
        }

        protected.get("/sessions") { _, context -> SessionList in
            let caller = try context.requireSession()
            let sessions = try await service.storage.sessions(user: caller.user)
            return SessionList(
                sessions: sessions.map { session in
                    SessionInfo(
                        id: session.id,
                        deviceName: session.deviceName,
                        created: session.created,
                        lastSeen: session.lastSeen,
                        expires: session.expires,
                        revoked: session.revoked,
                        current: session.id == caller.id
                    )
                }
            )
        }

        // Every session of the caller's user but the caller's own (a lost or stolen device, a changed password).
        protected.post("/sessions/revoke-others") { _, context -> CountResponse in
            let caller = try context.requireSession()
            return CountResponse(count: try await service.revokeAll(user: caller.user, keeping: caller.id))
        }

        protected.delete("/sessions/{id}") { _, context -> HTTPResponse.Status in
            let caller = try context.requireSession()
            let id = try context.parameters.require("id")
            try await service.revoke(id: id, by: caller)
            return .noContent
        }

        protected.get("/stream") { request, context -> StreamResponse in
            let session = try context.requireSession()
            let wait = request.uri.queryParameters.get("wait", as: Int.self) ?? 0
            guard (0...maximumWait).contains(wait) else {
                throw NotifyError.invalidRequest("wait must be 0 to \(maximumWait) seconds")
            }
            let messages = try await service.pending(for: session, wait: .seconds(wait))
            return StreamResponse(
                messages: messages.map { .init(id: $0.id, body: Base64URL.encode($0.body), created: $0.created) }
            )
        }

        protected.post("/stream/ack") { request, context -> CountResponse in
            let session = try context.requireSession()
            let body = try await request.decode(as: AckRequest.self, context: context)
            guard body.ids.count <= 1000 else { throw NotifyError.invalidRequest("at most 1000 ids per ack") }
            return CountResponse(count: try await service.storage.ack(sessionID: session.id, ids: body.ids))
        }
        addFastSyncRoutes(to: protected, service: service)

        AccountPage.addRoutes(to: router, service: service)
        return router
    }

    /// The first value of a header field, by its case-insensitive name.
    static func field(_ request: Request, _ name: String) -> String? {
        let wanted = name.lowercased()
        return request.headers.first { $0.name.canonicalName == wanted }?.value
    }

    /// The password of a `Basic` Authorization header.
    static func basicPassword(_ request: Request) -> [UInt8]? {
        guard let header = request.headers[.authorization], header.lowercased().hasPrefix("basic "),
            let decoded = Data(base64Encoded: String(header.dropFirst(6)).trimmingCharacters(in: .whitespaces)),
            let colon = decoded.firstIndex(of: UInt8(ascii: ":"))
        else { return nil }
        return Array(decoded[decoded.index(after: colon)...])
    }
}

extension NotifyService {
    /// The client of a request: the TCP peer, or what a trusted proxy forwarded.
    func client(_ request: Request, _ context: NotifyRequestContext) -> ClientOrigin {
        clients.origin(
            peer: context.clientAddress,
            port: context.clientPort,
            forwardedFor: request.headers.filter { $0.name.canonicalName == "x-forwarded-for" }.map(\.value)
        )
    }
}

/// Checks `Authorization: Bearer cnt1_…` and puts the session in the context; anything else is 401 with no body.
struct BearerMiddleware: RouterMiddleware {
    typealias Context = NotifyRequestContext
    let service: NotifyService

    func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        // The scheme is case-insensitive (RFC 9110 section 11.1); the token is not.
        guard let header = request.headers[.authorization], header.prefix(7).lowercased() == "bearer " else {
            throw NotifyError.unauthorized
        }
        var context = context
        context.session = try await service.authenticate(bearer: header.dropFirst(7))
        return try await next(request, context)
    }
}

extension NotifyRequestContext {
    func requireSession() throws(NotifyError) -> NotifySession {
        guard let session else { throw .unauthorized }
        return session
    }
}
