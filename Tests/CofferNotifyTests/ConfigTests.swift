import CofferNotify
import CofferPush
import Foundation
import PostgresNIO
import Testing

@Suite struct ConfigTests {
    func write(_ text: String, mode: Int) throws -> (String, URL) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("coffer-notify-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let file = folder.appendingPathComponent("notify.json")
        try Data(text.utf8).write(to: file)
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: file.path)
        return (file.path, folder)
    }

    @Test(arguments: [
        (#"{"storage":"oracle"}"#, 0o600), (#"{"storage":"postgres"}"#, 0o600), ("not json", 0o600),
        (#"{"storage":"postgres","postgres":{"host":"h","user":"u","database":"d","password":"p"}}"#, 0o644),
    ])
    func badConfigsAreRefusedWithASentence(text: String, mode: Int) throws {
        let (path, folder) = try write(text, mode: mode)
        defer { try? FileManager.default.removeItem(at: folder) }
        #expect(throws: NotifyError.self) { try NotifyConfig.load(path: path) }
        do {
            _ = try NotifyConfig.load(path: path)
        } catch {
            #expect(!error.description.contains("\"p\""))
        }
    }

    @Test func aPostgresConfigWithAPrivatePasswordLoads() throws {
        let (path, folder) = try write(
            #"{"storage":"postgres","postgres":{"host":"h","port":6543,"user":"u","database":"d","password":"p"}}"#,
            mode: 0o600
        )
        defer { try? FileManager.default.removeItem(at: folder) }
        let config = try NotifyConfig.load(path: path)
        #expect(config.postgresConfiguration?.port == 6543)
        #expect(try NotifyConfig.load(path: write("{}", mode: 0o644).0).postgresConfiguration == nil)
    }

    /// `serve` and `sessions list|revoke` with `--config` use the PostgreSQL database it names.
    @Test(.enabled(if: Engine.postgresAddress != nil, "set COFFER_TEST_POSTGRES (scripts/postgres.sh start)"))
    func theBinaryUsesPostgresWhenTheConfigSaysSo() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: NotifyBinary.path), "build coffer-notify first")
        let configuration = try await Engine.freshPostgresDatabase()
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("coffer-notify-\(UUID())")
        defer { try? FileManager.default.removeItem(at: root) }
        let home = try NotifyHome(explicit: root.appendingPathComponent("home").path)
        let storage = try await PostgresNotifyStorage(
            configuration: configuration,
            masterKey: try home.masterKey(),
            logger: Engine.quietLogger
        )
        defer { storage.shutdown() }
        let date = Date()
        try await storage.createSession(
            NotifySession(
                id: "pg-session",
                user: "alice",
                deviceName: "phone on postgres",
                tokenHash: SessionToken().hash,
                created: date,
                lastSeen: date,
                expires: date + 3600,
                pushPublicKey: WebPush.UserAgentKeys().subscription.publicKeyBytes,
                pushAuthSecret: Array(repeating: 3, count: 16)
            )
        )
        let (host, port) = (configuration.host ?? "", configuration.port ?? 0)
        let config = root.appendingPathComponent("notify.json")
        try Data(
            #"{"storage":"postgres","postgres":{"host":"\#(host)","port":\#(port),"user":"coffer","database":"\#(configuration.database ?? "")","tls":false}}"#
                .utf8
        ).write(to: config)
        let environment = ["HOME": root.path, "PATH": "/usr/bin:/bin"]
        let common = ["--data-dir", home.path, "--config", config.path]
        let list = try NotifyBinary.run(["sessions", "list"] + common, environment: environment)
        #expect(list.code == 0, "\(list.output)")
        #expect(list.output.contains("phone on postgres"))
        #expect(!FileManager.default.fileExists(atPath: home.database))
        let revoke = try NotifyBinary.run(["sessions", "revoke", "pg-session"] + common, environment: environment)
        #expect(revoke.code == 0, "\(revoke.output)")
        #expect(try await storage.session(id: "pg-session")?.revoked == true)
    }
}
