import CofferTesting
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

extension CLIRunner {
    /// `account add` for the test server, PIN and password on standard input.
    func addAccount(
        _ server: SyncDovecot,
        pins: [String],
        password: String = SyncDovecot.password,
        protected: Bool = true,
        startTLS: Bool = false,
        extra: [String] = []
    ) async throws -> Result {
        try await run(
            [
                "account", "add", "--imap",
                startTLS
                    ? "imap://\(SyncDovecot.name):\(server.server.imapPort)"
                    : "imaps://\(SyncDovecot.name):\(server.server.imapsPort)",
                "--user",
                SyncDovecot.user, "--ca-file", "\(server.certs)/ca.pem", "--connect", "127.0.0.1", "--pin-stdin",
                "--password-stdin",
            ] + pins.flatMap { ["--pin-sha256", $0] } + extra,
            input: (protected ? "\(SyncCLITests.pin)\n" : "") + "\(password)\n"
        )
    }
}

@Suite(.serialized) struct SyncCLITests {
    static let pin = "582914"

    /// A home with account "alice" protected by a PIN.
    func makeHome(protected: Bool = true) async throws -> CLIRunner {
        let cli = CLIRunner(prefix: "coffer-sync-cli", ownRuntime: true)
        #expect(try await cli.run(["init", "--account", "alice"]).status == 0)
        if protected {
            #expect(try await cli.run(["protect", "pin", "--pin-stdin"], input: "\(Self.pin)\n").status == 0)
        }
        return cli
    }

    /// A report URL is https and goes with pins, or the command is refused before anything is asked.
    @Test func aPinReportURLMustBeHTTPSAndComesWithPins() async throws {
        let cli = CLIRunner(prefix: "coffer-sync-cli-report")
        let base = ["account", "add", "--imap", "imaps://mail.example.org", "--user", "alice", "--password-stdin"]
        let pins = [
            "--pin-sha256", String(repeating: "A", count: 43) + "=", "--pin-sha256",
            String(repeating: "B", count: 43) + "=",
        ]
        let plain = try await cli.run(base + pins + ["--pin-report-url", "http://report.example.org/pins"])
        #expect(plain.status != 0)
        #expect(plain.stderr.contains("--pin-report-url must be an https URL"), "\(plain.stderr)")
        let unpinned = try await cli.run(base + ["--pin-report-url", "https://report.example.org/pins"])
        #expect(unpinned.status != 0)
        #expect(unpinned.stderr.contains("--pin-report-url needs --pin-sha256"), "\(unpinned.stderr)")
    }

    /// `--pin-expires` is a future YYYY-MM-DD and goes with pins, or the command is refused before anything is asked.
    @Test func aPinExpiryMustBeAFutureDateAndComesWithPins() async throws {
        let cli = CLIRunner(prefix: "coffer-sync-cli-expires")
        let base = ["account", "add", "--imap", "imaps://mail.example.org", "--user", "alice", "--password-stdin"]
        let pins = [
            "--pin-sha256", String(repeating: "A", count: 43) + "=", "--pin-sha256",
            String(repeating: "B", count: 43) + "=",
        ]
        for (value, sentence) in [
            ("2030-13-01", "YYYY-MM-DD"), ("2030-02-30", "YYYY-MM-DD"), ("tomorrow", "YYYY-MM-DD"),
            ("2001-01-01", "in the future"), ("2200-01-01", "before the year 2106"),
        ] {
            let refused = try await cli.run(base + pins + ["--pin-expires", value])
            #expect(refused.status != 0, "\(value)")
            #expect(refused.stderr.contains(sentence), "\(value): \(refused.stderr)")
        }
        let unpinned = try await cli.run(base + ["--pin-expires", "2099-01-01"])
        #expect(unpinned.status != 0)
        #expect(unpinned.stderr.contains("--pin-expires needs --pin-sha256"), "\(unpinned.stderr)")
    }

