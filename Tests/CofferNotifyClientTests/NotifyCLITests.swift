import CofferCrypto
import CofferIMAP
import CofferNotify
import CofferNotifyClient
import CofferPush
import CofferTesting
import CofferTransport
import Foundation
import Hummingbird
import HummingbirdTesting
import HummingbirdWebSocket
import Logging
import Testing

/// An authenticator set after the service starts (Dovecot needs the service's port first).
final class AuthenticatorBox: MailAuthenticator, @unchecked Sendable {
    private let lock = NSLock()
    private var inner: (any MailAuthenticator)?

    func set(_ authenticator: any MailAuthenticator) { lock.withLock { inner = authenticator } }

    func verify(user: String, password: String) async throws(NotifyError) {
        guard let inner = lock.withLock({ inner }) else { throw .mailServerUnavailable("not set yet") }
        try await inner.verify(user: user, password: password)
    }
}

extension TestServers.PinnedDovecot {
    func imapConfiguration() throws -> IMAPConfiguration {
        let pins = try ["a", "backup"].map { key in
            guard let pin = SPKIPin(base64: try self.pin(key)) else { throw TestSetupError(reason: "bad pin \(key)") }
            return pin
        }
        return IMAPConfiguration(
            tls: PinnedTLSConfiguration(
                serverName: Self.name,
                port: server.imapsPort,
                connectAddress: "127.0.0.1",
                trustRoots: .caBundle(path: "\(certs)/ca.pem"),
                pinPolicy: try PinPolicy(hosts: [HostPinPolicy(host: Self.name, pins: pins)]),
                timeout: .seconds(60)
            )
        )
    }
}

/// `coffer notify` and `coffer push-handler` against a live coffer-notify (in process, on loopback) whose Dovecot
/// (the test server, with its push plugin pointed at the service) checks the credentials and sends the events.
@Suite(.serialized) struct NotifyCLITests {
    static let pin = "582914"
    static let eventSecret = Array("dovecot-event-secret-for-client-tests".utf8)

