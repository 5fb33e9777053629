import CofferPush
import Crypto
import Foundation
import Logging
import NIOConcurrencyHelpers
import ServiceLifecycle

/// The service's logic, independent of HTTP: sessions, events in, pending pushes out.
public struct NotifyService: Sendable {
    /// Settings with safe defaults.
    public struct Settings: Sendable {
        /// How long a token works before it must be refreshed (30 days).
        public var sessionLifetime: TimeInterval = 30 * 24 * 3600
        /// How long an unacked push is kept (7 days).
        public var messageLifetime: TimeInterval = 7 * 24 * 3600
        /// The shared secret Dovecot's ox driver sends as the Basic auth password.
        public var eventSecret: [UInt8]
        /// Login attempts (registration and `/account` sign-in) per client per minute, whatever their outcome; only
        /// the client making them is slowed.
        public var registrationsPerMinute: Int = 10
        /// Failed logins per (user, client) and per client before back-off (``LoginThrottle``).
        public var loginPolicy = LoginThrottle.Policy()
        /// The proxies whose `X-Forwarded-For` names the client (`--trusted-proxy`); none by default, so the client is
        /// the TCP peer.
        public var trustedProxies: [CIDR] = []
        /// The most messages one stream request hands out.
        public var streamBatch: Int = 100
        /// How many times a push is posted to a session's push service before it is left to the stream alone.
        public var webPushAttempts: Int = 3
        /// The wait before the second attempt, doubled for each later one, when the push service names none
        /// (`Retry-After`, honoured up to 60 s).
        public var webPushRetryDelay: Duration = .seconds(1)

        /// Live sessions one user may hold; a registration beyond them is refused (20).
        public var maximumSessionsPerUser = 20
        /// Pushes waiting on one session's stream; an event finds a full queue and queues nothing for it (500).
        public var maximumQueuedPerSession = 500
        /// Streams (long polls and WebSockets) open at once on one session (4).
        public var maximumStreamsPerSession = 4
        /// Web Push deliveries running at once; beyond them a push is left to the stream (256).
        public var maximumDeliveries = 256

        /// Creates settings; only the event secret has no default.
        public init(eventSecret: [UInt8]) { self.eventSecret = eventSecret }
    }

    /// The database.
    public let storage: any NotifyStorage
    /// Checks mail credentials at registration.
    public let authenticator: any MailAuthenticator
    /// The settings.
    public let settings: Settings
    /// Limits login attempts per client.
    public let limiter: RateLimiter
    /// Slows failed logins per (user, client) and per client.
    public let throttle: LoginThrottle
    /// Tells who a request comes from (the peer, or a trusted proxy's `X-Forwarded-For`).
    public let clients: ClientResolver
    /// Wakes long-polling streams when a message is queued.
    public let signal = PendingSignal()
    /// The clock.
    public let now: @Sendable () -> Date
    /// The log: never tokens, passwords, senders or subjects.
    public let logger: Logger
    /// Posts pushes to sessions' RFC 8030 endpoints; nil when Web Push is off.
    public let webPush: WebPushSender?
    /// Counters and gauges for the `/metrics` listener.
    public let metrics: NotifyMetrics
    /// The FastSync escrow; nil when FastSync is off (its routes answer 404).
    public var escrow: FastSyncEscrow?
    /// The generic webhook's signatures accepted within their window.
    public let webhookReplays = WebhookReplayGuard()
    /// Web Push deliveries under way (they run after the event is answered).
    public let deliveries = BackgroundTasks()
    /// Streams open per session.
    public let streams = StreamCounter()
    /// Queues events' pushes, events in flight together in one transaction (``GroupCommit``).
    public let commits: GroupCommit

    /// Creates the service.
    public init(
        storage: any NotifyStorage,
        authenticator: any MailAuthenticator,
        settings: Settings,
        logger: Logger = Logger(label: "coffer-notify"),
        webPush: WebPushSender? = nil,
        metrics: NotifyMetrics = NotifyMetrics(),
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.webPush = webPush
        self.metrics = metrics
        self.storage = storage
        self.commits = GroupCommit(storage: storage)
        self.authenticator = authenticator
        self.settings = settings
        self.limiter = RateLimiter(limit: settings.registrationsPerMinute, window: 60, now: now)
        self.throttle = LoginThrottle(policy: settings.loginPolicy, now: now)
        self.clients = ClientResolver(trustedProxies: settings.trustedProxies)
        self.logger = logger
        self.now = now
    }

