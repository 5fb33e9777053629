import CofferAgentProtocol
import CofferApp
import CofferSampleMail
import CofferTesting
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A `coffer agent` process on a CLI runner's home, with its own runtime folder.
final class AgentProcess {
    let cli: CLIRunner
    let runtime: TemporaryDirectory
    let log: String
    private(set) var process = Process()

    /// A runner whose commands (and agent) use a fresh `XDG_RUNTIME_DIR`.
    static func runner() -> (CLIRunner, TemporaryDirectory) {
        let runtime = TemporaryDirectory(prefix: "coffer-xdg")
        var cli = CLIRunner()
        cli.extraEnvironment["XDG_RUNTIME_DIR"] = runtime.path
        return (cli, runtime)
    }

    /// Arguments added to `coffer agent`.
    let agentArguments: [String]

    init(_ cli: CLIRunner, runtime: TemporaryDirectory, arguments: [String] = []) async throws {
        self.cli = cli
        self.runtime = runtime
        agentArguments = arguments
        log = "\(runtime.path)/agent.log"
        try await start()
    }

    /// Starts the agent and waits (bounded) until `status` reaches it.
    func start() async throws {
        process = Process()
        process.executableURL = URL(fileURLWithPath: CLIRunner.binary)
        process.arguments = ["agent", "--home", cli.home.path] + agentArguments
        var environment = ProcessInfo.processInfo.environment
        environment["COFFER_HOME"] = nil
        environment.merge(cli.extraEnvironment) { $1 }
        process.environment = environment
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        process.standardError = FileHandle(forWritingAtPath: log)
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let ready = try await eventually(seconds: 20) { try await cli.run(["status"]).stdout.contains("mode: agent") }
        #expect(ready, "the agent did not come up: \(logText)")
    }

    var logText: String { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }

    var socketPath: String {
        let root = cli.home.path
        let paths = AppPaths(data: "\(root)/data", keychain: "\(root)/keychain", state: "\(root)/state")
        return "\(runtime.path)/coffer/\(paths.agentSocketName)"
    }

    func signal(_ number: Int32) { kill(process.processIdentifier, number) }

    /// SIGTERM, then waits for the exit; returns the status.
    @discardableResult
    func stop() -> Int32 {
        guard process.isRunning else { return process.terminationStatus }
        signal(SIGTERM)
        process.waitUntilExit()
        return process.terminationStatus
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }
}

/// Polls `check` every 100 ms for at most `seconds`.
func eventually(seconds: Double, _ check: () async throws -> Bool) async rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try await check() { return true }
        try? await Task.sleep(for: .milliseconds(100))
    }
    return try await check()
}

/// A message with a text attachment whose content is a canary.
func messageWithAttachment(canary: String) -> String {
    let encoded = Data("attachment body \(canary)\n".utf8).base64EncodedString()
    return """
        From: Ann <ann@example.com>\r
        To: bob@example.com\r
        Subject: Quarterly numbers\r
        Date: Tue, 2 Jan 2024 09:00:00 +0000\r
        MIME-Version: 1.0\r
        Content-Type: multipart/mixed; boundary="b1"\r
        \r
        --b1\r
        Content-Type: text/plain\r
        \r
        See the attached file.\r
        --b1\r
        Content-Type: text/plain; name="numbers.txt"\r
        Content-Disposition: attachment; filename="numbers.txt"\r
        Content-Transfer-Encoding: base64\r
        \r
        \(encoded)\r
        --b1--\r

        """
}

