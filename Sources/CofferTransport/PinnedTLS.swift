import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS
import X509

/// Where and how to open one pinned TLS connection.
public struct PinnedTLSConfiguration: Sendable {
    /// The name the certificate must carry (also sent as SNI); the pin policy is looked up under it.
    public var serverName: String
    /// The TCP port (993 for IMAPS).
    public var port: Int
    /// The address to connect to, if not `serverName` (tests: 127.0.0.1 with a test name).
    public var connectAddress: String?
    /// The CAs the chain must lead to.
    public var trustRoots: TrustRoots
    /// The pins; nil means chain and hostname validation only.
    public var pinPolicy: PinPolicy?
    /// The limit for the TCP connection and, separately, for the TLS handshake.
    public var timeout: TimeAmount
    /// Receives pin failures, refused or (after the policy's expiration) let through.
    public var reporter: (any PinFailureReporter)?
    /// The clock for certificate validity and pin expiration.
    public var now: @Sendable () -> Date

    /// Creates a configuration; only `serverName` and `port` are required.
    public init(
        serverName: String,
        port: Int,
        connectAddress: String? = nil,
        trustRoots: TrustRoots = .system,
        pinPolicy: PinPolicy? = nil,
        timeout: TimeAmount = .seconds(20),
        reporter: (any PinFailureReporter)? = nil,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.serverName = serverName
        self.port = port
        self.connectAddress = connectAddress
        self.trustRoots = trustRoots
        self.pinPolicy = pinPolicy
        self.timeout = timeout
        self.reporter = reporter
        self.now = now
    }
}

/// A connection whose handshake completed after chain, hostname and pin checks.
public struct PinnedConnection<Output: Sendable>: Sendable {
    /// What the channel initializer made of the channel (for example a `NIOAsyncChannel`).
    public var output: Output
    /// The pins of the validated chain, leaf to trusted root.
    public var chainPins: [SPKIPin]
    /// What the pin policy decided (`.matched`, `.notPinned`, or `.expired` with the reported failure).
    public var pinEvaluation: PinEvaluation
}

/// One certificate as a server presented it, for `coffer pin`: nothing here is validated.
public struct PresentedCertificate: Sendable, Hashable {
    /// The subject distinguished name.
    public var subject: String
    /// The issuer distinguished name.
    public var issuer: String
    /// The start of the validity period.
    public var notValidBefore: Date
    /// The end of the validity period.
    public var notValidAfter: Date
    /// The pin of its public key.
    public var pin: SPKIPin
}