    /// Registers a device: checks the credentials once with the mail server, then stores a new session.
    ///
    /// - Returns: the session and its token (the only time the token exists outside the client).
    public func register(
        user: String,
        password: String,
        deviceName: String,
        pushPublicKey: [UInt8],
        pushAuthSecret: [UInt8],
        pushEndpoint: String? = nil,
        client: ClientOrigin
    ) async throws(NotifyError) -> (session: NotifySession, token: SessionToken) {
        guard (1...320).contains(user.utf8.count), !user.contains(where: \.isNewline) else {
            throw .invalidRequest("user must be 1 to 320 bytes on one line")
        }
        guard (1...1024).contains(password.utf8.count) else {
            throw .invalidRequest("password must be 1 to 1024 bytes")
        }
        guard DeviceName.isAcceptable(deviceName) else {
            throw .invalidRequest(
                "deviceName must be 1 to 100 characters and at most 200 bytes, without control or direction characters"
            )
        }
        do {
            _ = try WebPush.Subscription(publicKey: pushPublicKey, authSecret: pushAuthSecret)
        } catch {
            throw .invalidRequest("the push keys are not a P-256 public key and a 16-byte auth secret")
        }
        if let pushEndpoint {
            guard let webPush else {
                throw .invalidRequest("this service does not send Web Push; leave out pushEndpoint")
            }
            _ = try webPush.policy.checkForm(pushEndpoint)
        }
        // One identity from here on: the canonical name is what the mail server authenticates and what is stored.
        let user = MailUser.canonical(user)
        try await logIn(user: user, password: password, client: client)
        let date = now()
        let live = try await storage.sessions(user: user).filter { $0.isLive(at: date) }.count
        guard live < settings.maximumSessionsPerUser else {
            logger.notice("registration refused: the user has the most live sessions")
            throw .tooManySessions(settings.maximumSessionsPerUser)
        }
        let token = SessionToken()
        let session = NotifySession(
            id: UUID().uuidString.lowercased(),
            user: user,
            deviceName: deviceName,
            tokenHash: token.hash,
            created: date,
            lastSeen: date,
            expires: date.addingTimeInterval(settings.sessionLifetime),
            pushPublicKey: pushPublicKey,
            pushAuthSecret: pushAuthSecret,
            pushEndpoint: pushEndpoint
        )
        try await storage.createSession(session)
        logger.info("session registered", metadata: ["session": "\(session.id)"])
        return (session, token)
    }

    /// Checks a canonical user's password with the mail server, unless `client` is over its attempts or in back-off
    /// for this user (refused before the mail server is asked); counts a refusal as a failure of (user, client).
    /// The mail server is told the client's address, so that its own failure penalty falls on that client.
    ///
    /// - Throws: `.rateLimited`, `.wrongCredentials`, `.mailServerUnavailable`.
    public func logIn(user: String, password: String, client origin: ClientOrigin) async throws(NotifyError) {
        let client = origin.bucket
        guard await limiter.allow(["address:" + client]) else {
            logger.notice("login refused: too many attempts from one client")
            throw .rateLimited
        }
        guard await throttle.admit(user: user, client: client) else {
            logger.notice("login refused: back-off after failed logins")
            throw .rateLimited
        }
        do throws(NotifyError) {
            try await authenticator.verify(user: user, password: password, client: origin)
        } catch .wrongCredentials {
            await throttle.failed(user: user, client: client)
            throw .wrongCredentials
        } catch {
            // The reason may name the mail server's host, port and address: for the log, not for the client.
            logger.warning("login not checked: \(error)")
            throw error
        }
        await throttle.succeeded(user: user, client: client)
    }

