import CofferIMAP
import CofferNotify
import CofferPush
import CofferTesting
import CofferTransport
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import Testing

/// A private Dovecot (Tests/servers/dovecot.py), optionally with the push_notification ox driver posting to a URL.
struct NotifyDovecot {
    static let name = "mail.coffer.test"
    static let user = "alice"
    static let password = "alice-test-password"
    static let harness = TestServers.repoRoot.appendingPathComponent("Tests/servers/dovecot.py").path

    let root: URL
    let dir: String
    let certs: String
    let imapsPort: Int

    static func start(pushURL: String? = nil) throws -> NotifyDovecot {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("coffer-notify-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: root.path)
        let certs = "\(root.path)/certs"
        try TestServers.makeCertificates(in: certs, name: name)
        let dir = "\(root.path)/server"
        let result = try runCommand(
            [
                "/usr/bin/env", "python3", harness, "start", "--dir", dir, "--cert", "\(certs)/a-chain.pem", "--key",
                "\(certs)/a.key", "--user-pass", "\(user):\(password)",
            ] + (pushURL.map { ["--push-url", $0] } ?? [])
        )
        guard result.code == 0, let line = result.output.split(separator: "\n").last,
            let info = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
            let port = info["imaps_port"] as? Int
        else { throw TestSetupError(reason: "the test Dovecot did not start (run scripts/setup.sh): \(result.output)") }
        return NotifyDovecot(root: root, dir: dir, certs: certs, imapsPort: port)
    }

    func stop() {
        _ = try? runCommand(["/usr/bin/env", "python3", Self.harness, "stop", "--dir", dir])
        try? FileManager.default.removeItem(at: root)
    }

    func deliver(_ message: String) throws {
        let file = "\(dir)/message-\(UUID().uuidString).eml"
        try Data(message.utf8).write(to: URL(fileURLWithPath: file))
        let result = try runCommand(
            ["/usr/bin/env", "python3", Self.harness, "deliver", "--dir", dir, "--to", Self.user, "--file", file]
        )
        guard result.code == 0 else { throw TestSetupError(reason: "LMTP delivery failed: \(result.output)") }
    }

    /// Pinned to certificate A and the backup key, as `coffer-notify serve --pin-sha256` would be.
    func configuration() throws -> IMAPConfiguration {
        let pins = try ["a", "backup"].map { key in
            let text = try String(contentsOfFile: "\(certs)/\(key).pin", encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines)
            guard let pin = SPKIPin(base64: text) else { throw TestSetupError(reason: "bad pin \(key)") }
            return pin
        }
        return IMAPConfiguration(
            tls: PinnedTLSConfiguration(
                serverName: Self.name,
                port: imapsPort,
                connectAddress: "127.0.0.1",
                trustRoots: .caBundle(path: "\(certs)/ca.pem"),
                pinPolicy: try PinPolicy(hosts: [HostPinPolicy(host: Self.name, pins: pins)]),
                timeout: .seconds(60)
            )
        )
    }

    func service(folder: URL) throws -> (NotifyService, SQLiteNotifyStorage) {
        let storage = try SQLiteNotifyStorage(path: folder.appendingPathComponent("notify.sqlite").path)
        var logger = Logger(label: "coffer-notify-tests")
        logger.logLevel = .warning
        let service = NotifyService(
            storage: storage,
            authenticator: IMAPMailAuthenticator(configuration: try configuration()),
            settings: NotifyService.Settings(eventSecret: Harness.eventSecret),
            logger: logger
        )
        return (service, storage)
    }
}

@Suite(.serialized) struct DovecotNotifyTests {
    @Test func registrationLogsInOnceAndRefusesAWrongPassword() async throws {
        let dovecot = try NotifyDovecot.start()
        defer { dovecot.stop() }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("coffer-notify-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let (service, storage) = try dovecot.service(folder: folder)
        try await Application(router: NotifyAPI.router(service: service)).test(.router) { client in
            try await client.execute(
                uri: "/v1/sessions",
                method: .post,
                headers: jsonHeaders,
                body: json(Device().registration(user: NotifyDovecot.user, password: "not-the-password"))
            ) { response in
                #expect(response.status == .unauthorized)
                #expect(String(buffer: response.body).contains("refused this user name and password"))
            }
            let registered = try await client.register(
                Device().registration(user: NotifyDovecot.user, password: NotifyDovecot.password)
            )
            try await client.execute(uri: "/v1/sessions", method: .get, headers: bearer(registered.token)) {
                #expect($0.status == .ok)
            }
        }
        #expect(try await storage.allSessions().count == 1)
        // The password is nowhere in the service's folder.
        for file in try FileManager.default.contentsOfDirectory(atPath: folder.path) {
            let bytes = try Data(contentsOf: folder.appendingPathComponent(file))
            #expect(bytes.range(of: Data(NotifyDovecot.password.utf8)) == nil)
        }
    }

    @Test func aServerWithAnotherKeyIsRefusedBeforeTheCredentialsAreSent() async throws {
        let dovecot = try NotifyDovecot.start()
        defer { dovecot.stop() }
        var configuration = try dovecot.configuration()
        let pins = [SPKIPin(subjectPublicKeyInfoDER: [1, 2, 3]), SPKIPin(subjectPublicKeyInfoDER: [4, 5, 6])]
        configuration.tls.pinPolicy = try PinPolicy(hosts: [HostPinPolicy(host: NotifyDovecot.name, pins: pins)])
        let authenticator = IMAPMailAuthenticator(configuration: configuration)
        await #expect {
            try await authenticator.verify(user: NotifyDovecot.user, password: NotifyDovecot.password)
        } throws: { error in
            guard case .mailServerUnavailable = error as? NotifyError else { return false }
            return true
        }
    }