    /// Before the expiry the pins are enforced (another key is refused); the date is kept and shown.
    @Test func pinsWithAFutureExpiryAreEnforcedAndShown() async throws {
        let server = try await SyncDovecot.start()
        defer { server.stop() }
        let cli = try await makeHome()
        let expiry = ["--pin-expires", "2099-06-30"]
        let other = try await cli.addAccount(
            server,
            pins: [try server.pin("b"), try server.pin("backup")],
            extra: expiry
        )
        #expect(other.status == 1, "\(other.stdout)")
        let added = try await cli.addAccount(
            server,
            pins: [try server.pin("a"), try server.pin("backup")],
            extra: expiry
        )
        #expect(added.status == 0, "\(added.stderr)")
        #expect(added.stdout.contains("matched"))
        let shown = try await cli.run(["account", "show", "--pin-stdin"], input: "\(Self.pin)\n")
        #expect(shown.stdout.contains("pins enforced until: 2099-06-30T00:00:00Z"), "\(shown.stdout)")
    }

    @Test func accountAddShowSyncListRemove() async throws {
        let server = try await SyncDovecot.start()
        defer { server.stop() }
        for marker in ["clione", "clitwo"] { try await server.deliver(SyncMail.message(marker)) }
        let cli = try await makeHome()

        let added = try await cli.addAccount(server, pins: [try server.pin("a"), try server.pin("backup")])
        #expect(added.status == 0, "\(added.stderr)")
        #expect(added.stdout.contains("login checked"))
        #expect(added.stdout.contains("matched"))
        let shown = try await cli.run(["account", "show", "--pin-stdin"], input: "\(Self.pin)\n")
        #expect(shown.stdout.contains("alice at imaps://\(SyncDovecot.name)"))
        #expect(!shown.stdout.contains(SyncDovecot.password))

        let synced = try await cli.run(["sync", "--pin-stdin"], input: "\(Self.pin)\n")
        #expect(synced.status == 0, "\(synced.stderr)")
        #expect(synced.stdout.contains("Synced 1 folder: 2 new, 0 deleted, 0 flags changed."), "\(synced.stdout)")
        // Not a terminal: no progress line anywhere.
        #expect(!synced.stdout.contains("\r") && !synced.stderr.contains("\r"))
        #expect(!synced.stderr.contains("] 2/2"))
        let listed = try await cli.run(["list", "--pin-stdin"], input: "\(Self.pin)\n")
        #expect(listed.stdout.contains("note clione") && listed.stdout.contains("note clitwo"))
        // A folder the server refuses is named on standard error and fails the command; the others are synced.
        let partial = try await cli.run(
            ["sync", "--folder", "Missing\u{1B}[2J", "--folder", "INBOX", "--pin-stdin"],
            input: "\(Self.pin)\n"
        )
        #expect(partial.status == 1, "\(partial.stdout)\(partial.stderr)")
        #expect(partial.stdout.contains("Synced 1 folder: 0 new") && partial.stdout.contains("1 folder(s) not synced"))
        #expect(partial.stderr.contains("The folder Missing[2J was not synced"), "\(partial.stderr)")
        #expect(!partial.stderr.contains("\u{1B}"))
        let again = try await cli.run(["sync", "--pin-stdin"], input: "\(Self.pin)\n")
        #expect(again.stdout.contains("0 new, 0 deleted, 0 flags changed"), "\(again.stdout)")

        let removed = try await cli.run(["account", "remove", "1", "--pin-stdin"], input: "\(Self.pin)\n")
        #expect(removed.status == 0, "\(removed.stderr)")
        #expect(removed.stdout.contains("2 messages"))
        let none = try await cli.run(["account", "show", "--pin-stdin"], input: "\(Self.pin)\n")
        #expect(none.stdout.contains("No mail server account"))
        let nothing = try await cli.run(["sync", "--pin-stdin"], input: "\(Self.pin)\n")
        #expect(nothing.status == 1)
        #expect(nothing.stderr.contains("No mail server account is set up"))
    }