/// TLS client channels on NIOSSL with chain, hostname and pin validation and no way around a failure.
///
/// NIOSSL's `customVerificationCallbackWithMetadata` replaces all of BoringSSL's certificate verification (trust
/// store, chain building, validity); only NIOSSL's own hostname check after the handshake remains. So the callback
/// does the whole job itself with swift-certificates: the chain to `trustRoots` (RFC 5280), the server identity
/// (RFC 6125), then the pins over the validated chain. NIOSSL's hostname check stays on as a second line.
public enum PinnedTLS {
    /// Connects, completes the handshake, and returns a byte-stream async channel over the pinned TLS session.
    ///
    /// - Throws: A `TransportError` for every failure; nothing lets a failed pin through.
    public static func connect(
        _ configuration: PinnedTLSConfiguration,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws(TransportError) -> PinnedConnection<NIOAsyncChannel<ByteBuffer, ByteBuffer>> {
        try await connect(configuration, group: group) { channel in
            channel.eventLoop.makeCompletedFuture {
                try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
            }
        }
    }

    /// Connects, adds the TLS handler and then the caller's handlers, completes the handshake, and returns what
    /// `configure` made (the IMAP client adds its framing here).
    ///
    /// - Parameters:
    ///   - configuration: Host, port, trust roots, pins, timeout, reporter and clock.
    ///   - group: The event loop group (the process-wide singleton by default).
    ///   - configure: Runs on the event loop after the TLS handler is added, before the connection is active.
    /// - Throws: A `TransportError` for every failure; the channel is closed.
    public static func connect<Output: Sendable>(
        _ configuration: PinnedTLSConfiguration,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Output>
    ) async throws(TransportError) -> PinnedConnection<Output> {
        try await open(configuration, group: group, handshake: Handshake(configuration)) { configure($0) }
    }

    /// Opens a plain TCP connection, to be upgraded with ``startTLS(on:_:prepare:)`` once the protocol says so
    /// (IMAP's STARTTLS). Nothing may be sent over it before the upgrade but the protocol's own commands for it.
    ///
    /// - Throws: `TransportError.connectFailed` or `.timedOut`.
    public static func connectPlaintext<Output: Sendable>(
        _ configuration: PinnedTLSConfiguration,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Output>
    ) async throws(TransportError) -> Output {
        let address = configuration.connectAddress ?? configuration.serverName
        do {
            return try await ClientBootstrap(group: group).connectTimeout(configuration.timeout)
                .connect(host: address, port: configuration.port) { configure($0) }
        } catch {
            throw map(error, host: configuration.serverName, port: configuration.port)
        }
    }

    /// Upgrades a connected plaintext channel to TLS in place, with the same chain, hostname and pin checks as
    /// ``connect(_:group:configure:)``. On the event loop, in one step, it runs `prepare` (the protocol handler
    /// arms itself to refuse any plaintext that came after the go-ahead) and puts the TLS handler first in the
    /// pipeline, so from then on every byte read has come through TLS. Then it waits for the handshake.
    ///
    /// - Throws: A `TransportError` for every failure; the channel is closed.
    public static func startTLS(
        on channel: any Channel,
        _ configuration: PinnedTLSConfiguration,
        prepare: @escaping @Sendable (any Channel) throws -> Void
    ) async throws(TransportError) -> PinnedConnection<any Channel> {
        let handshake = try Handshake(configuration)
        do {
            let handshakeDone = try await channel.eventLoop.submit {
                try prepare(channel)
                let (tls, watcher) = try handshake.handlers(eventLoop: channel.eventLoop)
                try channel.pipeline.syncOperations.addHandler(tls, position: .first)
                try channel.pipeline.syncOperations.addHandler(watcher, position: .after(tls))
                return watcher.promise.futureResult
            }.get()
            try await handshakeDone.get()
        } catch {
            channel.close(promise: nil)
            throw handshake.outcome.error ?? map(error, host: configuration.serverName, port: configuration.port)
        }
        guard let verified = handshake.outcome.verified else {
            channel.close(promise: nil)
            throw .handshakeFailed(host: configuration.serverName, reason: "the certificate was not verified")
        }
        return PinnedConnection(output: channel, chainPins: verified.chainPins, pinEvaluation: verified.evaluation)
    }

    /// The certificates a server presents, with their pins, WITHOUT trusting them: the handshake is aborted once
    /// the chain is seen, so no application data is exchanged. For `coffer pin HOST[:PORT]`.
    ///
    /// - Warning: The result is whatever answered at that address, attacker or not; compare it with a pin obtained
    ///   another way before using it.
    /// - Throws: `TransportError.connectFailed`, `.timedOut`, `.handshakeFailed` or `.noCertificate`.
    public static func presentedChain(
        serverName: String,
        port: Int,
        connectAddress: String? = nil,
        timeout: TimeAmount = .seconds(20),
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws(TransportError) -> [PresentedCertificate] {
        let seen = NIOLockedValueBox<[[UInt8]]>([])
        let context = try makeContext(host: serverName, verification: .noHostnameVerification)
        let callback: VerifyCallback = { certificates, promise in
            seen.withLockedValue { $0 = certificates.compactMap { try? $0.toDERBytes() } }
            promise.succeed(.failed)
        }
        let configuration = PinnedTLSConfiguration(
            serverName: serverName,
            port: port,
            connectAddress: connectAddress,
            timeout: timeout
        )
        do {
            let handshake = Handshake(
                host: serverName,
                isIP: (try? SocketAddress(ipAddress: serverName, port: 0)) != nil,
                timeout: timeout,
                context: context,
                callback: callback,
                outcome: Outcome()
            )
            let connection = try await open(configuration, group: group, handshake: handshake) {
                $0.eventLoop.makeSucceededFuture($0)
            }
            // Unreachable in practice (the callback always fails the handshake); never keep the connection.
            _ = try? await connection.output.close()
        } catch {
            if seen.withLockedValue({ $0.isEmpty }) { throw error }
        }
        let ders = seen.withLockedValue { $0 }
        guard !ders.isEmpty else { throw .noCertificate(host: serverName) }
        return try ders.map { der throws(TransportError) in
            do {
                let certificate = try Certificate(derEncoded: der)
                return PresentedCertificate(
                    subject: "\(certificate.subject)",
                    issuer: "\(certificate.issuer)",
                    notValidBefore: certificate.notValidBefore,
                    notValidAfter: certificate.notValidAfter,
                    pin: try SPKIPin(certificate: certificate)
                )
            } catch let error as TransportError {
                throw error
            } catch {
                throw .handshakeFailed(host: serverName, reason: "the server sent a certificate that cannot be parsed")
            }
        }
    }

    // MARK: - Plumbing

    /// The process's TLS contexts, one per verification mode, made on first use and shared by every connection (a
    /// context holds no per-connection state: the verify callback is the handler's).
    private static let contexts = NIOLockedValueBox<[Bool: NIOSSLContext]>([:])

    /// The shared context for `verification` (`.fullVerification` or `.noHostnameVerification`).
    ///
    /// Its trust store is empty: every chain is judged by the handler's callback (swift-certificates against the
    /// configuration's roots, then the pins), so BoringSSL's own store is never consulted. The default store would
    /// read and parse the whole system bundle (`/etc/ssl/certs/ca-certificates.crt`, about 140 certificates) for
    /// each new context, which was a new connection's largest local cost before the contexts were shared.
    private static func makeContext(
        host: String,
        verification: CertificateVerification
    ) throws(TransportError) -> NIOSSLContext {
        let full = verification == .fullVerification
        if let context = contexts.withLockedValue({ $0[full] }) { return context }
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        tls.certificateVerification = verification
        tls.trustRoots = .certificates([])
        do {
            let context = try NIOSSLContext(configuration: tls)
            return contexts.withLockedValue { cached in
                if let existing = cached[full] { return existing }
                cached[full] = context
                return context
            }
        } catch {
            throw .handshakeFailed(host: host, reason: "the TLS context cannot be created")
        }
    }

    private static func open<Output: Sendable>(
        _ configuration: PinnedTLSConfiguration,
        group: any EventLoopGroup,
        handshake: Handshake,
        configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Output>
    ) async throws(TransportError) -> PinnedConnection<Output> {
        let host = configuration.serverName
        let port = configuration.port
        let address = configuration.connectAddress ?? host
        let outcome = handshake.outcome
        let bootstrap = ClientBootstrap(group: group).connectTimeout(configuration.timeout)
        // The caller's handlers are added only once the handshake (with every check) has completed: a refused
        // connection never reaches them. The flatMap runs synchronously on the event loop when the handshake
        // completes, before NIOSSL passes on any application data, so no byte is lost.
        let opened: (channel: any Channel, configured: EventLoopFuture<Output>)
        do {
            opened = try await bootstrap.connect(host: address, port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    let (tls, watcher) = try handshake.handlers(eventLoop: channel.eventLoop)
                    try channel.pipeline.syncOperations.addHandlers(tls, watcher)
                    return (channel, watcher.promise.futureResult.flatMap { configure(channel) })
                }
            }
        } catch {
            throw outcome.error ?? map(error, host: host, port: port)
        }
        let output: Output
        do {
            output = try await opened.configured.get()
        } catch {
            opened.channel.close(promise: nil)
            throw outcome.error ?? map(error, host: host, port: port)
        }
        guard let verified = outcome.verified else {
            opened.channel.close(promise: nil)
            throw .handshakeFailed(host: host, reason: "the certificate was not verified")
        }
        return PinnedConnection(output: output, chainPins: verified.chainPins, pinEvaluation: verified.evaluation)
    }

    private static func map(_ error: any Error, host: String, port: Int) -> TransportError {
        if let error = error as? TransportError { return error }
        if let error = error as? NIOSSLExtraError, error == .failedToValidateHostname {
            return .hostnameMismatch(host: host)
        }
        if let error = error as? ChannelError, case .connectTimeout = error { return .timedOut(host: host, port: port) }
        if let error = error as? NIOConnectionError {
            let reasons = error.connectionErrors.map { "\($0.target): \(Self.reason($0.error))" }
            let reason = reasons.isEmpty ? "the name does not resolve" : reasons.joined(separator: "; ")
            return .connectFailed(host: host, port: port, reason: reason)
        }
        if error is IOError || error is SocketAddressError {
            return .connectFailed(host: host, port: port, reason: Self.reason(error))
        }
        if let error = error as? ChannelError, case .connectPending = error {
            return .connectFailed(host: host, port: port, reason: "\(error)")
        }
        return .handshakeFailed(host: host, reason: "\(error)")
    }

    private static func reason(_ error: any Error) -> String {
        if let error = error as? IOError { return String(cString: strerror(error.errnoCode)).lowercased() }
        return "\(error)"
    }

    private static func report(
        _ entry: HostPinPolicy,
        _ failure: TransportError,
        _ host: String,
        _ port: Int,
        _ chainPins: [SPKIPin],
        _ enforced: Bool,
        _ date: Date
    ) -> PinFailureReport {
        PinFailureReport(
            hostname: host,
            port: port,
            notedHostname: entry.host,
            servedChainPins: chainPins.map(\.base64),
            knownPins: entry.pins.sorted().map(\.base64),
            result: failure.reportResult,
            enforced: enforced,
            expirationDate: entry.expirationDate,
            reportURL: entry.reportURL,
            date: date
        )
    }
}

extension TransportError {
    fileprivate var reportResult: String {
        switch self {
        case .noBackupPin: "noBackupPin"
        default: "pinMismatch"
        }
    }