    @Test func dovecotsPushPluginPostsADeliveryThatReachesTheDeviceSealed() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("coffer-notify-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        // The service needs Dovecot's pins and Dovecot needs the service's port: a late-bound authenticator.
        let box = AuthenticatorBox()
        let storage = try SQLiteNotifyStorage(path: folder.appendingPathComponent("notify.sqlite").path)
        var logger = Logger(label: "coffer-notify-tests")
        logger.logLevel = .warning
        let service = NotifyService(
            storage: storage,
            authenticator: box,
            settings: NotifyService.Settings(eventSecret: Harness.eventSecret),
            logger: logger
        )
        let device = Device()
        let subject = "Live canary subject 91c2"
        try await Application(router: NotifyAPI.router(service: service)).test(.live) { client in
            let port = try #require(client.port)
            let secret = String(decoding: Harness.eventSecret, as: UTF8.self)
            let dovecot = try NotifyDovecot.start(
                pushURL: "http://dovecot:\(secret)@127.0.0.1:\(port)/v1/events/dovecot"
            )
            defer { dovecot.stop() }
            box.set(IMAPMailAuthenticator(configuration: try dovecot.configuration()))
            let registered = try await client.register(
                device.registration(user: NotifyDovecot.user, password: NotifyDovecot.password)
            )
            try dovecot.deliver(
                "From: Live Sender <live-sender@example.org>\r\nTo: alice@coffer.test\r\nSubject: \(subject)\r\n"
                    + "Message-ID: <live-1@example.org>\r\n\r\nHello.\r\n"
            )
            let stream = try await client.execute(
                uri: "/v1/stream?wait=20",
                method: .get,
                headers: bearer(registered.token)
            ) { try decode(StreamResponse.self, $0.body) }
            let first = try #require(stream.messages.first)
            let body = try #require(Base64URL.decode(first.body))
            #expect(body.count == 4096)
            let message = try JSONDecoder().decode(PushMessage.self, from: Data(try device.keys.open(body)))
            #expect(message.subject == subject)
            #expect(message.folder == "INBOX")
            #expect(message.uid == 1)
            #expect(message.from?.contains("live-sender@example.org") == true)
        }
    }
}

/// An authenticator set after the service starts (the live test's Dovecot needs the service's port first).
final class AuthenticatorBox: MailAuthenticator, @unchecked Sendable {
    private let lock = NSLock()
    private var inner: (any MailAuthenticator)?

    func set(_ authenticator: any MailAuthenticator) { lock.withLock { inner = authenticator } }

    func verify(user: String, password: String) async throws(NotifyError) {
        guard let inner = lock.withLock({ inner }) else { throw .mailServerUnavailable("not set yet") }
        try await inner.verify(user: user, password: password)
    }
}
