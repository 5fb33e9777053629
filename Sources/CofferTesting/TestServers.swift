import CofferBlocking
import Foundation

/// Why a test's set-up (a server, certificates) failed; the test fails with this sentence, it never skips.
public struct TestSetupError: Error, CustomStringConvertible {
    /// What failed, with the tool's output.
    public var reason: String
    /// Wraps a reason.
    public init(reason: String) { self.reason = reason }
    public var description: String { reason }
}

/// Runs a command to its end and returns its exit code and combined standard output and error.
public func runCommand(_ arguments: [String]) throws -> (code: Int32, output: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: arguments[0])
    process.arguments = Array(arguments.dropFirst())
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = pipe
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}

/// Reads `handle` to its end on a thread of its own, handing each chunk to `each` as it comes: a blocking read
/// loop, not `FileHandle.readabilityHandler`, whose dispatch read source can crash libdispatch's event loop as it is
/// torn down (swift-corelibs-libdispatch #949; it stopped `coffer-bench --check` once, as its agent ended).
public func drain(_ handle: FileHandle, into each: @escaping @Sendable (Data) -> Void) {
    Thread {
        while true {
            let data = handle.availableData
            if data.isEmpty { return }
            each(data)
        }
    }.start()
}

/// Runs `body`, which waits for a child process, on a thread of its own, and awaits it: the test holds none of the
/// cooperative pool's threads (the network suites' TLS handshakes need them) and none of ``BlockingPool``'s four,
/// which the code under test in this process needs (an in-process agent's requests queued behind `coffer` commands
/// of other tests until a test's 60 s bound).
public func awaitWaiting<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}

/// The repository's test servers (`Tests/servers/`): certificates from `make_certs.sh` and a private loopback Dovecot
/// from `dovecot.py`.
public enum TestServers {
    /// The repository root: three levels above this file.
    public static let repoRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// Whether process `pid` has ended (a zombie that no init reaps counts as ended).
    public static func hasEnded(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let state = stat.split(separator: ")").last?.split(separator: " ").first
        else { return true }
        return state == "Z"
    }

    /// A process that only waits to be killed (`sleep`): a stand-in for the test process as the owner of a test
    /// server. Started by ``ChildProcess/spawn(_:arguments:)``, so that it holds none of this process's sockets or
    /// pipes (Foundation's `Process` passes them on, and a long-lived child would keep other tests' connections open).
    public static func standInOwner() throws -> pid_t {
        guard let pid = ChildProcess.spawn("/bin/sleep", arguments: ["600"]) else {
            throw TestSetupError(reason: "could not start /bin/sleep as a stand-in owner")
        }
        return pid
    }