    /// The live session a bearer token belongs to, its last-seen time updated. The first use of a refreshed token
    /// ends the previous one.
    ///
    /// - Throws: `NotifyError.unauthorized` for a malformed, unknown, expired or revoked token.
    public func authenticate(bearer text: some StringProtocol) async throws(NotifyError) -> NotifySession {
        guard let token = SessionToken(text: text) else { throw .unauthorized }
        let date = now()
        guard var session = try await storage.session(tokenHash: token.hash), session.isLive(at: date) else {
            throw .unauthorized
        }
        let current = constantTimeEqual(session.tokenHash, token.hash)
        guard current || session.previousTokenHash.map({ constantTimeEqual($0, token.hash) }) == true else {
            throw .unauthorized
        }
        if current && session.previousTokenHash != nil {
            try await storage.forgetPreviousToken(id: session.id)
            session.previousTokenHash = nil
        }
        try await storage.touch(id: session.id, at: date)
        session.lastSeen = date
        return session
    }

    /// Gives the session a new token and expiry. The token that was current stays accepted until the new one is
    /// first used, so a device that never got this answer still has a working token and can refresh again; a
    /// refresh made with that previous token keeps it as the previous one.
    public func refresh(_ session: NotifySession) async throws(NotifyError) -> (expires: Date, token: SessionToken) {
        let token = SessionToken()
        let expires = now().addingTimeInterval(settings.sessionLifetime)
        try await storage.replaceToken(
            id: session.id,
            tokenHash: token.hash,
            previous: session.previousTokenHash ?? session.tokenHash,
            expires: expires
        )
        logger.info("session refreshed", metadata: ["session": "\(session.id)"])
        return (expires, token)
    }

    /// Revokes one of the caller's own sessions (`DELETE /v1/sessions/{id}`).
    ///
    /// - Throws: `NotifyError.sessionNotFound` when there is no such session or it is another user's.
    public func revoke(id: String, by caller: NotifySession) async throws(NotifyError) {
        try await revoke(id: id, ofUser: caller.user)
    }

    /// Revokes one session of `user`, a canonical name (``MailUser``), as the `/account` page's Revoke button does.
    ///
    /// - Throws: `NotifyError.sessionNotFound` when there is no such session or it is another user's.
    public func revoke(id: String, ofUser user: String) async throws(NotifyError) {
        guard let target = try await storage.session(id: id), target.user == user else {
            throw .sessionNotFound
        }
        try await revokeSession(id: target.id)
    }

    /// Revokes every live session of `user` except `keeping` (a stolen device, a changed password): their pending
    /// pushes and FastSync keys go with them. Returns how many were revoked.
    public func revokeAll(user: String, keeping: String? = nil) async throws(NotifyError) -> Int {
        let date = now()
        var count = 0
        for session in try await storage.sessions(user: MailUser.canonical(user))
        where session.id != keeping && session.isLive(at: date) {
            try await revokeSession(id: session.id)
            count += 1
        }
        logger.info("sessions revoked", metadata: ["count": "\(count)"])
        return count
    }

    /// The one way a session is revoked in the service, whoever asks (the API, the `/account` page, ``revokeAll``):
    /// ``revokeSession(id:storage:escrow:signal:)`` with this service's parts, then a log line. The caller checks
    /// whose session it is.
    ///
    /// - Returns: whether there was such a session.
    @discardableResult
    func revokeSession(id: String) async throws(NotifyError) -> Bool {
        let revoked = try await Self.revokeSession(id: id, storage: storage, escrow: escrow, signal: signal)
        if revoked { logger.info("session revoked", metadata: ["session": "\(id)"]) }
        return revoked
    }

    /// Every step of a revocation, in one place: marks the session revoked and drops its pending pushes, wakes its
    /// streams in this process (a long poll answers 401 and a WebSocket closes at once, not at the end of their
    /// wait), and deletes its escrowed FastSync key. `coffer-notify sessions revoke` calls it straight on the
    /// database, with no stream of its own to wake (`signal` nil): a server's streams see the revocation at their next
    /// check.
    ///
    /// - Returns: whether there was such a session.
    package static func revokeSession(
        id: String,
        storage: any NotifyStorage,
        escrow: FastSyncEscrow?,
        signal: PendingSignal?
    ) async throws(NotifyError) -> Bool {
        let revoked = try await storage.revoke(id: id)
        // Woken before the escrow's delete, so that a failing delete cannot leave a revoked device listening.
        await signal?.wake(sessionID: id)
        try await escrow?.delete(sessionID: id)
        return revoked
    }

