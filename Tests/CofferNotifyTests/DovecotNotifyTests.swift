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

/// The shared test Dovecot (optionally with the push_notification ox driver posting to a URL), with the notify tests'
/// helpers.
typealias NotifyDovecot = TestServers.PinnedDovecot

extension TestServers.PinnedDovecot {
    /// `coffer-notify serve`'s options for logging in to this Dovecot: its IMAPS address, CA and both pins.
    func serveArguments() throws -> [String] {
        [
            "--imap", "imaps://\(Self.name):\(server.imapsPort)", "--ca-file", "\(certs)/ca.pem",
            "--imap-connect-address", "127.0.0.1", "--pin-sha256", try pin("a"), "--pin-sha256", try pin("backup"),
        ]
    }

    /// Delivers a message given as text.
    func deliver(_ message: String) async throws { try await deliver(Array(message.utf8)) }

    /// Pinned to certificate A and the backup key, as `coffer-notify serve --pin-sha256` would be.
    func configuration() throws -> IMAPConfiguration {
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

    func service(folder: URL) throws -> (NotifyService, SQLiteNotifyStorage) {
        let storage = try SQLiteNotifyStorage(
            path: folder.appendingPathComponent("notify.sqlite").path,
            masterKey: testMasterKey
        )
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
        let dovecot = try await NotifyDovecot.start()
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
        let dovecot = try await NotifyDovecot.start()
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
        let storage = try SQLiteNotifyStorage(
            path: folder.appendingPathComponent("notify.sqlite").path,
            masterKey: testMasterKey
        )
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
            let dovecot = try await NotifyDovecot.start(
                pushURL: "http://dovecot:\(secret)@127.0.0.1:\(port)/v1/events/dovecot"
            )
            defer { dovecot.stop() }
            box.set(IMAPMailAuthenticator(configuration: try dovecot.configuration()))
            let registered = try await client.register(
                device.registration(user: NotifyDovecot.user, password: NotifyDovecot.password)
            )
            try await dovecot.deliver(
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

    func verify(user: String, password: String, client: ClientOrigin) async throws(NotifyError) {
        guard let inner = lock.withLock({ inner }) else { throw .mailServerUnavailable("not set yet") }
        try await inner.verify(user: user, password: password, client: client)
    }
}
