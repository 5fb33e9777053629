import CofferCrypto
import CofferNotify
import Foundation
import Logging
import Testing

@Suite struct HomeTests {
    @Test func theFolderIsPrivateAndTheSecretsAreMadeOnceWithMode0600() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("coffer-notify-\(UUID())")
        defer { try? FileManager.default.removeItem(at: root) }
        let home = try NotifyHome(explicit: nil, environment: ["XDG_DATA_HOME": root.path, "HOME": "/nonexistent"])
        #expect(home.path == root.path + "/coffer-notify")
        let key = try home.masterKey()
        let secret = try home.eventSecret()
        #expect(key.count == 32)
        #expect(secret.count == 43)
        #expect(try home.masterKey() == key)
        #expect(try home.eventSecret() == secret)
        for (path, mode) in [
            (home.path, 0o700), ("\(home.path)/master.key", 0o600), ("\(home.path)/event-secret", 0o600),
        ] {
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            #expect((attributes[.posixPermissions] as? Int) == mode, "\(path)")
        }
        // A second home (another install) gets other secrets.
        let other = try NotifyHome(explicit: root.path + "/other")
        #expect(try other.masterKey() != key)
    }

    @Test func aSecretFileOthersCanReadIsRefused() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("coffer-notify-\(UUID())")
        defer { try? FileManager.default.removeItem(at: root) }
        let home = try NotifyHome(explicit: root.path)
        _ = try home.eventSecret()
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: "\(home.path)/event-secret")
        #expect(throws: NotifyError.self) { try home.eventSecret() }
    }

    @Test func logsCarryNoTokenPasswordSenderOrSubject() async throws {
        let collected = CollectedLogs()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("coffer-notify-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let storage = try SQLiteNotifyStorage(
            path: folder.appendingPathComponent("n.sqlite").path,
            masterKey: testMasterKey
        )
        var logger = Logger(label: "coffer-notify-tests") { _ in CollectingHandler(logs: collected) }
        logger.logLevel = .trace
        let service = NotifyService(
            storage: storage,
            authenticator: FakeAuthenticator(passwords: ["alice": "alice-pw"]),
            settings: NotifyService.Settings(eventSecret: Harness.eventSecret),
            logger: logger
        )
        let device = Device()
        let (session, token) = try await device.registerAlice(with: service, from: "127.0.0.1")
        _ = try await service.authenticate(bearer: token.text)
        let refreshed = try await service.refresh(session)
        _ = try await service.handle(
            DovecotEvent(
                user: "alice",
                folder: "INBOX",
                uid: 9,
                from: "Log Canary <lc@example.org>",
                subject: "LogSubj"
            )
        )
        try await service.revoke(id: session.id, by: session)
        let text = collected.text
        #expect(text.contains("session registered"))
        #expect(text.contains("event handled"))
        for canary in [token.text, refreshed.token.text, "alice-pw", "Log Canary", "lc@example.org", "LogSubj"] {
            #expect(!text.contains(canary))
        }
    }
}

final class CollectedLogs: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    func append(_ line: String) { lock.withLock { lines.append(line) } }
    var text: String { lock.withLock { lines.joined(separator: "\n") } }
}

struct CollectingHandler: LogHandler {
    let logs: CollectedLogs
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        logs.append("\(event.level) \(event.message) \(event.metadata ?? [:]) \(metadata)")
    }
}
