import ArgumentParser
import CofferIMAP
import CofferNotify
import CofferPush
import CofferTransport
import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import HummingbirdWebSocket
import Logging
import NIOSSL
import ServiceLifecycle

/// `coffer-notify`: the notification service and its admin commands.
@main
struct CofferNotifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "coffer-notify",
        abstract: "Coffer's notification service: device sessions, Dovecot events in, encrypted pushes out.",
        subcommands: [Serve.self, Sessions.self]
    )
}

/// Options every subcommand shares.
struct HomeOptions: ParsableArguments {
    @Option(help: "The data folder (default $XDG_DATA_HOME/coffer-notify).")
    var dataDir: String?
    @Option(help: "A JSON config file choosing the storage (sqlite or postgres); see docs/NOTIFY.md.")
    var config: String?

    /// The data folder, and the storage and escrow records the config chooses.
    func open(
        logger: Logger
    ) async throws -> (
        home: NotifyHome, storage: any NotifyStorage, escrow: FastSyncEscrow, postgres: PostgresNotifyStorage?
    ) {
        // Every file the service makes (databases, their WAL and shared memory, secrets) is 0600.
        umask(0o077)
        let home = try NotifyHome(explicit: dataDir)
        let config = try config.map { path throws(NotifyError) in try NotifyConfig.load(path: path) } ?? NotifyConfig()
        let (storage, records, postgres) = try await config.openStorage(home: home, logger: logger)
        return (home, storage, try FastSyncEscrow(records: records, masterKey: home.masterKey()), postgres)
    }
}