@Suite(.serialized) struct AgentTests {
    @Test func commandsGoToTheAgentAndStatusSaysSo() async throws {
        let (cli, runtime) = AgentProcess.runner()
        #expect(try await cli.run(["init", "--account", "alice"]).status == 0)
        let agent = try await AgentProcess(cli, runtime: runtime)
        let status = try await cli.run(["status"])
        #expect(status.stdout.contains("mode: agent (pid \(agent.process.processIdentifier), socket "))
        #expect(status.stdout.contains("state: locked"))
        let locked = try await cli.run(["list"])
        #expect(locked.status == 1)
        #expect(locked.stderr.contains("locked"))

        let unlock = try await cli.run(["unlock"])
        #expect(unlock.stdout.contains("Unlocked alice in the agent"), "\(unlock.stderr)")
        let eml = "\(cli.home.path)/one.eml"
        try messageWithAttachment(canary: "C-1").write(toFile: eml, atomically: true, encoding: .utf8)
        let imported = try await cli.run(["import", eml])
        #expect(imported.stdout.contains("Imported 1 messages"), "\(imported.stderr)")
        #expect(try await cli.run(["list"]).stdout.contains("Quarterly numbers"))
        #expect(try await cli.run(["search", "quarterly"]).stdout.contains("Quarterly numbers"))
        #expect(try await cli.run(["show", "1"]).stdout.contains("See the attached file."))
        #expect(try await cli.run(["attachments", "1"]).stdout.contains("numbers.txt"))
        let saved = "\(cli.home.path)/saved.txt"
        #expect(
            try await cli.run(["attachment", "save", "1", "--home", cli.home.path, "--to", saved], withHome: false)
                .status
                == 0
        )
        #expect((try? String(contentsOfFile: saved, encoding: .utf8))?.contains("C-1") == true)
        let seconds = try await cli.run(["status"]).stdout
        #expect(seconds.contains("state: unlocked") && seconds.contains("autolock: in "), "\(seconds)")

