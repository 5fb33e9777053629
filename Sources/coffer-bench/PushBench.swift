import CofferTesting
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Issue 12's bench: the time from handing a message to Dovecot's LMTP to the message being sealed in the device's
/// store, unlocked (the agent syncs on the push) and locked (the agent syncs with FastSync's escrowed key), p50 and
/// p99 over N deliveries, with the real parts on loopback: a private Dovecot whose push_notification plugin posts to
/// `coffer-notify` (SQLite), and a `coffer agent` holding the service's stream. The end is the agent's log line
/// after the store's transaction. The reference, measured in the same run, is the LMTP hand-off alone (Dovecot
/// accepting the message over a kept connection, what any MTA waits for); the aim is p99 < 250 ms.
enum PushBench {
    static let pin = "246813"

    static func run(deliveries: Int) async throws {
        setenv("COFFER_BIN", ImportMemoryBench.siblingBinary("coffer"), 1)
        let folder = TemporaryDirectory(prefix: "coffer-bench-push")
        // The service's data folder with an event secret made here, so that Dovecot's push URL can carry it before
        // the service starts; the service keeps an existing secret.
        let notifyData = "\(folder.path)/notify"
        try FileManager.default.createDirectory(
            atPath: notifyData,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
        let secret = (0..<32).map { _ in "abcdefghijklmnopqrstuvwxyz0123456789".randomElement().map(String.init)! }
            .joined()
        try Data(secret.utf8).write(to: URL(fileURLWithPath: "\(notifyData)/event-secret"))
        chmod("\(notifyData)/event-secret", 0o600)
        let port = try freePort()
        let dovecot = try await TestServers.PinnedDovecot.start(
            pushURL: "http://dovecot:\(secret)@127.0.0.1:\(port)/v1/events/dovecot"
        )
        defer { dovecot.stop() }

        let notify = try Background(
            [
                ImportMemoryBench.siblingBinary("coffer-notify"), "serve", "--port", String(port), "--data-dir",
                notifyData, "--imap", "imaps://\(TestServers.PinnedDovecot.name):\(dovecot.server.imapsPort)",
                "--ca-file", "\(dovecot.certs)/ca.pem", "--imap-connect-address", "127.0.0.1",
            ],
            watch: .standardOutput
        )
        defer { notify.stop() }
        guard notify.log.wait(for: "coffer-notify listening on", count: 1, seconds: 30) else {
            throw BenchError("coffer-notify did not start: \(notify.log.text)")
        }

        let cli = CLIRunner(prefix: "coffer-bench-push-home", ownRuntime: true)
        try await step(cli, ["init", "--account", "alice"])
        try await step(cli, ["protect", "pin", "--pin-stdin"], input: "\(pin)\n")
        try await step(
            cli,
            [
                "account", "add", "--imap", "imaps://\(TestServers.PinnedDovecot.name):\(dovecot.server.imapsPort)",
                "--user", TestServers.PinnedDovecot.user, "--ca-file", "\(dovecot.certs)/ca.pem", "--connect",
                "127.0.0.1", "--pin-stdin", "--password-stdin",
            ],
            input: "\(pin)\n\(TestServers.PinnedDovecot.password)\n"
        )
        try await step(
            cli,
            ["notify", "register", "--server", "http://127.0.0.1:\(port)", "--pin-stdin"],
            input: "\(pin)\n"
        )

        let agent = try Background(
            [CLIRunner.binary, "agent", "--home", cli.home.path],
            environment: cli.environment,
            watch: .standardError
        )
        defer { agent.stop() }
        var ready = false
        for _ in 0..<200 where !ready {
            ready = try await cli.run(["status"]).stdout.contains("mode: agent")
            if !ready { try await Task.sleep(for: .milliseconds(100)) }
        }
        guard ready else { throw BenchError("the agent did not start: \(agent.log.text)") }
        try await step(cli, ["unlock", "--pin-stdin"], input: "\(pin)\n")

        let lmtp = try LMTPFeeder(dovecot)
        defer { lmtp.stop() }
        let unlocked = try await measure(deliveries, "unlocked", lmtp, agent.log, line: "push: synced while unlocked")
        try await step(cli, ["fastsync", "on", "--for", "1h", "--pin-stdin"], input: "\(pin)\n")
        try await step(cli, ["lock"])
        let locked = try await measure(
            deliveries,
            "locked",
            lmtp,
            agent.log,
            line: "push: FastSync synced while locked"
        )

        var table = Table(
            "push: LMTP delivery to sealed in the store, \(deliveries) deliveries each (ms; loopback Dovecot, "
                + "coffer-notify on SQLite, coffer agent)",
            ["state", "p50", "p99", "LMTP hand-off p50", "hand-off p99", "p50 / hand-off p50", "aim"]
        )
        for (name, sample) in [("unlocked", unlocked), ("locked, FastSync", locked)] {
            let total = percentiles(sample.total)
            let handoff = percentiles(sample.handoff)
            table.add([
                name, format(total.p50, 1), format(total.p99, 1), format(handoff.p50, 1), format(handoff.p99, 1),
                format(total.p50 / handoff.p50, 1), "p99 < 250 ms",
            ])
        }
        table.print()
    }

    /// Delivers `count` messages one after another; for each, the time to the hand-off's end and to the agent's
    /// `line` for it.
    private static func measure(
        _ count: Int,
        _ label: String,
        _ lmtp: LMTPFeeder,
        _ log: LineLog,
        line: String
    ) async throws -> (total: [Double], handoff: [Double]) {
        var total: [Double] = []
        var handoff: [Double] = []
        let before = log.times(of: line).count
        for index in 0..<count {
            let message =
                "From: Bench <bench-sender@example.org>\r\nTo: alice@coffer.test\r\nSubject: Push bench \(label) "
                + "\(index)\r\nMessage-ID: <push-bench-\(label)-\(index)@example.org>\r\n\r\nBody \(index).\r\n"
            let start = DispatchTime.now().uptimeNanoseconds
            try lmtp.deliver(Array(message.utf8))
            handoff.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
            guard log.wait(for: line, count: before + index + 1, seconds: 30) else {
                throw BenchError(
                    "delivery \(index) (\(label)) did not reach the store in 30 s: \(log.text.suffix(2000))"
                )
            }
            total.append(Double(log.times(of: line)[before + index] - start) / 1e6)
        }
        return (total, handoff)
    }

    private static func step(_ cli: CLIRunner, _ arguments: [String], input: String = "") async throws {
        let result = try await cli.run(arguments, input: input)
        guard result.status == 0 else {
            throw BenchError("coffer \(arguments.prefix(2).joined(separator: " ")) failed: \(result.stderr)")
        }
    }

    /// A TCP port nothing listens on now (bound and released; the service takes it right after).
    private static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw BenchError("socket() failed") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 }
        }
        let named = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) == 0 }
        }
        guard bound, named else { throw BenchError("no free port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

/// A bench's failure, with what the failing part said.
struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The lines a process writes, each with the time it was read (monotonic nanoseconds).
final class LineLog: @unchecked Sendable {
    private let lock = NSLock()
    private var buffer = ""
    private var lines: [(time: UInt64, text: String)] = []
    private var all = ""

    func append(_ data: Data) {
        let now = DispatchTime.now().uptimeNanoseconds
        lock.withLock {
            let chunk = String(decoding: data, as: UTF8.self)
            all += chunk
            buffer += chunk
            while let newline = buffer.firstIndex(of: "\n") {
                lines.append((now, String(buffer[..<newline])))
                buffer = String(buffer[buffer.index(after: newline)...])
            }
        }
    }

    var text: String { lock.withLock { all } }

    func times(of needle: String) -> [UInt64] {
        lock.withLock { lines.filter { $0.text.contains(needle) }.map(\.time) }
    }

    /// Waits up to `seconds` for `count` lines containing `needle`.
    func wait(for needle: String, count: Int, seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if times(of: needle).count >= count { return true }
            usleep(1000)
        }
        return false
    }
}

/// A process running beside the bench, one of its outputs read into a ``LineLog``; stopped with SIGTERM.
final class Background: Sendable {
    enum Stream { case standardOutput, standardError }

    let log = LineLog()
    private let process: Process

    init(_ arguments: [String], environment: [String: String]? = nil, watch: Stream) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: arguments[0])
        process.arguments = Array(arguments.dropFirst())
        if let environment { process.environment = environment }
        let pipe = Pipe()
        switch watch {
        case .standardOutput:
            process.standardOutput = pipe
            process.standardError = FileHandle.nullDevice
        case .standardError:
            process.standardError = pipe
            process.standardOutput = FileHandle.nullDevice
        }
        let log = self.log
        try process.run()
        drain(pipe.fileHandleForReading) { log.append($0) }
        self.process = process
    }

    func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
    }
}