/// Refuses every registration: `serve` without `--imap` has no mail server to check credentials with.
struct NoMailServer: MailAuthenticator {
    func verify(user: String, password: String) async throws(NotifyError) {
        throw .mailServerUnavailable("no IMAP server is configured (start coffer-notify serve with --imap).")
    }
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the service (SQLite in the data folder, loopback, a fresh master key and event secret).",
        discussion: """
            With --tls-cert and --tls-key it serves HTTPS (TLS 1.2 or later) and may listen on any address; without \
            them it speaks plain HTTP and listens only on a loopback address, for a TLS terminator in front of it \
            (devices refuse plain HTTP to anything but loopback).
            """
    )

    @OptionGroup var home: HomeOptions
    @Option(help: "The address to listen on.") var host = "127.0.0.1"
    @Option(help: "The port to listen on (0: any free port, printed at start).") var port = 8790
    @Option(help: "The IMAP server that checks credentials: imaps://HOST:PORT (or imap://HOST:PORT for STARTTLS).")
    var imap: String?
    @Option(help: "A PEM bundle of the CAs the IMAP server's chain must lead to (default: the system store).")
    var caFile: String?
    @Option(help: "A base64 SHA-256 SPKI pin of the IMAP server; give at least two (one a backup).")
    var pinSha256: [String] = []
    @Option(help: "Connect to this address instead of the IMAP host name (tests).") var imapConnectAddress: String?
    @Option(help: "Turn on RFC 8030 Web Push with VAPID; the contact (mailto: or https:) push services see.")
    var webPushSubject: String?
    @Option(help: "Serve Prometheus metrics (GET /metrics) on this port of --metrics-host (default: off; 0: any).")
    var metricsPort: Int?
    @Option(help: "The address of the metrics listener.") var metricsHost = "127.0.0.1"
    @Option(help: "A PEM certificate chain (leaf first): serve HTTPS with it and --tls-key.") var tlsCert: String?
    @Option(help: "The PEM private key of --tls-cert.") var tlsKey: String?
    @Option(help: "Seconds from accept to the end of the first request head before a connection is closed.")
    var headerTimeout = 10
    @Option(help: "Seconds a connection may stay idle between requests before it is closed.") var idleTimeout = 60
    @Option(help: "Connections open at once in all (kept below the descriptor limit).") var maxConnections = 4096
    @Option(help: "Connections open at once from one client address (an IPv6 /64 counts as one).")
    var maxConnectionsPerClient = 64
    @Option(help: "Pushes that may wait on one session's stream; an event queues nothing more for a full one.")
    var maxQueuedPerSession = 500
    @Option(
        help: ArgumentHelp(
            "A proxy (CIDR) whose X-Forwarded-For names the client, for login limits and connection caps; repeat it.",
            discussion: "Without it the client is the TCP peer: behind a TLS terminator, give its address."
        )
    )
    var trustedProxy: [String] = []

    /// The trusted proxies from the options.
    func trustedProxies() throws -> [CIDR] {
        try trustedProxy.map { text in
            guard let network = CIDR(text) else {
                throw ValidationError("--trusted-proxy \(text) is not an address or CIDR network.")
            }
            return network
        }
    }

    /// The connection limits from the options.
    func connectionLimits() -> ConnectionLimits {
        var limits = ConnectionLimits()
        limits.headerTimeout = .seconds(headerTimeout)
        limits.perClient = maxConnectionsPerClient
        limits.total = maxConnections
        return limits
    }

    func validate() throws {
        guard headerTimeout > 0, idleTimeout > 0, maxConnections > 0, maxConnectionsPerClient > 0,
            maxQueuedPerSession > 0
        else {
            throw ValidationError("--header-timeout, --idle-timeout and the connection limits must be above 0.")
        }
        _ = try trustedProxies()
        guard (tlsCert == nil) == (tlsKey == nil) else {
            throw ValidationError("--tls-cert and --tls-key go together.")
        }
        if tlsCert == nil, !Loopback.isLoopback(host: host) {
            throw ValidationError(
                "Without --tls-cert and --tls-key coffer-notify speaks plain HTTP, so it listens only on a loopback "
                    + "address (127.0.0.1, ::1, localhost), behind a TLS terminator; give both to listen on \(host)."
            )
        }
    }

    /// The server's TLS settings from --tls-cert and --tls-key, or nil for plain HTTP.
    func tlsConfiguration() throws -> TLSConfiguration? {
        guard let tlsCert, let tlsKey else { return nil }
        let chain: [NIOSSLCertificate]
        let key: NIOSSLPrivateKey
        do {
            chain = try NIOSSLCertificate.fromPEMFile(tlsCert)
            key = try NIOSSLPrivateKey(file: tlsKey, format: .pem)
        } catch {
            throw ValidationError("--tls-cert or --tls-key could not be read as PEM (\(type(of: error))).")
        }
        guard !chain.isEmpty else { throw ValidationError("\(tlsCert) holds no certificate.") }
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: chain.map { .certificate($0) },
            privateKey: .privateKey(key)
        )
        configuration.minimumTLSVersion = .tlsv12
        return configuration
    }

    func run() async throws {
        var logger = Logger(label: "coffer-notify")
        logger.logLevel = .info
        let (home, storage, escrow, postgres) = try await self.home.open(logger: logger)
        let secret = try home.eventSecret()
        let authenticator: any MailAuthenticator =
            if let imap { IMAPMailAuthenticator(configuration: try imapConfiguration(imap)) } else { NoMailServer() }
        let webPush = try webPushSubject.map { subject in
            WebPushSender(signer: try VAPID.Signer(privateKey: try home.vapidKey(), subject: subject))
        }
        var settings = NotifyService.Settings(eventSecret: secret)
        settings.trustedProxies = try trustedProxies()
        settings.maximumQueuedPerSession = maxQueuedPerSession
        var service = NotifyService(
            storage: storage,
            authenticator: authenticator,
            settings: settings,
            logger: logger,
            webPush: webPush
        )
        service.escrow = escrow
        // The descriptor limit raised to the hard limit; the connection cap stays below it, so accepting pauses
        // (and a held connection is closed at its header deadline) before the process runs out of descriptors.
        let descriptors = DescriptorLimit.raise()
        let limits = connectionLimits().fitting(descriptors: descriptors)
        let counter = ConnectionCounter(perClient: limits.perClient, exempt: service.clients)
        // A connection with nothing to read or write for --idle-timeout (twice the longest long-poll) after a
        // request is closed, and one without a whole request head --header-timeout after accept;
        // `/v1/stream/ws` upgrades to a WebSocket (frames ≤ 64 KiB, pinged every 30 s).
        let webSocketResponder = NotifyAPI.webSocketRouter(service: service).buildResponder()
        let channelConfiguration = HTTP1WebSocketUpgradeChannel.Configuration(
            http1: .init(idleTimeout: .seconds(Int64(idleTimeout))),
            ws: .init(maxFrameSize: 64 * 1024)
        )
        let tls = try tlsConfiguration()
        let headerTimeout = limits.headerTimeout
        let server = HTTPServerBuilder { responder in
            let http = GuardedChildChannel(
                HTTP1WebSocketUpgradeChannel(
                    responder: responder,
                    webSocketResponder: webSocketResponder,
                    configuration: channelConfiguration
                ),
                counter: counter,
                headerTimeout: headerTimeout
            )
            if let tls { return try TLSChannel(http, tlsConfiguration: tls) }
            return http
        }
        let application = Application(
            router: NotifyAPI.router(service: service),
            server: server,
            configuration: .init(
                address: .hostname(host, port: port),
                serverName: nil,
                availableConnectionsDelegate: MaximumAvailableConnections(limits.total)
            ),
            services: [PurgeService(service: service)] + metricsListener(service: service, logger: logger)
                + (postgres.map { [PostgresWakeService(storage: $0, service: service)] } ?? []),
            onServerRunning: { channel in
                // One line on stdout that scripts and tests read; never a secret.
                let line = "coffer-notify listening on \(host):\(channel.localAddress?.port ?? port)\n"
                FileHandle.standardOutput.write(Data(line.utf8))
            },
            logger: logger
        )
        logger.info(
            "connection limits",
            metadata: [
                "descriptors": "\(descriptors)", "connections": "\(limits.total)", "perClient": "\(limits.perClient)",
                "headerTimeout": "\(limits.headerTimeout)",
            ]
        )
        logger.info(
            "event secret for Dovecot's ox driver url: \(home.path)/event-secret",
            metadata: ["imap": "\(imap ?? "none")", "tls": "\(tls != nil)"]
        )
        try await application.runService()
    }

    /// The separate metrics listener, when `--metrics-port` is given; it prints its own line when it listens.
    func metricsListener(service: NotifyService, logger: Logger) -> [any Service] {
        guard let metricsPort else { return [] }
        let host = metricsHost
        return [
            Application(
                router: NotifyAPI.metricsRouter(service: service),
                configuration: .init(address: .hostname(host, port: metricsPort), serverName: nil),
                onServerRunning: { channel in
                    let line = "coffer-notify metrics on \(host):\(channel.localAddress?.port ?? metricsPort)\n"
                    FileHandle.standardOutput.write(Data(line.utf8))
                },
                logger: logger
            )
        ]
    }

    func imapConfiguration(_ text: String) throws -> IMAPConfiguration {
        guard let url = URL(string: text), let scheme = url.scheme, let name = url.host, !name.isEmpty else {
            throw ValidationError("--imap must look like imaps://HOST:PORT")
        }
        let security: IMAPSecurity
        switch scheme {
        case "imaps": security = .implicitTLS
        case "imap": security = .startTLS
        default: throw ValidationError("--imap must start with imaps:// or imap://")
        }
        var policy: PinPolicy?
        if !pinSha256.isEmpty {
            let pins = try pinSha256.map { text in
                guard let pin = SPKIPin(base64: text) else { throw ValidationError("--pin-sha256 is not base64") }
                return pin
            }
            policy = try PinPolicy(hosts: [HostPinPolicy(host: name, pins: pins)])
        }
        return IMAPConfiguration(
            tls: PinnedTLSConfiguration(
                serverName: name,
                port: url.port ?? (security == .implicitTLS ? 993 : 143),
                connectAddress: imapConnectAddress,
                trustRoots: caFile.map { .caBundle(path: $0) } ?? .system,
                pinPolicy: policy
            ),
            security: security
        )
    }
}