    /// Checks the Basic auth password Dovecot sent against the event secret, in constant time.
    public func eventSecretMatches(_ password: [UInt8]) -> Bool {
        constantTimeEqual(Array(SHA256.hash(data: password)), Array(SHA256.hash(data: settings.eventSecret)))
    }

    /// Checks a generic webhook request (``Webhook``): a timestamp within the window of this service's clock, the
    /// body's signature under the event secret, and a signature not accepted before.
    ///
    /// - Throws: `NotifyError.unauthorized` when any check fails (the answer does not say which).
    public func verifyWebhook(timestamp: String?, signature: String?, body: [UInt8]) async throws(NotifyError) {
        guard let timestamp, let time = Int64(timestamp), let signature else { throw .unauthorized }
        let current = Int64(now().timeIntervalSince1970)
        // Compared without a subtraction that a hostile timestamp could overflow.
        guard time >= current - Webhook.window, time <= current + Webhook.window,
            Webhook.signatureMatches(signature, body: body, timestamp: time, secret: settings.eventSecret),
            await webhookReplays.accept(signature, timestamp: time, now: current)
        else { throw .unauthorized }
    }

    /// Seals the event to every live session of its user and queues the pushes in one transaction; returns how many
    /// were queued.
    public func handle(_ event: DovecotEvent) async throws(NotifyError) -> Int {
        guard event.event == nil || event.event == "messageNew" else { return 0 }
        let date = now()
        var queue: [(message: PendingMessage, endpoint: String?)] = []
        let sessions = try await storage.sessions(user: MailUser.canonical(event.user)).filter { $0.isLive(at: date) }
        // One read each for the queues' lengths and the escrowed keys of all the sessions, not one per session.
        let counts = sessions.isEmpty ? [:] : try await storage.pendingCounts(sessionIDs: sessions.map(\.id), now: date)
        let keks = sessions.isEmpty ? [:] : ((try? await escrow?.keks(for: sessions, now: date)) ?? [:])
        for session in sessions {
            // A session that fetches nothing does not grow its queue without end.
            guard counts[session.id, default: 0] < settings.maximumQueuedPerSession else {
                logger.notice("push not queued: the session's queue is full", metadata: ["session": "\(session.id)"])
                metrics.push("failed")
                continue
            }
            var message = PushMessage(event: event)
            var expires = date.addingTimeInterval(settings.messageLifetime)
            // The session's escrowed FastSync key, while unexpired; the push (and its Web Push TTL) ends with it.
            if let escrowed = keks[session.id] {
                message.fastSync = PushMessage.FastSyncKey(
                    kek: Base64URL.encode(escrowed.kek),
                    expires: escrowed.expires
                )
                expires = min(expires, Date(timeIntervalSince1970: TimeInterval(escrowed.expires)))
            }
            let body: [UInt8]
            do {
                let subscription = try WebPush.Subscription(
                    publicKey: session.pushPublicKey,
                    authSecret: session.pushAuthSecret
                )
                body = try message.seal(to: subscription)
            } catch {
                logger.error("a push could not be sealed", metadata: ["session": "\(session.id)"])
                metrics.push("failed")
                continue
            }
            let pending = PendingMessage(
                id: UUID().uuidString.lowercased(),
                sessionID: session.id,
                body: body,
                created: date,
                expires: expires,
                holdsKey: message.fastSync != nil
            )
            queue.append((pending, session.pushEndpoint))
        }
        // Answered only once the transaction holding these pushes committed; events in flight together share it.
        try await commits.enqueue(queue.map(\.message))
        for (pending, endpoint) in queue {
            await signal.wake(sessionID: pending.sessionID)
            metrics.push("queued")
            if let endpoint, let webPush {
                let started = await deliveries.start(limit: settings.maximumDeliveries) {
                    await deliver(pending, to: endpoint, with: webPush)
                }
                if !started {
                    metrics.webPush("failed")
                    logger.notice("too many deliveries under way; the push waits on the stream")
                }
            }
        }
        logger.info("event handled", metadata: ["queued": "\(queue.count)"])
        return queue.count
    }