    @Test func registerStatusPushHandlerAndUnregister() async throws {
        let folder = TemporaryDirectory(prefix: "coffer-notify-cli-service")
        let storage = try SQLiteNotifyStorage(
            path: "\(folder.path)/notify.sqlite",
            masterKey: SecretBytes(copying: Array(repeating: UInt8(0x5a), count: 32))
        )
        var logger = Logger(label: "coffer-notify-client-tests")
        logger.logLevel = .warning
        let box = AuthenticatorBox()
        let service = NotifyService(
            storage: storage,
            authenticator: box,
            settings: NotifyService.Settings(eventSecret: Self.eventSecret),
            logger: logger
        )
        try await Application(router: NotifyAPI.router(service: service)).test(.live) { client in
            let port = try #require(client.port)
            let secret = String(decoding: Self.eventSecret, as: UTF8.self)
            let dovecot = try await TestServers.PinnedDovecot.start(
                pushURL: "http://dovecot:\(secret)@127.0.0.1:\(port)/v1/events/dovecot"
            )
            defer { dovecot.stop() }
            box.set(IMAPMailAuthenticator(configuration: try dovecot.imapConfiguration()))

            let cli = CLIRunner(prefix: "coffer-notify-cli", ownRuntime: true)
            #expect(try await cli.runOffPool(["init", "--account", "alice"]).status == 0)
            #expect(try await cli.runOffPool(["protect", "pin", "--pin-stdin"], input: "\(Self.pin)\n").status == 0)
            let added = try await cli.runOffPool(
                [
                    "account", "add", "--imap", "imaps://\(TestServers.PinnedDovecot.name):\(dovecot.server.imapsPort)",
                    "--user", TestServers.PinnedDovecot.user, "--ca-file", "\(dovecot.certs)/ca.pem", "--connect",
                    "127.0.0.1", "--pin-stdin", "--password-stdin", "--pin-sha256", try dovecot.pin("a"),
                    "--pin-sha256", try dovecot.pin("backup"),
                ],
                input: "\(Self.pin)\n\(TestServers.PinnedDovecot.password)\n"
            )
            #expect(added.status == 0, "\(added.stderr)")

            let none = try await cli.runOffPool(["notify", "status"])
            #expect(none.stdout.contains("No push session"), "\(none.stdout)\(none.stderr)")
            let registered = try await cli.runOffPool(
                [
                    "notify", "register", "--server", "http://127.0.0.1:\(port)", "--device-name", "test laptop",
                    "--pin-stdin",
                ],
                input: "\(Self.pin)\n"
            )
            try #require(registered.status == 0, "\(registered.stderr)")
            #expect(registered.stdout.contains("Registered push session"))
            let sessions = try await storage.allSessions()
            try #require(sessions.count == 1)
            #expect(sessions.first?.deviceName == "test laptop")
            let twice = try await cli.runOffPool(
                ["notify", "register", "--server", "http://127.0.0.1:\(port)", "--pin-stdin"],
                input: "\(Self.pin)\n"
            )
            #expect(twice.status == 1)
            #expect(twice.stderr.contains("already has a push session"))
            // Status needs no PIN: nothing on standard input.
            let status = try await cli.runOffPool(["notify", "status"])
            #expect(status.status == 0, "\(status.stderr)")
            #expect(status.stdout.contains("Push session \(sessions[0].id) with http://127.0.0.1:\(port)"))
            #expect(status.stdout.contains("afterFirstUnlockThisDeviceOnly"))

            // A delivery: Dovecot's ox driver tells the service, which seals a push to the session.
            let subject = "Push canary subject 4b7e"
            let sender = "push-canary-sender@example.org"
            try await dovecot.deliver(
                Array(
                    ("From: Canary <\(sender)>\r\nTo: alice@coffer.test\r\nSubject: \(subject)\r\n"
                        + "Message-ID: <push-1@example.org>\r\n\r\nHello.\r\n").utf8
                )
            )
            let pending = try await service.pending(for: sessions[0], wait: .seconds(20))
            let body = try #require(pending.first?.body)
            #expect(body.count == 4096)

            // The push handler: no PIN (nothing on standard input but the push), nothing persisted.
            let before = Set(cli.home.allFiles())
            let xdg = TemporaryDirectory(prefix: "coffer-push-xdg")
            var handlerCLI = cli
            for variable in ["XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "HOME"] {
                handlerCLI.extraEnvironment[variable] = "\(xdg.path)/\(variable)"
            }
            handlerCLI.extraEnvironment["DBUS_SESSION_BUS_ADDRESS"] = nil
            let shown = try await handlerCLI.runOffPool(["push-handler", "--stdout"], input: Base64URL.encode(body))
            #expect(shown.status == 0, "\(shown.stderr)")
            #expect(shown.stdout.contains(subject))
            #expect(shown.stdout.contains(sender))
            #expect(!shown.stderr.contains(subject))
            #expect(Set(cli.home.allFiles()) == before)
            #expect(xdg.allFiles().isEmpty)
            let hits = CanaryScanner.occurrences(
                of: [Array(subject.utf8), Array(sender.utf8)],
                under: [cli.home.path, xdg.path, folder.path]
            )
            #expect(hits.isEmpty, "\(hits)")

            // A push sealed for another session's key, and a changed one, are refused with a sentence.
            let foreign = try WebPush.seal(
                Array(#"{"v":1,"type":"new-mail","subject":"x"}"#.utf8),
                to: WebPush.UserAgentKeys().subscription
            )
            let refused = try await handlerCLI.runOffPool(
                ["push-handler", "--stdout"],
                input: Base64URL.encode(foreign)
            )
            #expect(refused.status == 1)
            #expect(refused.stderr.contains("sealed for another session or changed"))
            var tampered = body
            tampered[2000] ^= 1
            let changed = try await handlerCLI.runOffPool(
                ["push-handler", "--stdout"],
                input: Base64URL.encode(tampered)
            )
            #expect(changed.status == 1)
            #expect(!changed.stdout.contains(subject))

            // Unregister: revoked on the service, keys gone here.
            let removed = try await cli.runOffPool(["notify", "unregister", "--pin-stdin"], input: "\(Self.pin)\n")
            #expect(removed.status == 0, "\(removed.stderr)")
            #expect(removed.stdout.contains("revoked on the service"))
            #expect(try await storage.allSessions().first?.revoked == true)
            let after = try await cli.runOffPool(["notify", "status"])
            #expect(after.stdout.contains("No push session"))
            let noKey = try await handlerCLI.runOffPool(["push-handler", "--stdout"], input: Base64URL.encode(body))
            #expect(noKey.status == 1)
            #expect(noKey.stderr.contains("no push session"))

            // Logout drops the push items with the MainKey: no keychain item of the account is left.
            let again = try await cli.runOffPool(
                ["notify", "register", "--server", "http://127.0.0.1:\(port)", "--pin-stdin"],
                input: "\(Self.pin)\n"
            )
            #expect(again.status == 0, "\(again.stderr)")
            let keychainFolder = "\(cli.home.path)/keychain"
            let withSession = TemporaryDirectory.files(below: keychainFolder).filter { !$0.contains("/.lock") }.count
            let out = try await cli.runOffPool(["logout", "--yes", "--pin-stdin"], input: "\(Self.pin)\n")
            #expect(out.status == 0, "\(out.stderr)")
            // ...and the logout ended the session on the service too.
            let ended = try await storage.allSessions()
            #expect(ended.count == 2 && ended.allSatisfy(\.revoked), "\(ended.map(\.revoked))")
            let left = TemporaryDirectory.files(below: keychainFolder).filter { !$0.contains("/.lock") }
            #expect(left.isEmpty, "\(withSession) items before logout, left: \(left)")
        }
    }
}

/// The FastSync path end to end: LMTP delivery → Dovecot's ox driver → coffer-notify → push with the KEK →
/// `coffer push-handler` without a PIN → background sync while locked → the message is in the store.
@Suite(.serialized) struct FastSyncCLITests {
    static let pin = NotifyCLITests.pin

