import CofferNotify
import CofferPush
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The `coffer-notify` binary: `$COFFER_NOTIFY_BIN`, else `.build/debug/coffer-notify` in the repository.
enum NotifyBinary {
    static var path: String {
        if let path = ProcessInfo.processInfo.environment["COFFER_NOTIFY_BIN"], !path.isEmpty { return path }
        return URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent(".build/debug/coffer-notify").path
    }

    static func run(_ arguments: [String], environment: [String: String]) throws -> (code: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.environment = environment
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}

@Suite(.serialized) struct CommandTests {
    func request(_ url: String, method: String = "GET", body: String? = nil) async throws -> (Int, String) {
        var request = URLRequest(url: try #require(URL(string: url)))
        request.httpMethod = method
        if let body {
            request.httpBody = Data(body.utf8)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
    }

    @Test func serveWithNoSetUpAnswersAndStopsCleanlyOnSIGTERM() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: NotifyBinary.path), "build coffer-notify first")
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("coffer-notify-\(UUID())")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        let output = root.appendingPathComponent("out.txt")
        let errors = root.appendingPathComponent("err.txt")
        for file in [output, errors] { _ = FileManager.default.createFile(atPath: file.path, contents: nil) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: NotifyBinary.path)
        process.arguments = ["serve", "--port", "0"]
        process.environment = ["XDG_DATA_HOME": root.path, "HOME": root.path, "PATH": "/usr/bin:/bin"]
        process.standardOutput = try FileHandle(forWritingTo: output)
        process.standardError = try FileHandle(forWritingTo: errors)
        try process.run()
        defer { if process.isRunning { process.terminate() } }
        var port: Int?
        for _ in 0..<600 where port == nil {
            let text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
            if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("coffer-notify listening on") }) {
                port = line.split(separator: ":").last.flatMap { Int($0) }
            }
            if port == nil { try await Task.sleep(for: .milliseconds(100)) }
        }
        let listening = try #require(port, "coffer-notify did not start")
        let base = "http://127.0.0.1:\(listening)"
        #expect(try await request("\(base)/v1/health") == (200, #"{"status":"ok"}"#))
        let (status, body) = try await request(
            "\(base)/v1/sessions",
            method: "POST",
            body:
                #"{"user":"a","password":"p","deviceName":"d","pushPublicKey":"\#(Base64URL.encode(WebPush.UserAgentKeys().subscription.publicKeyBytes))","pushAuthSecret":"AAAAAAAAAAAAAAAAAAAAAA"}"#
        )
        #expect(status == 502)
        // A fixed sentence for the client; the reason (no --imap) is in the log.
        #expect(body.contains("The mail server could not check the credentials"))
        #expect(try await request("\(base)/v1/sessions").0 == 401)
        let folder = root.appendingPathComponent("coffer-notify").path
        // Every file the service writes is 0600: the databases with their WAL and shared memory too (issue 24,
        // finding 10: they were 0644).
        for (file, mode) in [
            ("", 0o700), ("/master.key", 0o600), ("/event-secret", 0o600), ("/notify.sqlite", 0o600),
            ("/notify.sqlite-wal", 0o600), ("/notify.sqlite-shm", 0o600), ("/escrow.sqlite", 0o600),
        ] {
            let attributes = try FileManager.default.attributesOfItem(atPath: folder + file)
            #expect((attributes[.posixPermissions] as? Int) == mode, "\(file)")
        }
        #expect(FileManager.default.fileExists(atPath: folder + "/notify.sqlite"))
        process.terminate()  // SIGTERM
        process.waitUntilExit()
        #expect(process.terminationReason == .exit)
        #expect(process.terminationStatus == 0)
    }

    @Test func metricsAreOnTheirOwnListenerOnlyWhenAsked() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: NotifyBinary.path), "build coffer-notify first")
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("coffer-notify-\(UUID())")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        let output = root.appendingPathComponent("out.txt")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: NotifyBinary.path)
        process.arguments = ["serve", "--port", "0", "--metrics-port", "0"]
        process.environment = ["XDG_DATA_HOME": root.path, "HOME": root.path, "PATH": "/usr/bin:/bin"]
        process.standardOutput = try FileHandle(forWritingTo: output)
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { process.terminate() } }
        var ports: [String: Int] = [:]
        for _ in 0..<600 where ports.count < 2 {
            let text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
            for prefix in ["coffer-notify listening on", "coffer-notify metrics on"] {
                if let line = text.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) {
                    ports[prefix] = line.split(separator: ":").last.flatMap { Int($0) }
                }
            }
            if ports.count < 2 { try await Task.sleep(for: .milliseconds(100)) }
        }
        let api = try #require(ports["coffer-notify listening on"], "coffer-notify did not start")
        let metrics = try #require(ports["coffer-notify metrics on"], "no metrics listener")
        #expect(try await request("http://127.0.0.1:\(api)/v1/health").0 == 200)
        #expect(try await request("http://127.0.0.1:\(api)/metrics").0 == 404)
        let (status, text) = try await request("http://127.0.0.1:\(metrics)/metrics")
        #expect(status == 200)
        #expect(text.contains(#"notify_requests_total{route="/v1/health",method="GET",status="200"} 1"#))
        #expect(text.contains("notify_active_sessions 0"))
        process.terminate()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
    }

    @Test func sessionsListAndRevokeWorkOnTheDatabase() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: NotifyBinary.path), "build coffer-notify first")
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("coffer-notify-\(UUID())")
        defer { try? FileManager.default.removeItem(at: root) }
        let home = try NotifyHome(explicit: root.path)
        let storage = try SQLiteNotifyStorage(path: home.database, masterKey: try home.masterKey())
        let date = Date()
        for (id, user) in [("s-alice", "alice"), ("s-bob", "bob")] {
            try await storage.createSession(
                NotifySession(
                    id: id,
                    user: user,
                    deviceName: "\(user)'s phone",
                    tokenHash: SessionToken().hash,
                    created: date,
                    lastSeen: date,
                    expires: date + 3600,
                    pushPublicKey: WebPush.UserAgentKeys().subscription.publicKeyBytes,
                    pushAuthSecret: Array(repeating: 1, count: 16)
                )
            )
        }
        let environment = ["HOME": root.path]
        let list = try NotifyBinary.run(["sessions", "list", "--data-dir", root.path], environment: environment)
        #expect(list.code == 0)
        #expect(list.output.contains("s-alice\talice\talice's phone"))
        #expect(list.output.contains("s-bob\tbob"))
        let only = try NotifyBinary.run(
            ["sessions", "list", "--data-dir", root.path, "--user", "bob"],
            environment: environment
        )
        #expect(!only.output.contains("s-alice"))
        let revoke = try NotifyBinary.run(
            ["sessions", "revoke", "s-alice", "--data-dir", root.path],
            environment: environment
        )
        #expect(revoke.code == 0)
        #expect(try await storage.session(id: "s-alice")?.revoked == true)
        #expect(try await storage.session(id: "s-bob")?.revoked == false)
        let unknown = try NotifyBinary.run(
            ["sessions", "revoke", "nope", "--data-dir", root.path],
            environment: environment
        )
        #expect(unknown.code != 0)
        #expect(unknown.output.contains("There is no session nope."))
    }

    @Test func databaseFilesMadeWiderAreMadePrivateAtOpen() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: NotifyBinary.path), "build coffer-notify first")
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("coffer-notify-\(UUID())")
        defer { try? FileManager.default.removeItem(at: root) }
        let home = try NotifyHome(explicit: root.path)
        _ = try SQLiteNotifyStorage(path: home.database, masterKey: try home.masterKey())
        _ = try SQLiteEscrowRecords(path: root.appendingPathComponent("escrow.sqlite").path)
        for name in ["notify.sqlite", "escrow.sqlite"] {
            try FileManager.default.setAttributes(
                [.posixPermissions: 0o644],
                ofItemAtPath: root.appendingPathComponent(name).path
            )
        }
        let list = try NotifyBinary.run(
            ["sessions", "list", "--data-dir", root.path],
            environment: ["HOME": root.path]
        )
        #expect(list.code == 0)
        for name in ["notify.sqlite", "escrow.sqlite"] {
            let attributes = try FileManager.default.attributesOfItem(atPath: root.appendingPathComponent(name).path)
            #expect((attributes[.posixPermissions] as? Int) == 0o600, "\(name)")
        }
    }

    @Test func sessionsListEscapesWhatUsersWrote() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: NotifyBinary.path), "build coffer-notify first")
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("coffer-notify-\(UUID())")
        defer { try? FileManager.default.removeItem(at: root) }
        let home = try NotifyHome(explicit: root.path)
        let storage = try SQLiteNotifyStorage(path: home.database, masterKey: try home.masterKey())
        let date = Date()
        // Stored straight (a row from before device names were checked): clear screen, a window title, a tab and a
        // direction override.
        try await storage.createSession(
            NotifySession(
                id: "s-hostile",
                user: "alice",
                deviceName: "\u{1B}[2J\u{1B}]0;owned\u{07}\tx\u{202E}gnp",
                tokenHash: SessionToken().hash,
                created: date,
                lastSeen: date,
                expires: date + 3600,
                pushPublicKey: WebPush.UserAgentKeys().subscription.publicKeyBytes,
                pushAuthSecret: Array(repeating: 1, count: 16)
            )
        )
        let list = try NotifyBinary.run(
            ["sessions", "list", "--data-dir", root.path],
            environment: ["HOME": root.path]
        )
        #expect(list.code == 0)
        let line = try #require(list.output.split(separator: "\n").first { $0.hasPrefix("s-hostile") })
        #expect(!line.unicodeScalars.contains { $0 == "\u{1B}" || $0 == "\u{07}" || $0 == "\u{202E}" })
        #expect(line.contains(#"\u{1B}[2J\u{1B}]0;owned\u{7}\u{9}x\u{202E}gnp"#))
        // Seven columns, whatever the name held.
        #expect(line.split(separator: "\t", omittingEmptySubsequences: false).count == 7)
    }

    @Test func plainHTTPRefusesAHostNameThatOnlyStartsLikeLoopback() throws {
        try #require(FileManager.default.isExecutableFile(atPath: NotifyBinary.path), "build coffer-notify first")
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("coffer-notify-\(UUID())")
        defer { try? FileManager.default.removeItem(at: root) }
        let run = try NotifyBinary.run(
            ["serve", "--host", "127.0.0.1.nip.io", "--port", "0", "--data-dir", root.path],
            environment: ["HOME": root.path]
        )
        #expect(run.code != 0)
        #expect(run.output.contains("listens only on a loopback"))
    }
}