        // The agent's store is open with writes in its write-ahead log; a clean shutdown closes it (checkpointing
        // the log into the database), and the socket goes.
        let paths = AppPaths(data: "\(cli.home.path)/data", keychain: "", state: "")
        let wal = "\(paths.store("alice"))/mail.sqlite-wal"
        #expect(Self.size(of: wal) > 0, "the control: the open store has a write-ahead log")
        #expect(agent.stop() == 0)
        #expect(Self.size(of: wal) == 0, "the store was not closed at shutdown")
        #expect(try await cli.run(["status"]).stdout.contains("mode: one-shot"))
        #expect(!FileManager.default.fileExists(atPath: agent.socketPath))
        let log = agent.logText
        #expect(!log.contains("C-1") && !log.contains("Quarterly"), "the log must not carry message content")
    }

    /// The size of `path`, 0 when it does not exist.
    static func size(of path: String) -> Int {
        var info = stat()
        return stat(path, &info) == 0 ? Int(info.st_size) : 0
    }

    @Test(.enabled(if: getuid() == 0, "needs root to run a client as the user nobody"))
    func anotherUserCannotTalkToTheAgent() async throws {
        let (cli, runtime) = AgentProcess.runner()
        _ = try await cli.run(["init", "--account", "alice"])
        let agent = try await AgentProcess(cli, runtime: runtime)
        let socket = agent.socketPath
        #expect(FileManager.default.fileExists(atPath: socket), "\(socket)")
        var info = stat()
        #expect(stat(socket, &info) == 0 && info.st_mode & 0o777 == 0o600, "the socket is not 0600")
        // The folder (0700) and socket (0600) keep other users out...
        #expect(try connectAsNobody(socket).hasPrefix("denied"))
        // ...and with permissions opened by mistake, the agent itself still refuses them (SO_PEERCRED).
        chmod(runtime.path, 0o755)
        chmod("\(runtime.path)/coffer", 0o755)
        chmod(socket, 0o666)
        let outcome = try connectAsNobody(socket)
        #expect(outcome.hasPrefix("reply"), "\(outcome)")
        #expect(outcome.contains("forbidden") || outcome == "reply ", "\(outcome)")
        #expect(!outcome.contains(#""accounts""#), "another user must see no account")
        #expect(agent.logText.contains("refused a connection from another user"))
        #expect(try await cli.run(["status"]).stdout.contains("mode: agent"), "the agent still serves its own user")
    }

    private func connectAsNobody(_ socket: String) throws -> String {
        let script = """
            import socket, struct, sys, json
            s = socket.socket(socket.AF_UNIX)
            try:
                s.connect(sys.argv[1])
            except PermissionError:
                print("denied"); sys.exit(0)
            body = json.dumps({"op": "status"}).encode()
            try:
                s.sendall(b"CF\\x01\\x01" + struct.pack(">I", len(body)) + body)
            except OSError:
                pass
            s.settimeout(10)
            data = b""
            try:
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            except OSError:
                pass
            print("reply " + data[8:].decode("utf-8", "replace"))
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        process.arguments = [
            "--reuid=nobody", "--regid=nogroup", "--clear-groups", "/usr/bin/python3", "-c", script, socket,
        ]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = out
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test func theAutolockFiresInTheAgentAndBackgroundLocksAtOnce() async throws {
        let (cli, runtime) = AgentProcess.runner()
        _ = try await cli.run(["init", "--account", "alice"])
        #expect(try await cli.run(["protect", "pin", "--pin-stdin"], input: "739146\n").status == 0)
        #expect(try await cli.run(["autolock", "2s", "--pin-stdin"], input: "739146\n").status == 0)
        let agent = try await AgentProcess(cli, runtime: runtime)
        let eml = "\(cli.home.path)/one.eml"
        try messageWithAttachment(canary: "C-2").write(toFile: eml, atomically: true, encoding: .utf8)

        let unlock = try await cli.run(["unlock", "--pin-stdin"], input: "739146\n")
        #expect(unlock.status == 0, "\(unlock.stderr)")
        #expect(unlock.stdout.contains("autolock: in "), "\(unlock.stdout)")
        // Import counts as activity; without more of it (status does not use the key), the timer fires 2 s later.
        #expect(try await cli.run(["import", eml]).status == 0)
        let locked = try await eventually(seconds: 20) {
            try await cli.run(["status"]).stdout.contains("state: locked")
        }
        #expect(locked, "the autolock did not fire: \(agent.logText)")
        #expect(agent.logText.contains("reason=timeout"))
        let list = try await cli.run(["list"])
        #expect(list.status == 1 && list.stderr.contains("Coffer is locked"), "\(list.stderr)")

        // Under `background`, `coffer background` locks at once.
        let background = try await cli.run(["autolock", "background", "--pin-stdin"], input: "739146\n")
        #expect(background.status == 0, "\(background.stderr)")
        #expect(try await cli.run(["list"]).stdout.contains("Quarterly numbers"))
        #expect(try await cli.run(["background"]).status == 0)
        let after = try await cli.run(["list"])
        #expect(after.status == 1 && after.stderr.contains("Coffer is locked"))

        // SIGUSR1 does the same.
        #expect(try await cli.run(["unlock", "--pin-stdin"], input: "739146\n").status == 0)
        agent.signal(SIGUSR1)
        #expect(try await eventually(seconds: 10) { try await cli.run(["status"]).stdout.contains("state: locked") })
        #expect(!agent.logText.contains("739146"), "the PIN must never be logged")
    }

    @Test func fuzzedFramesLeaveTheAgentServingEveryoneElse() async throws {
        let (cli, runtime) = AgentProcess.runner()
        _ = try await cli.run(["init", "--account", "alice"])
        let agent = try await AgentProcess(cli, runtime: runtime)
        let socket = agent.socketPath
        var random = SplitMix(seed: 0xA6E4_7F00)
        let valid = AgentFrame(kind: .request, payload: Array(#"{"status":{}}"#.utf8)).encoded
        var served = 0
        for round in 0..<300 {
            var bytes: [UInt8]
            switch round % 3 {
            case 0:
                bytes = (0..<Int.random(in: 1...200, using: &random)).map { _ in
                    UInt8.random(in: 0...255, using: &random)
                }
            case 1:
                bytes = valid
                for _ in 0..<Int.random(in: 1...3, using: &random) {
                    bytes[Int.random(in: 0..<bytes.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
                }
            default:
                // An oversized announcement, or a frame cut short and closed.
                bytes =
                    Bool.random(using: &random)
                    ? [0x43, 0x46, AgentFrame.version, 1, 0x7f, 0xff, 0xff, 0xff] : Array(valid.prefix(10))
            }
            let outcome = try exchange(socket, bytes)
            if outcome.contains(#""accounts""#) { served += 1 }
        }
        // A few mutations hit only the JSON and still parse; most are refused. Either way the agent lives on.
        #expect(served < 300)
        let client = try #require(try AgentClient.connect(socketPath: socket))
        #expect(try await client.hello().pid == agent.process.processIdentifier)
        client.close()

        // A half-sent frame held open gets an error when its time is up, while others are served meanwhile.
        let stalled = try #require(try AgentSocket.connect(socket))
        defer { close(stalled) }
        _ = valid.prefix(12).withUnsafeBytes { send(stalled, $0.baseAddress, $0.count, 0) }
        #expect(try await cli.run(["status"]).stdout.contains("mode: agent"))
        let answer = readAll(stalled, seconds: 15)
        #expect(String(decoding: answer, as: UTF8.self).contains("bad-frame"))
        #expect(try await cli.run(["status"]).stdout.contains("account: alice"))
    }

    private func exchange(_ socket: String, _ bytes: [UInt8]) throws -> String {
        guard let fd = try AgentSocket.connect(socket) else { return "" }
        defer { close(fd) }
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        shutdown(fd, Int32(SHUT_WR))
        return String(decoding: readAll(fd, seconds: 10), as: UTF8.self)
    }

    private func readAll(_ fd: Int32, seconds: Int) -> [UInt8] {
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var data: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count <= 0 { break }
            data += chunk[0..<count]
        }
        return data
    }

    @Test func theSecureElementAsksForPresenceAtTheClientsTerminal() async throws {
        let (cli, runtime) = AgentProcess.runner()
        _ = try await cli.run(["init", "--account", "carol"])
        #expect(try await cli.run(["protect", "secure-element"]).status == 0)
        let agent = try await AgentProcess(cli, runtime: runtime)
        // A client without a terminal cannot confirm presence for the agent either.
        let piped = try await cli.run(["unlock"])
        #expect(piped.status == 1)
        #expect(piped.stderr.contains("presence"), "\(piped.stderr)")
        let refused = try cli.runOnTerminal(["unlock"], answerPresence: false)
        #expect(refused.status == 1, "\(refused.stdout)")
        #expect(try await cli.run(["status"]).stdout.contains("state: locked"))
        let answered = try cli.runOnTerminal(["unlock"], answerPresence: true)
        #expect(answered.status == 0, "\(answered.stdout)")
        #expect(answered.stdout.contains("Unlocked carol in the agent"))
        #expect(try await cli.run(["status"]).stdout.contains("state: unlocked"))
        #expect(agent.logText.contains("method=secure-element"))
    }

    @Test func aPresenceQuestionNobodyAnswersEndsAtTheAgentsLimit() async throws {
        let (cli, runtime) = AgentProcess.runner()
        _ = try await cli.run(["init", "--account", "carol"])
        #expect(try await cli.run(["protect", "secure-element"]).status == 0)
        let agent = try await AgentProcess(cli, runtime: runtime, arguments: ["--unlock-timeout", "2"])
        // The person at the terminal never types the code: the client stops asking when the agent stops waiting.
        let ignored = try cli.runOnTerminal(["unlock"], answerPresence: false, mode: "ignore")
        #expect(ignored.status == 1, "\(ignored.stdout)")
        #expect(ignored.stdout.contains("type "), "the code was shown: \(ignored.stdout)")
        #expect(ignored.stdout.contains("No answer in time; presence was not confirmed."), "\(ignored.stdout)")
        #expect(try await cli.run(["status"]).stdout.contains("state: locked"))
        // The agent serves on, and a prompt answered in time unlocks.
        let answered = try cli.runOnTerminal(["unlock"], answerPresence: true)
        #expect(answered.status == 0, "\(answered.stdout)")
        #expect(agent.stop() == 0)
    }

    @Test func manyClientsAtOnceAndClientsThatLeaveMidRequest() async throws {
        let (cli, runtime) = AgentProcess.runner()
        _ = try await cli.run(["init", "--account", "alice"])
        let agent = try await AgentProcess(cli, runtime: runtime)
        #expect(try await cli.run(["unlock"]).status == 0)
        let eml = "\(runtime.path)/one.eml"
        try messageWithAttachment(canary: "C-3").write(toFile: eml, atomically: true, encoding: .utf8)
        #expect(try await cli.run(["import", eml]).status == 0)
        let socket = agent.socketPath

        // Clients that send a request (or half of one) and vanish without reading the reply.
        let request = try JSONEncoder().encode(AgentRequest.list(account: "alice", label: nil, limit: 50, offset: 0))
        let frame = AgentFrame(kind: .request, payload: Array(request)).encoded
        for cut in [frame.count, frame.count - 3, 5] {
            for _ in 0..<5 {
                let fd = try #require(try AgentSocket.connect(socket))
                _ = frame.prefix(cut).withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                close(fd)
            }
        }
        // Then sixteen clients at once, each with a few requests.
        let counts = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<16 {
                group.addTask {
                    let client = try #require(try AgentClient.connect(socketPath: socket))
                    defer { client.close() }
                    var found = 0
                    for _ in 0..<5 {
                        let reply = try await client.call(.list(account: "alice", label: nil, limit: 50, offset: 0))
                        if case .summaries(let summaries) = reply { found += summaries.count }
                        _ = try await client.call(.status(account: nil))
                    }
                    return found
                }
            }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(counts == Array(repeating: 5, count: 16))
        #expect(try await cli.run(["list"]).stdout.contains("Quarterly numbers"))
    }

    @Test func installUserServiceWritesASystemdUnit() async throws {
        var cli = CLIRunner()
        let config = TemporaryDirectory(prefix: "coffer-config")
        cli.extraEnvironment["XDG_CONFIG_HOME"] = config.path
        let result = try await cli.run(["agent", "--install-user-service"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("systemctl --user enable --now coffer-agent.service"))
        let unit = try String(contentsOfFile: "\(config.path)/systemd/user/coffer-agent.service", encoding: .utf8)
        #expect(unit.contains("ExecStart=") && unit.contains(" agent --home \(cli.home.path)"))
        #expect(unit.contains("WantedBy=default.target"))
    }

    @Test func killNineLeavesNoCleartextAndLosesNothing() async throws {
        let (cli, runtime) = AgentProcess.runner()
        _ = try await cli.run(["init", "--account", "alice"])
        let agent = try await AgentProcess(cli, runtime: runtime)
        #expect(try await cli.run(["unlock"]).status == 0)
        let canary = "CANARY-\(UInt32.random(in: 100_000...999_999))"
        let eml = "\(runtime.path)/one.eml"
        try messageWithAttachment(canary: canary).write(toFile: eml, atomically: true, encoding: .utf8)
        #expect(try await cli.run(["import", eml]).status == 0)
        unlink(eml)

        // A viewer holds the decrypted preview open while the agent is killed.
        let viewer = Process()
        viewer.executableURL = URL(fileURLWithPath: CLIRunner.binary)
        viewer.arguments = ["attachment", "open", "1", "--home", cli.home.path, "--viewer", "sleep 60; true"]
        viewer.environment = ProcessInfo.processInfo.environment.merging(cli.extraEnvironment) { $1 }
        viewer.standardOutput = FileHandle.nullDevice
        viewer.standardError = FileHandle.nullDevice
        try viewer.run()
        let previews = "\(runtime.path)/coffer-previews"
        let opened = await eventually(seconds: 20) { !TemporaryDirectory.files(below: previews).isEmpty }
        #expect(opened, "no preview appeared: \(agent.logText)")
        #expect(!CanaryScanner.occurrences(of: [Array(canary.utf8)], under: [previews]).isEmpty)

        agent.signal(SIGKILL)
        agent.process.waitUntilExit()
        kill(viewer.processIdentifier, SIGKILL)
        viewer.waitUntilExit()

        try await agent.start()
        #expect(TemporaryDirectory.files(below: previews).isEmpty, "a cleartext preview survived the restart")
        let hits = CanaryScanner.occurrences(of: [Array(canary.utf8)], under: [cli.home.path, runtime.path])
        #expect(hits.isEmpty, "cleartext on disk: \(hits.map(\.file))")
        #expect(try await cli.run(["unlock"]).status == 0)
        #expect(try await cli.run(["list"]).stdout.contains("Quarterly numbers"))
        let saved = "\(runtime.path)/saved.txt"
        #expect(
            try await cli.run(["attachment", "save", "1", "--home", cli.home.path, "--to", saved], withHome: false)
                .status
                == 0
        )
        #expect((try? String(contentsOfFile: saved, encoding: .utf8))?.contains(canary) == true)
        unlink(saved)
    }
}