    fileprivate var seenPins: [SPKIPin] {
        switch self {
        case .pinMismatch(_, _, let seen): seen.compactMap(SPKIPin.init(base64:))
        case .noBackupPin(_, let pins): pins.compactMap(SPKIPin.init(base64:))
        default: []
        }
    }

    fileprivate var isPinFailure: Bool {
        switch self {
        case .pinMismatch, .noBackupPin: true
        default: false
        }
    }
}

/// NIOSSL's verification callback type, marked `@Sendable` so it can cross into the channel initializer.
private typealias VerifyCallback =
    @Sendable (
        [NIOSSLCertificate], EventLoopPromise<NIOSSLVerificationResultWithMetadata>
    ) -> Void

/// What the verification callback found, read after the handshake to give a typed error.
private final class Outcome: Sendable {
    private struct State {
        var error: TransportError?
        var verified: ChainVerifier.Verified?
    }
    private let state = NIOLockedValueBox(State())

    func set(error: TransportError) { state.withLockedValue { $0.error = error } }
    func set(verified: ChainVerifier.Verified) { state.withLockedValue { $0.verified = verified } }
    var error: TransportError? { state.withLockedValue { $0.error } }
    var verified: ChainVerifier.Verified? { state.withLockedValue { $0.verified } }
}

/// Completes `promise` when the TLS handshake completes, fails it on an error, on close, or after `timeout`.
private final class HandshakeWatcher: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    let promise: EventLoopPromise<Void>
    private let timeout: TimeAmount
    private var timer: Scheduled<Void>?
    private var done = false