    @Test func anIMAPAccountWithSTARTTLSIsPinnedAndSyncs() async throws {
        let server = try await SyncDovecot.start()
        defer { server.stop() }
        try await server.deliver(SyncMail.message("starttlsone"))
        let cli = try await makeHome()
        let added = try await cli.addAccount(
            server,
            pins: [try server.pin("a"), try server.pin("backup")],
            startTLS: true
        )
        #expect(added.status == 0, "\(added.stderr)")
        #expect(added.stdout.contains("at imap://\(SyncDovecot.name):\(server.server.imapPort)"), "\(added.stdout)")
        #expect(added.stdout.contains("matched"))
        let synced = try await cli.run(["sync", "--pin-stdin"], input: "\(Self.pin)\n")
        #expect(synced.stdout.contains("1 new"), "\(synced.stdout) \(synced.stderr)")
        // Another key pinned: refused over STARTTLS too, and nothing stored.
        let other = try await cli.addAccount(
            server,
            pins: [try server.pin("b"), try server.pin("backup")],
            startTLS: true
        )
        #expect(other.status == 1)
        let shown = try await cli.run(["account", "show", "--pin-stdin"], input: "\(Self.pin)\n")
        #expect(shown.stdout.split(separator: "\n").filter { $0.contains(" at imap") }.count == 1, "\(shown.stdout)")
    }