    /// Posts a queued push to the session's push service, after the event was answered; once accepted (2xx) it
    /// leaves the stream. A 429, a 5xx or no answer is tried again (``Settings/webPushAttempts`` in all, after the
    /// push service's `Retry-After` or a doubling delay); 404 and 410 mean the subscription is gone, so the session
    /// loses its endpoint and keeps its stream; any other answer ends the delivery, and so does a revocation or an ack
    /// from the stream before a retry. Whatever happens, an undelivered push stays on the stream. Logged without the
    /// URL (which identifies the device).
    func deliver(_ message: PendingMessage, to endpoint: String, with sender: WebPushSender) async {
        let session: Logger.Metadata = ["session": "\(message.sessionID)"]
        var delay = settings.webPushRetryDelay
        for attempt in 1...max(1, settings.webPushAttempts) {
            var wait = delay
            // A retry only while the session is live and the push still waits on its stream (not acked meanwhile).
            if attempt > 1 {
                guard let current = try? await storage.session(id: message.sessionID), current.isLive(at: now()),
                    let waiting = try? await storage.pending(
                        sessionID: message.sessionID,
                        now: now(),
                        limit: settings.streamBatch
                    ),
                    waiting.contains(where: { $0.id == message.id })
                else { return }
            }
            do {
                let ttl = Int(max(0, message.expires.timeIntervalSince(now())))
                let answer = try await sender.send(message.body, to: endpoint, ttl: ttl, now: now())
                switch answer.status {
                case 200..<300:
                    metrics.webPush("delivered")
                    _ = try? await storage.ack(sessionID: message.sessionID, ids: [message.id])
                    return
                case 404, 410:
                    metrics.webPush("gone")
                    logger.notice("push subscription gone; the session keeps its stream", metadata: session)
                    try? await storage.forgetPushEndpoint(id: message.sessionID)
                    return
                case 429, 500..<600:
                    if let seconds = answer.retryAfter { wait = .seconds(min(seconds, 60)) }
                default:
                    metrics.webPush("refused")
                    logger.notice(
                        "push service refused",
                        metadata: session.merging(["status": "\(answer.status)"]) { $1 }
                    )
                    return
                }
            } catch .invalidRequest {
                // The endpoint breaks the URL rules now (its name resolves to a refused address): no retry.
                metrics.webPush("refused")
                logger.notice("push endpoint refused by the URL rules", metadata: session)
                return
            } catch {
                logger.notice("push not delivered: \(error)", metadata: session)
            }
            guard attempt < settings.webPushAttempts else { break }
            metrics.webPush("retry")
            try? await Task.sleep(for: wait)
            delay *= 2
        }
        metrics.webPush("failed")
        logger.notice("push left to the stream after \(settings.webPushAttempts) attempts", metadata: session)
    }

    /// The session's pending messages; when there are none, waits up to `wait` for one.
    public func pending(for session: NotifySession, wait: Duration) async throws(NotifyError) -> [PendingMessage] {
        guard wait > .zero else {
            return try await storage.pending(sessionID: session.id, now: now(), limit: settings.streamBatch)
        }
        guard streams.enter(session.id, limit: settings.maximumStreamsPerSession) else { throw .tooManyStreams }
        defer { streams.leave(session.id) }
        let seen = await signal.generation(sessionID: session.id)
        let first = try await storage.pending(sessionID: session.id, now: now(), limit: settings.streamBatch)
        guard first.isEmpty, wait > .zero else { return first }
        metrics.streamWaiters.increment()
        await signal.wait(sessionID: session.id, after: seen, timeout: wait)
        metrics.streamWaiters.decrement()
        guard let current = try await storage.session(id: session.id), current.isLive(at: now()) else {
            throw .unauthorized
        }
        return try await storage.pending(sessionID: session.id, now: now(), limit: settings.streamBatch)
    }
}