struct Sessions: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List or revoke sessions, straight on the database.",
        subcommands: [List.self, Revoke.self]
    )

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List every session.")
        @OptionGroup var home: HomeOptions
        @Option(help: "Only this user's sessions.") var user: String?

        func run() async throws {
            let storage = try await home.open(logger: Logger(label: "coffer-notify")).storage
            let all =
                if let user {
                    try await storage.sessions(user: MailUser.canonical(user))
                } else {
                    try await storage.allSessions()
                }
            let format = ISO8601DateFormatter()
            print("id\tuser\tdevice\tcreated\tlast seen\texpires\tstate")
            let now = Date()
            for session in all {
                let state = session.revoked ? "revoked" : session.isLive(at: now) ? "live" : "expired"
                // Names come from users: escaped, so that no escape sequence or tab reaches the terminal.
                print(
                    [
                        TerminalText.escaped(session.id), TerminalText.escaped(session.user),
                        TerminalText.escaped(session.deviceName), format.string(from: session.created),
                        format.string(from: session.lastSeen), format.string(from: session.expires), state,
                    ].joined(separator: "\t")
                )
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Revoke a session by id; its pending pushes go.")
        @OptionGroup var home: HomeOptions
        @Argument(help: "The session id (from `sessions list`).") var id: String

        func run() async throws {
            let (_, storage, escrow, _) = try await home.open(logger: Logger(label: "coffer-notify"))
            // Every step of a revocation but the wake (no stream of this process): its FastSync key goes with it.
            guard try await NotifyService.revokeSession(id: id, storage: storage, escrow: escrow, signal: nil) else {
                throw ValidationError("There is no session \(id).")
            }
            print("revoked \(id)")
        }
    }
}
