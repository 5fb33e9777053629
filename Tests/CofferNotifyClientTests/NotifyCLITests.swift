import CofferIMAP
import CofferNotify
import CofferNotifyClient
import CofferPush
import CofferTesting
import CofferTransport
import Foundation
import Hummingbird
import HummingbirdTesting
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

extension CLIRunner {
    /// Runs the command on a dispatch thread, so that the wait does not hold one of Swift's cooperative threads
    /// (the live service and TLS validation need them).
    func runOffPool(_ arguments: [String], input: String = "") async throws -> Result {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(with: Swift.Result { try self.run(arguments, input: input) })
            }
        }
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
        let storage = try SQLiteNotifyStorage(path: "\(folder.path)/notify.sqlite")
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
            let dovecot = try TestServers.PinnedDovecot.start(
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
            #expect(registered.status == 0, "\(registered.stderr)")
            #expect(registered.stdout.contains("Registered push session"))
            let sessions = try await storage.allSessions()
            #expect(sessions.count == 1)
            #expect(sessions.first?.deviceName == "test laptop")
            let again = try await cli.runOffPool(
                ["notify", "register", "--server", "http://127.0.0.1:\(port)", "--pin-stdin"],
                input: "\(Self.pin)\n"
            )
            #expect(again.status == 1)
            #expect(again.stderr.contains("already has a push session"))
            // Status needs no PIN: nothing on standard input.
            let status = try await cli.runOffPool(["notify", "status"])
            #expect(status.status == 0, "\(status.stderr)")
            #expect(status.stdout.contains("Push session \(sessions[0].id) with http://127.0.0.1:\(port)"))
            #expect(status.stdout.contains("afterFirstUnlockThisDeviceOnly"))

            // A delivery: Dovecot's ox driver tells the service, which seals a push to the session.
            let subject = "Push canary subject 4b7e"
            let sender = "push-canary-sender@example.org"
            try dovecot.deliver(
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
        }
    }
}
