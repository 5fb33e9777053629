import CofferCrypto
import CofferNotify
import CofferNotifyClient
import CofferPush
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import Testing

/// Accepts one password per user.
struct FakeAuthenticator: MailAuthenticator {
    let passwords: [String: String]

    func verify(user: String, password: String) async throws(NotifyError) {
        guard passwords[user] == password else { throw .wrongCredentials }
    }
}

/// A clock the test moves; the service reads it.
final class ServiceClock: @unchecked Sendable {
    private let lock = NSLock()
    private var offset: TimeInterval = 0

    func now() -> Date { lock.withLock { Date().addingTimeInterval(offset) } }
    func shift(_ seconds: TimeInterval) { lock.withLock { offset += seconds } }
}

/// coffer-notify's API on a temporary SQLite file, with the FastSync escrow, served on a loopback port.
struct LiveService {
    let folder: URL
    let service: NotifyService
    let clock = ServiceClock()

    init() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("coffer-notify-client-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let storage = try SQLiteNotifyStorage(
            path: folder.appendingPathComponent("notify.sqlite").path,
            masterKey: SecretBytes(copying: Array(repeating: UInt8(0x5a), count: 32))
        )
        var logger = Logger(label: "coffer-notify-client-tests")
        logger.logLevel = .warning
        let clock = self.clock
        var service = NotifyService(
            storage: storage,
            authenticator: FakeAuthenticator(passwords: ["alice": "alice-pw"]),
            settings: NotifyService.Settings(eventSecret: Array("secret".utf8)),
            logger: logger,
            now: { clock.now() }
        )
        service.escrow = try FastSyncEscrow(
            records: try SQLiteEscrowRecords(path: folder.appendingPathComponent("escrow.sqlite").path),
            masterKey: SecretBytes(copying: Array(repeating: UInt8(9), count: 32))
        )
        self.service = service
    }

    /// Runs `body` with a client for the live service.
    func run(_ body: @escaping @Sendable (NotifyClient) async throws -> Void) async throws {
        defer { try? FileManager.default.removeItem(at: folder) }
        try await Application(router: NotifyAPI.router(service: service)).test(.live) { client in
            let port = try #require(client.port)
            try await body(NotifyClient(server: NotifyServer(url: "http://127.0.0.1:\(port)")))
        }
    }
}

@Suite struct LiveServiceTests {
    @Test func registerReceiveOpenAckAndRevoke() async throws {
        let live = try LiveService()
        let service = live.service
        try await live.run { client in
            let keys = WebPush.UserAgentKeys()
            let token = try await client.register(user: "alice", password: "alice-pw", deviceName: "laptop", keys: keys)
            #expect(token.token.hasPrefix("cnt1_"))
            #expect(try await client.stream(token: token.token).isEmpty)
            let queued = try await service.handle(
                DovecotEvent(
                    user: "alice",
                    folder: "INBOX",
                    uid: 42,
                    from: "Canary <c@example.org>",
                    subject: "Hi 5e1d"
                )
            )
            #expect(queued == 1)
            let messages = try await client.stream(token: token.token, wait: 1)
            #expect(messages.count == 1)
            let first = try #require(messages.first)
            let body = try #require(Base64URL.decode(first.body))
            let push = try PushHandler.open(body, keys: keys)
            #expect(push.subject == "Hi 5e1d")
            #expect(push.uid == 42)
            // Another session's key does not open it.
            #expect(throws: NotifyClientError.pushNotForThisSession) {
                try PushHandler.open(body, keys: WebPush.UserAgentKeys())
            }
            try await client.ack(token: token.token, ids: messages.map(\.id))
            #expect(try await client.stream(token: token.token).isEmpty)
            try await client.revoke(sessionID: token.sessionID, token: token.token)
            await #expect(throws: NotifyClientError.sessionRevoked) { try await client.stream(token: token.token) }
        }
    }

    @Test func wrongCredentialsAndReusedKeysAreRefused() async throws {
        let live = try LiveService()
        try await live.run { client in
            let keys = WebPush.UserAgentKeys()
            await #expect(
                throws: NotifyClientError.unexpectedStatus(
                    401,
                    "the registration (the mail server refused the user name or password)"
                )
            ) {
                try await client.register(user: "alice", password: "wrong", deviceName: "d", keys: keys)
            }
            _ = try await client.register(user: "alice", password: "alice-pw", deviceName: "d", keys: keys)
            await #expect {
                try await client.register(user: "alice", password: "alice-pw", deviceName: "d", keys: keys)
            } throws: { error in
                guard case .unexpectedStatus(409, _) = error as? NotifyClientError else { return false }
                return true
            }
            await #expect(throws: NotifyClientError.sessionRevoked) {
                try await client.stream(token: "cnt1_" + String(repeating: "A", count: 43))
            }
        }
    }
}