/// One kept LMTP connection to the test Dovecot, through Python's `smtplib` in a coprocess: a line of base64 in,
/// "ok" out once Dovecot accepted the message.
final class LMTPFeeder: Sendable {
    private let process: Process
    private let input: FileHandle
    private let output: FileHandle

    init(_ dovecot: TestServers.PinnedDovecot) throws {
        let script = """
            import base64, smtplib, sys
            sys.path.insert(0, \(String(reflecting: TestServers.repoRoot.appendingPathComponent("Tests/servers").path)))
            import dovecot
            info = dovecot.load(\(String(reflecting: dovecot.server.dir)))
            with smtplib.LMTP("127.0.0.1", info["lmtp_port"]) as lmtp:
                for line in sys.stdin:
                    lmtp.sendmail("bench-sender@example.org", [\(String(reflecting: TestServers.PinnedDovecot.user))],
                                  base64.b64decode(line))
                    sys.stdout.write("ok\\n")
                    sys.stdout.flush()
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", script]
        let stdin = Pipe()
        let stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        try process.run()
        self.process = process
        input = stdin.fileHandleForWriting
        output = stdout.fileHandleForReading
    }

    /// Hands `message` to Dovecot and returns once it accepted it.
    func deliver(_ message: [UInt8]) throws {
        try input.write(contentsOf: Data((Data(message).base64EncodedString() + "\n").utf8))
        var answer = Data()
        while !answer.contains(UInt8(ascii: "\n")) {
            guard let byte = try output.read(upToCount: 1), !byte.isEmpty else {
                throw BenchError("the LMTP coprocess ended")
            }
            answer.append(byte)
        }
        guard answer == Data("ok\n".utf8) else { throw BenchError("LMTP: \(String(decoding: answer, as: UTF8.self))") }
    }

    func stop() {
        try? input.close()
        process.waitUntilExit()
    }
}