    struct Stack {
        let cli: CLIRunner
        let dovecot: TestServers.PinnedDovecot
        let service: NotifyService
        let storage: SQLiteNotifyStorage
        let folder: TemporaryDirectory
        let clock: ServiceClock
    }

    /// A live service with escrow and a Dovecot that posts to it; a protected home with the IMAP account and a push
    /// session (whose token lives `sessionLifetime`, when given).
    func withStack(
        sessionLifetime: TimeInterval? = nil,
        _ body: @escaping @Sendable (Stack) async throws -> Void
    ) async throws {
        let folder = TemporaryDirectory(prefix: "coffer-fastsync-service")
        let storage = try SQLiteNotifyStorage(
            path: "\(folder.path)/notify.sqlite",
            masterKey: SecretBytes(copying: Array(repeating: UInt8(0x5a), count: 32))
        )
        var logger = Logger(label: "coffer-notify-client-tests")
        logger.logLevel = .warning
        let box = AuthenticatorBox()
        let clock = ServiceClock()
        var settings = NotifyService.Settings(eventSecret: NotifyCLITests.eventSecret)
        if let sessionLifetime { settings.sessionLifetime = sessionLifetime }
        var service = NotifyService(
            storage: storage,
            authenticator: box,
            settings: settings,
            logger: logger,
            now: { clock.now() }
        )
        service.escrow = try FastSyncEscrow(
            records: try SQLiteEscrowRecords(path: "\(folder.path)/escrow.sqlite"),
            masterKey: SecretBytes(copying: Array(repeating: UInt8(3), count: 32))
        )
        let configured = service
        // The service as `coffer-notify serve` runs it: the API and the WebSocket stream the agent holds.
        let application = Application(
            router: NotifyAPI.router(service: configured),
            server: .http1WebSocketUpgrade(webSocketRouter: NotifyAPI.webSocketRouter(service: configured))
        )
        try await application.test(.live) { client in
            let port = try #require(client.port)
            let secret = String(decoding: NotifyCLITests.eventSecret, as: UTF8.self)
            let dovecot = try await TestServers.PinnedDovecot.start(
                pushURL: "http://dovecot:\(secret)@127.0.0.1:\(port)/v1/events/dovecot"
            )
            defer { dovecot.stop() }
            box.set(IMAPMailAuthenticator(configuration: try dovecot.imapConfiguration()))
            let cli = CLIRunner(prefix: "coffer-fastsync-cli", ownRuntime: true)
            #expect(try await cli.runOffPool(["init", "--account", "alice"]).status == 0)
            #expect(try await cli.runOffPool(["protect", "pin", "--pin-stdin"], input: "\(Self.pin)\n").status == 0)
            let added = try await cli.runOffPool(
                [
                    "account", "add", "--imap",
                    "imaps://\(TestServers.PinnedDovecot.name):\(dovecot.server.imapsPort)", "--user",
                    TestServers.PinnedDovecot.user, "--ca-file", "\(dovecot.certs)/ca.pem", "--connect", "127.0.0.1",
                    "--pin-stdin", "--password-stdin",
                ],
                input: "\(Self.pin)\n\(TestServers.PinnedDovecot.password)\n"
            )
            #expect(added.status == 0, "\(added.stderr)")
            let registered = try await cli.runOffPool(
                ["notify", "register", "--server", "http://127.0.0.1:\(port)", "--pin-stdin"],
                input: "\(Self.pin)\n"
            )
            #expect(registered.status == 0, "\(registered.stderr)")
            try await body(
                Stack(cli: cli, dovecot: dovecot, service: configured, storage: storage, folder: folder, clock: clock)
            )
        }
    }