    /// Kills a stand-in owner, then waits until every one of `pids` has ended, for a minute at most (a bound that
    /// only ends a failing test).
    public static func end(owner: pid_t, thenAwait pids: [Int32]) async {
        kill(owner, SIGKILL)
        var status: Int32 = 0
        _ = waitpid(owner, &status, 0)
        let deadline = ContinuousClock.now + .seconds(60)
        while !pids.allSatisfy(hasEnded) && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(50))
        }
    }

    /// Makes the test CA, certificates A and B, the rogue CA and the backup key for `name` in `folder`.
    public static func makeCertificates(in folder: String, name: String) throws {
        let script = repoRoot.appendingPathComponent("Tests/servers/make_certs.sh").path
        let made = try runCommand(["/bin/bash", script, folder, name])
        guard made.code == 0 else { throw TestSetupError(reason: "make_certs.sh failed: \(made.output)") }
    }

    /// A running private Dovecot (`dovecot.py start`), stopped with ``stop()``.
    public struct Dovecot: Sendable {
        /// The server's folder (config, mail, log).
        public let dir: String
        /// The IMAPS port on 127.0.0.1.
        public let imapsPort: Int
        /// The plain IMAP port on 127.0.0.1, where the server offers STARTTLS and refuses LOGIN before it.
        public let imapPort: Int
        /// The master process.
        public let pid: Int32

        static var harness: String { repoRoot.appendingPathComponent("Tests/servers/dovecot.py").path }

        /// Starts Dovecot in `dir` serving `certificate`/`key`, with `users` as `name:password`; with `pushURL`, its
        /// push_notification plugin (ox driver) posts new-mail events there. The harness stops it once process
        /// `owner` (this one unless told) has ended, so that a killed test run leaves no server behind.
        /// Runs on a thread of its own (``awaitWaiting(_:)``), as ``deliver(_:to:)`` does: a test that waits for the harness holds none of the
        /// cooperative pool's threads, which every other test shares.
        /// - Throws: ``TestSetupError`` with the harness's output when it cannot start (run scripts/setup.sh).
        public static func start(
            dir: String,
            certificate: String,
            key: String,
            users: [String],
            pushURL: String? = nil,
            owner: Int32 = ProcessInfo.processInfo.processIdentifier
        ) async throws -> Dovecot {
            try await awaitWaiting {
                try startBlocking(
                    dir: dir,
                    certificate: certificate,
                    key: key,
                    users: users,
                    pushURL: pushURL,
                    owner: owner
                )
            }
        }

        static func startBlocking(
            dir: String,
            certificate: String,
            key: String,
            users: [String],
            pushURL: String?,
            owner: Int32
        ) throws -> Dovecot {
            let result = try runCommand(
                [
                    "/usr/bin/env", "python3", harness, "start", "--dir", dir, "--cert", certificate, "--key", key,
                    "--owner", "\(owner)",
                ] + users.flatMap { ["--user-pass", $0] } + (pushURL.map { ["--push-url", $0] } ?? [])
            )
            guard result.code == 0, let line = result.output.split(separator: "\n").last,
                let info = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                let port = info["imaps_port"] as? Int, let plainPort = info["imap_port"] as? Int,
                let pid = info["pid"] as? Int
            else {
                throw TestSetupError(reason: "the test Dovecot did not start (run scripts/setup.sh): \(result.output)")
            }
            return Dovecot(dir: dir, imapsPort: port, imapPort: plainPort, pid: Int32(pid))
        }

        /// Stops the server (at once: the harness kills its processes, whose mail is thrown away).
        public func stop() {
            _ = try? runCommand(["/usr/bin/env", "python3", Self.harness, "stop", "--dir", dir])
        }

        /// Delivers `message` to `user` over LMTP, on a thread of its own (``awaitWaiting(_:)``).
        public func deliver(_ message: [UInt8], to user: String) async throws {
            let dir = dir
            try await awaitWaiting {
                let file = "\(dir)/message-\(UUID().uuidString).eml"
                try Data(message).write(to: URL(fileURLWithPath: file))
                let result = try runCommand(
                    ["/usr/bin/env", "python3", Self.harness, "deliver", "--dir", dir, "--to", user, "--file", file]
                )
                guard result.code == 0 else { throw TestSetupError(reason: "LMTP delivery failed: \(result.output)") }
            }
        }
    }

    /// A private Dovecot with its own certificates (``makeCertificates(in:name:)`` for ``name``) and one user, in a
    /// temporary folder that ``stop()`` removes: the server of the IMAP, sync and notify tests.
    public struct PinnedDovecot: Sendable {
        /// The name the certificates carry (connect to 127.0.0.1 with this as the server name).
        public static let name = "mail.coffer.test"
        /// The one user.
        public static let user = "alice"
        /// The user's password (also a canary: it must never be found in the clear in Coffer's files).
        public static let password = "alice-test-password"

        /// The running server.
        public let server: Dovecot
        /// The certificates, keys and pins (`a-chain.pem`, `ca.pem`, `a.pin`, `backup.pin`, `b.pin`, ...).
        public let certs: String
        /// The temporary folder that holds both.
        public let root: String

        /// Makes certificates and starts Dovecot, on a thread of its own (``awaitWaiting(_:)``); with `pushURL`, its push_notification plugin
        /// posts there.
        public static func start(pushURL: String? = nil) async throws -> PinnedDovecot {
            try await awaitWaiting { try startBlocking(pushURL: pushURL) }
        }

        static func startBlocking(pushURL: String?) throws -> PinnedDovecot {
            let root = FileManager.default.temporaryDirectory.appendingPathComponent(
                "coffer-dovecot-\(UUID().uuidString)"
            )
            try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
            // Dovecot runs as nobody and must reach its folder below this one.
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: root.path)
            let certs = "\(root.path)/certs"
            try makeCertificates(in: certs, name: name)
            let server = try Dovecot.startBlocking(
                dir: "\(root.path)/server",
                certificate: "\(certs)/a-chain.pem",
                key: "\(certs)/a.key",
                users: ["\(user):\(password)"],
                pushURL: pushURL,
                owner: ProcessInfo.processInfo.processIdentifier
            )
            return PinnedDovecot(server: server, certs: certs, root: root.path)
        }

        /// Stops the server and removes its folder.
        public func stop() {
            server.stop()
            try? FileManager.default.removeItem(atPath: root)
        }

        /// Delivers `message` to the user over LMTP.
        public func deliver(_ message: [UInt8]) async throws { try await server.deliver(message, to: Self.user) }

        /// Delivers several messages to the user over one LMTP connection, on a thread of its own (``awaitWaiting(_:)``).
        public func deliver(many messages: [[UInt8]]) async throws {
            let encoded = messages.map { Data($0).base64EncodedString() }
            let script = """
                import base64, smtplib, sys
                sys.path.insert(0, \(String(reflecting: repoRoot.appendingPathComponent("Tests/servers").path)))
                import dovecot
                info = dovecot.load(\(String(reflecting: server.dir)))
                with smtplib.LMTP("127.0.0.1", info["lmtp_port"]) as lmtp:
                    for item in \(encoded):
                        lmtp.sendmail("sender@coffer.test", [\(String(reflecting: Self.user))], base64.b64decode(item))
                """
            let result = try await awaitWaiting { try runCommand(["/usr/bin/env", "python3", "-c", script]) }
            guard result.code == 0 else { throw TestSetupError(reason: "LMTP delivery failed: \(result.output)") }
        }

        /// The SPKI pin (base64) of the key `key` (`a`, `b`, `backup`, `rogue`...).
        public func pin(_ key: String) throws -> String {
            try String(contentsOfFile: "\(certs)/\(key).pin", encoding: .utf8).trimmingCharacters(
                in: .whitespacesAndNewlines
            )
        }
    }
}