/// Deletes expired pending messages and expired FastSync keys every `interval` until the service shuts down.
public struct PurgeService: Service {
    /// The service whose storage is purged.
    public let service: NotifyService
    /// Time between purges.
    public let interval: Duration

    /// Creates the purger.
    public init(service: NotifyService, interval: Duration = .seconds(600)) {
        self.service = service
        self.interval = interval
    }

    /// Purges, then sleeps, until graceful shutdown or cancellation.
    public func run() async throws {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                // Expired FastSync keys first, then pushes (which never outlive the key they carry).
                let removed = try await service.storage.purgeExpired(now: service.now())
                if removed > 0 { service.logger.info("expired pushes purged", metadata: ["count": "\(removed)"]) }
                if let keys = try await service.escrow?.purge(now: service.now()), keys > 0 {
                    service.logger.info("expired FastSync keys purged", metadata: ["count": "\(keys)"])
                }
            } catch {
                service.logger.error("purge failed: \(error)")
            }
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
        }
    }
}

/// Work that outlives the request that started it (Web Push deliveries), kept so that a caller can wait for it.
public actor BackgroundTasks {
    private var tasks: [Int: Task<Void, Never>] = [:]
    private var next = 0

    /// Creates an empty set.
    public init() {}

    /// Tasks running now.
    public var count: Int { tasks.count }

    /// Starts `body` on its own task unless `limit` tasks are running; returns whether it started.
    @discardableResult
    public func start(limit: Int = .max, _ body: @escaping @Sendable () async -> Void) -> Bool {
        guard tasks.count < limit else { return false }
        defer { next += 1 }
        let id = next
        tasks[id] = Task {
            await body()
            self.finished(id)
        }
        return true
    }

    private func finished(_ id: Int) { tasks[id] = nil }

    /// Waits until every task started so far, and any they started meanwhile, has ended.
    public func drain() async {
        while let (id, task) = tasks.first {
            await task.value
            tasks[id] = nil
        }
    }
}

/// Streams (long polls, WebSockets) open per session, so that one token cannot hold hundreds.
public final class StreamCounter: Sendable {
    private let open = NIOLockedValueBox([String: Int]())

    /// Creates an empty counter.
    public init() {}

    /// Counts one more stream of `sessionID`; false (nothing counted) when it has `limit`.
    public func enter(_ sessionID: String, limit: Int) -> Bool {
        open.withLockedValue { open in
            let current = open[sessionID, default: 0]
            guard current < limit else { return false }
            open[sessionID] = current + 1
            return true
        }
    }

    /// Counts one stream of `sessionID` ended.
    public func leave(_ sessionID: String) {
        open.withLockedValue { open in
            let remaining = open[sessionID, default: 0] - 1
            open[sessionID] = remaining > 0 ? remaining : nil
        }
    }
}

/// The rules for a device name.
public enum DeviceName {
    /// 1 to 100 characters and at most 200 UTF-8 bytes, with no control (Cc), format (Cf: the direction marks and
    /// isolates among them), line or paragraph separator, or private-use character.
    public static func isAcceptable(_ name: String) -> Bool {
        guard (1...100).contains(name.count), name.utf8.count <= 200 else { return false }
        return name.unicodeScalars.allSatisfy { scalar in
            switch scalar.properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator, .privateUse, .surrogate, .unassigned: false
            default: true
            }
        }
    }
}

/// Text from users (device names, user names) made safe for a terminal: every control, format (direction marks
/// among them), separator, private-use or unassigned character becomes `\u{HEX}`, and a backslash `\\`, so that
/// no escape sequence, OSC title or bidi override reaches the operator's terminal and the output stays one line.
public enum TerminalText {
    /// The escaped form of `text`.
    public static func escaped(_ text: String) -> String {
        var result = ""
        for scalar in text.unicodeScalars {
            switch scalar.properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator, .privateUse, .surrogate, .unassigned:
                result += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
            default:
                if scalar == "\\" { result += "\\\\" } else { result.unicodeScalars.append(scalar) }
            }
        }
        return result
    }
}