    init(promise: EventLoopPromise<Void>, timeout: TimeAmount) {
        self.promise = promise
        self.timeout = timeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(in: timeout) {
            let (watcher, context) = loopBound.value
            watcher.finish(.failure(ChannelError.connectTimeout(watcher.timeout)))
            context.close(promise: nil)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? TLSUserEvent, case .handshakeCompleted = event { finish(.success(())) }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        finish(.failure(error))
        context.fireErrorCaught(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        finish(.failure(ChannelError.eof))
        context.fireChannelInactive()
    }

    private func finish(_ result: Result<Void, any Error>) {
        guard !done else { return }
        done = true
        timer?.cancel()
        promise.completeWith(result)
    }
}

extension PinnedTLS {
    /// One TLS handshake's checks: the context, the verification callback (chain, hostname, pins) and what the
    /// callback found, read after the handshake for a typed error.
    fileprivate struct Handshake: Sendable {
        let host: String
        let isIP: Bool
        let timeout: TimeAmount
        let context: NIOSSLContext
        let callback: VerifyCallback
        let outcome: Outcome

        init(
            host: String,
            isIP: Bool,
            timeout: TimeAmount,
            context: NIOSSLContext,
            callback: @escaping VerifyCallback,
            outcome: Outcome
        ) {
            self.host = host
            self.isIP = isIP
            self.timeout = timeout
            self.context = context
            self.callback = callback
            self.outcome = outcome
        }

        /// The full checks of `configuration`: the chain to its trust roots, the server identity, then its pins.
        init(_ configuration: PinnedTLSConfiguration) throws(TransportError) {
            let host = configuration.serverName
            let verifier = ChainVerifier(
                serverName: host,
                port: configuration.port,
                roots: try configuration.trustRoots.store(),
                policy: configuration.pinPolicy
            )
            let outcome = Outcome()
            let now = configuration.now
            let reporter = configuration.reporter
            let port = configuration.port
            let policy = configuration.pinPolicy
            let callback: VerifyCallback = { certificates, promise in
                let presented = certificates.compactMap { try? $0.toDERBytes() }
                promise.completeWithTask { () async -> NIOSSLVerificationResultWithMetadata in
                    let verified: ChainVerifier.Verified
                    do throws(TransportError) {
                        verified = try await verifier.verify(presented: presented, now: now())
                    } catch {
                        outcome.set(error: error)
                        if let entry = policy?.entry(for: host), error.isPinFailure {
                            reporter?.pinFailure(report(entry, error, host, port, error.seenPins, true, now()))
                        }
                        return .failed
                    }
                    guard let chain = try? verified.chainDER.map({ try NIOSSLCertificate(bytes: $0, format: .der) }),
                        !chain.isEmpty
                    else {
                        outcome.set(
                            error: .untrustedChain(host: host, reason: "the validated chain cannot be encoded")
                        )
                        return .failed
                    }
                    outcome.set(verified: verified)
                    if case .expired(let entry, let failure) = verified.evaluation {
                        reporter?.pinFailure(report(entry, failure, host, port, verified.chainPins, false, now()))
                    }
                    return .certificateVerified(VerificationMetadata(ValidatedCertificateChain(chain)))
                }
            }
            self.init(
                host: host,
                isIP: (try? SocketAddress(ipAddress: host, port: 0)) != nil,
                timeout: configuration.timeout,
                context: try makeContext(host: host, verification: .fullVerification),
                callback: callback,
                outcome: outcome
            )
        }

        /// The TLS handler and the watcher that completes when its handshake does (or fails, closes, times out).
        func handlers(eventLoop: any EventLoop) throws -> (NIOSSLClientHandler, HandshakeWatcher) {
            let tls = try NIOSSLClientHandler(
                context: context,
                serverHostname: isIP ? nil : host,
                customVerificationCallbackWithMetadata: callback
            )
            return (tls, HandshakeWatcher(promise: eventLoop.makePromise(), timeout: timeout))
        }
    }
}