    func deliver(_ stack: Stack, subject: String) async throws -> [UInt8] {
        let session = try #require(try await stack.storage.allSessions().first)
        try await stack.dovecot.deliver(
            Array(
                ("From: FastSync Canary <fastsync-sender@example.org>\r\nTo: alice@coffer.test\r\n"
                    + "Subject: \(subject)\r\nMessage-ID: <\(UUID())@example.org>\r\n\r\nBody of \(subject).\r\n")
                    .utf8
            )
        )
        let pending = try await stack.service.pending(for: session, wait: .seconds(20))
        let body = try #require(pending.last?.body)
        _ = try await stack.storage.ack(sessionID: session.id, ids: pending.map(\.id))
        return body
    }

    /// A token within `PushTokens.refreshAhead` of its expiry is refreshed at the next unlock, and the device keeps
    /// the new one: the next refresh is made with it (it ends the old token), and unregistering works.
    @Test func anUnlockNearTheTokensExpiryRefreshesItAndTheDeviceKeepsTheNewToken() async throws {
        try await withStack(sessionLifetime: 5 * 24 * 3600) { stack in
            let cli = stack.cli
            let registered = try #require(try await stack.storage.allSessions().first)
            #expect(registered.previousTokenHash == nil)
            let listed = try await cli.runOffPool(["list", "--pin-stdin"], input: "\(Self.pin)\n")
            #expect(listed.status == 0, "\(listed.stderr)")
            let first = try #require(try await stack.storage.allSessions().first)
            #expect(first.id == registered.id)
            #expect(first.tokenHash != registered.tokenHash)
            #expect(first.previousTokenHash == registered.tokenHash)
            // Made with the token the first refresh gave: that use ended the registration's token.
            let again = try await cli.runOffPool(["list", "--pin-stdin"], input: "\(Self.pin)\n")
            #expect(again.status == 0, "\(again.stderr)")
            let second = try #require(try await stack.storage.allSessions().first)
            #expect(second.previousTokenHash == first.tokenHash)
            #expect(second.tokenHash != first.tokenHash)
            let removed = try await cli.runOffPool(["notify", "unregister", "--pin-stdin"], input: "\(Self.pin)\n")
            #expect(removed.status == 0, "\(removed.stderr)")
            #expect(try await stack.storage.allSessions().first?.revoked == true)
        }
    }

    @Test func aPushSyncsWhileLockedAndTheKEKIsNeverOnDisk() async throws {
        try await withStack { stack in
            let cli = stack.cli
            let on = try await cli.runOffPool(["fastsync", "on", "--for", "1h", "--pin-stdin"], input: "\(Self.pin)\n")
            #expect(on.status == 0, "\(on.stderr)")
            #expect(on.stdout.contains("FastSync is on until"))
            let status = try await cli.runOffPool(["fastsync", "status"])
            #expect(status.stdout.contains("FastSync is on until"), "\(status.stdout)\(status.stderr)")
            let session = try #require(try await stack.storage.allSessions().first)
            let escrowed = try #require(try await stack.service.escrow?.kek(for: session, now: Date()))

            let subject = "FastSync canary subject 3c9d"
            let body = try await deliver(stack, subject: subject)
            // No PIN on standard input: only the push.
            let handled = try await cli.runOffPool(["push-handler", "--stdout"], input: Base64URL.encode(body))
            #expect(handled.status == 0, "\(handled.stderr)")
            #expect(handled.stdout.contains(subject))
            #expect(handled.stdout.contains("FastSync: 1 new message sealed in the store while locked."))

            let listed = try await cli.runOffPool(["list", "--pin-stdin"], input: "\(Self.pin)\n")
            #expect(listed.stdout.contains(subject), "\(listed.stdout)\(listed.stderr)")

            // Neither the KEK (raw or as text), nor the token, nor the subject in the clear in any Coffer file.
            let needles: [[UInt8]] = [
                escrowed.kek, Array(Base64URL.encode(escrowed.kek).utf8), Array(subject.utf8),
                Array("fastsync-sender@example.org".utf8),
            ]
            let hits = CanaryScanner.occurrences(of: needles, under: [cli.home.path, stack.folder.path])
            #expect(hits.isEmpty, "\(hits)")

            // Off: the record is gone here, the key on the service; the next push brings no key and syncs nothing.
            let off = try await cli.runOffPool(["fastsync", "off", "--pin-stdin"], input: "\(Self.pin)\n")
            #expect(off.stdout.contains("deleted here and the key on the service"), "\(off.stdout)\(off.stderr)")
            #expect(try await stack.service.escrow?.kekExpiry(sessionID: session.id, now: Date()) == nil)
            let after = try await deliver(stack, subject: "After off 11aa")
            let plain = try await cli.runOffPool(["push-handler", "--stdout"], input: Base64URL.encode(after))
            #expect(plain.status == 0)
            #expect(!plain.stdout.contains("FastSync:"))
        }
    }