    @Test func aWrongPasswordOrAWrongPinStoresNoAccount() async throws {
        let server = try await SyncDovecot.start()
        defer { server.stop() }
        let cli = try await makeHome()
        let wrongPassword = "not-the-password-4471"
        let refused = try await cli.addAccount(server, pins: [], password: wrongPassword)
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("LOGIN"))
        #expect(!refused.stderr.contains(wrongPassword))
        let wrongPin = try await cli.addAccount(server, pins: [try server.pin("b"), try server.pin("backup")])
        #expect(wrongPin.status == 1)
        #expect(wrongPin.stderr.contains(SyncDovecot.name), "\(wrongPin.stderr)")
        let one = try await cli.addAccount(server, pins: [try server.pin("a")])
        #expect(one.status != 0)
        #expect(one.stderr.contains("at least two --pin-sha256"))
        let shown = try await cli.run(["account", "show", "--pin-stdin"], input: "\(Self.pin)\n")
        #expect(shown.stdout.contains("No mail server account"))
    }

    @Test("a sync killed with SIGKILL at random points leaves no duplicate or half message; a rerun completes")
    func killedSyncs() async throws {
        let server = try await SyncDovecot.start()
        defer { server.stop() }
        // No PIN here (a PIN's key derivation would take most of each run's time): kills land inside the sync.
        let cli = try await makeHome(protected: false)
        let added = try await cli.addAccount(
            server,
            pins: [try server.pin("a"), try server.pin("backup")],
            protected: false
        )
        #expect(added.status == 0, "\(added.stderr)")
        // One whole sync of 20 new messages, unkilled, to learn how long a run takes on this machine.
        var markers = (0..<20).map { "killmarkerfirst\($0)x" }
        try await server.deliver(
            many: markers.map { SyncMail.message($0, extraBody: String(repeating: "padding\r\n", count: 500)) }
        )
        let start = ContinuousClock.now
        #expect(try await cli.run(["sync", "--batch", "1"]).status == 0)
        let elapsed = ContinuousClock.now - start
        let base = Int(elapsed.components.seconds * 1000) + Int(elapsed.components.attoseconds / 1_000_000_000_000_000)

        var generator = SystemRandomNumberGenerator()
        var killed = 0
        for run in 0..<20 {
            // Every run has new mail to fetch, one message per transaction.
            let fresh = (0..<20).map { "killmarker\(run)n\($0)x" }
            try await server.deliver(
                many: fresh.map { SyncMail.message($0, extraBody: String(repeating: "padding\r\n", count: 500)) }
            )
            markers += fresh
            let (process, stdout, stderr) = try cli.start(["sync", "--batch", "1"], input: "")
            // Anywhere from the start-up to the end of such a run: mostly inside the fetching.
            try await Task.sleep(for: .milliseconds(Int.random(in: (base / 4)...base, using: &generator)))
            if process.isRunning {
                // setsid runs coffer in a session of its own: kill it and the whole group.
                kill(-process.processIdentifier, SIGKILL)
                kill(process.processIdentifier, SIGKILL)
                killed += 1
            }
            _ = stdout.fileHandleForReading.readDataToEndOfFile()
            _ = stderr.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
        }
        let final = try await cli.run(["sync"], input: "")
        #expect(final.status == 0, "\(final.stderr)")
        let listed = try await cli.run(["list", "--limit", "1000"])
        let lines = listed.stdout.split(separator: "\n")
        #expect(lines.count == markers.count, "\(killed) kills; \(listed.stdout)")
        #expect(!listed.stdout.contains("damaged"))
        await #expect(try server.messages().count == markers.count)
        for marker in markers {
            let found = try await cli.run(["search", marker])
            #expect(found.stdout.split(separator: "\n").count == 1, "\(marker): \(found.stdout)")
        }
        print("killedSyncs: \(killed) of 20 runs killed mid-sync (a whole run took \(base) ms)")
    }

    @Test func aProgressBarIsDrawnOnStandardErrorOnlyWhenItIsATerminal() async throws {
        let server = try await SyncDovecot.start()
        defer { server.stop() }
        try await server.deliver(many: (0..<4).map { SyncMail.message("progress\($0)x") })
        let cli = try await makeHome(protected: false)
        let added = try await cli.addAccount(
            server,
            pins: [try server.pin("a"), try server.pin("backup")],
            protected: false
        )
        #expect(added.status == 0, "\(added.stderr)")
        // Standard error on a pseudo-terminal, standard output on a pipe.
        let script = """
            import json, os, subprocess, sys, threading
            master, slave = os.openpty()
            p = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave)
            os.close(slave)
            seen = bytearray()
            def pump():
                while True:
                    try:
                        chunk = os.read(master, 4096)
                    except OSError:
                        return
                    if not chunk:
                        return
                    seen.extend(chunk)
            reader = threading.Thread(target=pump)
            reader.start()
            out = p.stdout.read()
            p.wait()
            reader.join(10)
            print(json.dumps({"status": p.returncode, "stdout": out.decode(), "tty": seen.decode()}))
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "python3", "-c", script, CLIRunner.binary, "sync", "--batch", "1", "--home", cli.home.path,
        ]
        process.environment = cli.environment
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let result = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let tty = try #require(result["tty"] as? String)
        let stdout = try #require(result["stdout"] as? String)
        #expect(result["status"] as? Int == 0, "\(tty)")
        #expect(tty.contains("INBOX [") && tty.contains("] 4/4"), "\(tty)")
        #expect(tty.contains("] 1/4"), "\(tty)")
        #expect(stdout.contains("Synced 1 folder: 4 new"), "\(stdout)")
        #expect(!stdout.contains("\r") && !stdout.contains("] 4/4"), "\(stdout)")
    }

    @Test func throughTheAgentALockedSyncIsRefusedAndAnUnlockedOneSyncs() async throws {
        let server = try await SyncDovecot.start()
        defer { server.stop() }
        for marker in ["agentone", "agenttwo"] { try await server.deliver(SyncMail.message(marker)) }
        let cli = try await makeHome()
        let added = try await cli.addAccount(server, pins: [try server.pin("a"), try server.pin("backup")])
        #expect(added.status == 0, "\(added.stderr)")

        let agent = try await cli.startAgent()
        defer { CLIRunner.stopAgent(agent) }

        let locked = try await cli.run(["sync"])
        #expect(locked.status == 1)
        #expect(locked.stderr.contains("Coffer is locked"), "\(locked.stderr)")
        #expect(try await cli.run(["unlock", "--pin-stdin"], input: "\(Self.pin)\n").status == 0)
        let synced = try await cli.run(["sync"])
        #expect(synced.status == 0, "\(synced.stderr)")
        #expect(synced.stdout.contains("Synced 1 folder: 2 new, 0 deleted, 0 flags changed."), "\(synced.stdout)")
        let listed = try await cli.run(["list"])
        #expect(listed.stdout.contains("note agentone") && listed.stdout.contains("note agenttwo"), "\(listed.stdout)")
        #expect(try await cli.run(["sync"]).stdout.contains("0 new"))
    }

    /// With an agent running the account commands ask it: no PIN is read and no key is unlocked in the CLI (the
    /// commands get no `--pin-stdin` and an empty standard input after the password), a locked agent refuses.
    @Test func accountCommandsGoThroughTheAgentWhenOneRuns() async throws {
        let server = try await SyncDovecot.start()
        defer { server.stop() }
        try await server.deliver(SyncMail.message("agentaccountone"))
        let cli = try await makeHome()
        let agent = try await cli.startAgent()
        defer { CLIRunner.stopAgent(agent) }

        let locked = try await cli.run(["account", "show"])
        #expect(locked.status == 1)
        #expect(locked.stderr.contains("Coffer is locked"), "\(locked.stderr)")
        #expect(try await cli.run(["unlock", "--pin-stdin"], input: "\(Self.pin)\n").status == 0)

        let added = try await cli.addAccount(
            server,
            pins: [try server.pin("a"), try server.pin("backup")],
            protected: false
        )
        #expect(added.status == 0, "\(added.stderr)")
        #expect(added.stdout.contains("login checked") && added.stdout.contains("matched"), "\(added.stdout)")
        let wrong = try await cli.addAccount(server, pins: [], password: "not-the-password-9921", protected: false)
        #expect(wrong.status == 1)
        #expect(wrong.stderr.contains("LOGIN") && !wrong.stderr.contains("not-the-password-9921"), "\(wrong.stderr)")

        let shown = try await cli.run(["account", "show"])
        #expect(shown.status == 0, "\(shown.stderr)")
        #expect(shown.stdout.contains("1\talice at imaps://\(SyncDovecot.name)"), "\(shown.stdout)")
        #expect(!shown.stdout.contains(SyncDovecot.password))
        #expect(!shown.stdout.contains("2\t"))
        #expect(try await cli.run(["sync"]).stdout.contains("1 new"))

        let removed = try await cli.run(["account", "remove", "1"])
        #expect(removed.status == 0, "\(removed.stderr)")
        #expect(removed.stdout.contains("1 messages"), "\(removed.stdout)")
        #expect(try await cli.run(["account", "show"]).stdout.contains("No mail server account"))
        #expect(try await cli.run(["account", "remove", "7"]).status == 1)
    }

    @Test func watchSyncsAgainWhenNewMailArrives() async throws {
        let server = try await SyncDovecot.start()
        defer { server.stop() }
        try await server.deliver(SyncMail.message("watchone"))
        let cli = try await makeHome(protected: false)
        let added = try await cli.addAccount(
            server,
            pins: [try server.pin("a"), try server.pin("backup")],
            protected: false
        )
        #expect(added.status == 0, "\(added.stderr)")

        let output = "\(cli.home.path)/watch.out"
        _ = FileManager.default.createFile(atPath: output, contents: nil)
        let watcher = Process()
        watcher.executableURL = URL(fileURLWithPath: CLIRunner.binary)
        watcher.arguments = ["sync", "--watch", "--home", cli.home.path]
        watcher.environment = cli.environment
        watcher.standardInput = FileHandle.nullDevice
        watcher.standardOutput = FileHandle(forWritingAtPath: output)
        watcher.standardError = FileHandle(forWritingAtPath: output)
        try watcher.run()
        defer {
            kill(watcher.processIdentifier, SIGKILL)
            watcher.waitUntilExit()
        }
        /// Waits (at most 60 s) until the output has `count` summary lines.
        func lines(_ count: Int) async -> [String] {
            var found: [String] = []
            for _ in 0..<600 {
                let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
                found = text.split(separator: "\n").map(String.init).filter { $0.hasPrefix("Synced") }
                if found.count >= count || !watcher.isRunning { break }
                try? await Task.sleep(for: .milliseconds(100))
            }
            return found
        }
        let first = await lines(1)
        #expect(first.first?.contains("1 new") == true, "\(first)")
        try await server.deliver(SyncMail.message("watchtwo"))
        let second = await lines(2)
        #expect(second.count == 2, "\(second)")
        #expect(second.last?.contains("1 new") == true, "\(second)")
        #expect(watcher.isRunning)
        kill(watcher.processIdentifier, SIGKILL)
        watcher.waitUntilExit()
        #expect(try await cli.run(["search", "watchtwo"]).stdout.split(separator: "\n").count == 1)
    }
}