    /// One-shot, a change of PIN proves the PIN without keeping the key, so the session's token is not at hand: the
    /// record is deleted at once, the service's key at the next unlock. A key a service kept anyway opens nothing.
    @Test func aChangeOfPINTurnsFastSyncOffHereThenOnTheServiceAndAKeptKeyOpensNothing() async throws {
        try await withStack { stack in
            let cli = stack.cli
            let on = try await cli.runOffPool(["fastsync", "on", "--for", "1h", "--pin-stdin"], input: "\(Self.pin)\n")
            #expect(on.status == 0, "\(on.stderr)")
            let session = try #require(try await stack.storage.allSessions().first)
            let escrow = try #require(stack.service.escrow)
            let escrowed = try #require(try await escrow.kek(for: session, now: Date()))
            let changed = try await cli.runOffPool(
                ["protect", "pin", "--pin-stdin"],
                input: "\(Self.pin)\n864209\n"
            )
            #expect(changed.status == 0, "\(changed.stderr)")
            #expect(
                changed.stdout.contains("the service is told at the next unlock"),
                "\(changed.stdout)\(changed.stderr)"
            )
            #expect(try await cli.runOffPool(["fastsync", "status"]).stdout.contains("FastSync is off."))
            #expect(try await escrow.kekExpiry(sessionID: session.id, now: Date()) != nil)
            let unlocked = try await cli.runOffPool(["list", "--pin-stdin"], input: "864209\n")
            #expect(unlocked.status == 0, "\(unlocked.stderr)")
            #expect(try await escrow.kekExpiry(sessionID: session.id, now: Date()) == nil)

            // A service that kept the key anyway (put back here): the push brings it, and it opens nothing.
            let upload = try FastSyncEscrowFormat.seal(
                kek: escrowed.kek,
                to: try await escrow.publicKey(user: session.user),
                sessionID: session.id,
                expires: escrowed.expires
            )
            try await escrow.put(upload, for: session, now: Date())
            let body = try await deliver(stack, subject: "After a PIN change 5e7f")
            let handled = try await cli.runOffPool(["push-handler", "--stdout"], input: Base64URL.encode(body))
            #expect(handled.status == 0, "\(handled.stderr)")
            #expect(!handled.stdout.contains("FastSync:"), "\(handled.stdout)")
            let listed = try await cli.runOffPool(["list", "--pin-stdin"], input: "864209\n")
            #expect(!listed.stdout.contains("After a PIN change 5e7f"), "no sync happened while locked")
        }
    }

    @Test func anExpiredRecordIsRefusedEvenWhenTheServiceSendsTheKey() async throws {
        try await withStack { stack in
            let cli = stack.cli
            let on = try await cli.runOffPool(["fastsync", "on", "--for", "2s", "--pin-stdin"], input: "\(Self.pin)\n")
            #expect(on.status == 0, "\(on.stderr)")
            // The service's clock lags an hour behind: it still thinks the key is valid and sends it.
            stack.clock.shift(-3600)
            try await Task.sleep(for: .seconds(3))
            let subject = "Expired canary 8e21"
            let body = try await deliver(stack, subject: subject)
            let handled = try await cli.runOffPool(["push-handler", "--stdout"], input: Base64URL.encode(body))
            #expect(handled.stdout.contains(subject))
            #expect(handled.status == 1)
            #expect(handled.stderr.contains("FastSync has expired on this device"), "\(handled.stderr)")
            let listed = try await cli.runOffPool(["list", "--pin-stdin"], input: "\(Self.pin)\n")
            #expect(!listed.stdout.contains(subject))
            let status = try await cli.runOffPool(["fastsync", "status"])
            #expect(status.stdout.contains("FastSync expired"))
        }
    }
}

extension CLIRunner {
    /// Runs the command on a thread of its own, so that the wait holds none of Swift's cooperative threads (the
    /// live service and TLS validation need them).
    func runOffPool(_ arguments: [String], input: String = "") async throws -> Result {
        try await awaitWaiting { try self.runBlocking(arguments, input: input) }
    }
}
