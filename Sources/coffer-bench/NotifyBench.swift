import CofferCrypto
import CofferNotify
import CofferPush
import CofferTesting
import Crypto
import Foundation
import Logging
import ServiceLifecycle

#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Issue 11's bench for `coffer-notify`, in three tables (the third, issue 24's load test, is ``NotifyLoadBench``).
///
/// Throughput: on one task (one core), Dovecot events handled through the library exactly as the server handles
/// them (`NotifyService.handle` on a `SQLiteNotifyStorage` in a temporary folder, with the FastSync escrow the
/// server opens), for one user with ``sessions`` live sessions, so each event is ``sessions`` pushes (one RFC 8291
/// seal, one enqueue and one wake each). Beside it the seal alone (`PushMessage.seal(to:)`, no storage), and the
/// reference `openssl speed -seconds 3 ecdhp256` in the same run: every RFC 8291 message costs one P-256 ECDH, so
/// that is the ceiling, and the issue's aim is at least 0.4 of it.
///
/// wrk: the built `coffer-notify serve` on loopback (SQLite, then PostgreSQL from `scripts/postgres.sh` when it can
/// start a cluster), with ``sessions`` sessions made in its storage before it starts, under
/// `wrk -t2 -c16 -d10s --latency` PUTting Dovecot ox events to `/v1/events/dovecot`: requests per second, p99 and the
/// pushes the answers say were queued (one 10 s run each). wrk and the server share the machine's cores. The library
/// loop drops the service's log lines; the server writes them to its standard error, which goes to /dev/null.
enum NotifyBench {
    /// Live sessions of the one user; every event makes this many pushes.
    static let sessions = 4
    /// Events per timed round of the library loop (each round is `events × sessions` pushes).
    static let events = 300
    /// Events in flight at once in the concurrent row (as many as wrk's connections).
    static let inFlight = 16
    /// Timed rounds of the library loop; the table shows the median.
    static let rounds = 5
    /// The user every event is for.
    static let user = "bench@example.org"
    /// A logger that drops everything (the server's own log goes to its standard error).
    static let quiet = Logger(label: "coffer-bench.notify") { _ in SwiftLogNoOpLogHandler() }

    /// Settings without the per-session queue cap: the events here are never acked, and the throughput rows measure
    /// queuing, not the cap.
    static var unboundedQueues: NotifyService.Settings {
        var settings = NotifyService.Settings(eventSecret: Array("bench".utf8))
        settings.maximumQueuedPerSession = .max
        return settings
    }

    /// Prints both tables; the wrk rows are skipped, each with one sentence, without wrk or PostgreSQL.
    static func run() async throws {
        try await throughput()
        try await wrkTable()
        try await NotifyLoadBench.run()
    }

    // MARK: - Throughput through the library

    /// What ``measureThroughput(events:rounds:)`` found: pushes per second and CPU-seconds per second.
    struct Throughput {
        /// `NotifyService.handle`, one event at a time: pushes per second, and CPU-seconds per second.
        var handleRate: Double
        var handleShare: Double
        /// The same with ``inFlight`` events at a time.
        var groupRate: Double
        var groupShare: Double
        /// `PushMessage.seal(to:)` alone.
        var sealRate: Double
        /// `openssl speed ecdhp256`'s operations per second; nil without openssl.
        var openssl: Double?
    }

    /// Pushes queued per second by `NotifyService.handle` on one task, and seals per second without storage,
    /// beside `openssl speed ecdhp256`.
    static func throughput() async throws {
        let measured = try await measureThroughput(events: events, rounds: rounds)
        let openssl = measured.openssl
        var table = Table(
            "notify: pushes per second on one core beside openssl speed -seconds 3 ecdhp256 (one P-256 ECDH per "
                + "RFC 8291 message); \(sessions) sessions, median of \(rounds) rounds of \(events) events",
            ["measure", "Coffer pushes/s", "openssl ECDH P-256 ops/s", "ratio", "aim"]
        )
        for (name, rate, aim) in [
            ("NotifyService.handle: seal + enqueue (SQLite) + wake", measured.handleRate, "≥ 0.4"),
            ("the same, \(inFlight) events in flight from one task (task group; group commit)", measured.groupRate, ""),
            ("PushMessage.seal(to:) alone, no storage", measured.sealRate, ""),
        ] {
            table.add([
                name, format(rate, 0), openssl.map { format($0, 0) } ?? "n/a",
                openssl.map { format(rate / $0, 2) } ?? "n/a", aim,
            ])
        }
        table.print()
        print(
            "(handle: \(format(measured.handleShare, 2)) CPU-seconds per second of the loop, this process's user + "
                + "system time; a seal is \(format(1e6 / measured.sealRate, 1)) µs of the "
                + "\(format(1e6 / measured.handleRate, 1)) µs a push costs; \(inFlight) in flight: "
                + "\(format(measured.groupShare, 2)) CPU-seconds per second)"
        )
        if openssl == nil { print("(openssl is missing or printed no ecdh (nistp256) line: no reference)") }
    }

    /// The throughput rows, with `rounds` timed rounds of `events` events each (medians), and the reference.
    static func measureThroughput(events: Int, rounds: Int) async throws -> Throughput {
        let folder = TemporaryDirectory(prefix: "coffer-bench-notify")
        defer { withExtendedLifetime(folder) {} }
        // The storage and escrow `serve` opens by default: the home's notify.sqlite and escrow.sqlite.
        let home = try NotifyHome(explicit: "\(folder.path)/data")
        let opened = try await NotifyConfig().openStorage(home: home, logger: quiet)
        let keys = try await makeSessions(in: opened.storage)
        var service = NotifyService(
            storage: opened.storage,
            authenticator: NoRegistration(),
            settings: unboundedQueues,
            logger: quiet
        )
        service.escrow = try FastSyncEscrow(records: opened.escrow, masterKey: home.masterKey())

        // Warm up (the database's first pages, the code paths), then time the rounds.
        var uid: UInt32 = 0
        func nextEvent() -> DovecotEvent {
            uid += 1
            return event(uid: uid)
        }
        for _ in 0..<20 { _ = try await service.handle(nextEvent()) }
        // Pushes queued per second and the process's CPU share, medians of `rounds` rounds of `events` events each.
        func measure(_ round: () async throws -> Int) async throws -> (rate: Double, share: Double) {
            var rates: [Double] = []
            var shares: [Double] = []
            for _ in 0..<rounds {
                let cpuStart = cpuSeconds()
                let start = Timer.now()
                let queued = try await round()
                let wall = Double(Timer.now() - start) / 1e9
                guard queued == events * sessions else {
                    throw BenchError("notify: \(queued) pushes queued for \(events) events to \(sessions) sessions")
                }
                rates.append(Double(queued) / wall)
                shares.append((cpuSeconds() - cpuStart) / wall)
            }
            return (percentiles(rates).p50, percentiles(shares).p50)
        }
        let (handleRate, cpuShare) = try await measure {
            var queued = 0
            for _ in 0..<events { queued += try await service.handle(nextEvent()) }
            return queued
        }

        // The same events, ``inFlight`` at a time from one task (a task group, as `serve` runs concurrent requests):
        // events that arrive together share one commit (``GroupCommit``). The children run on the cooperative pool,
        // so this row may use both cores; its CPU share is printed.
        let concurrent = service
        let (groupRate, groupShare) = try await measure {
            let first = uid
            uid += UInt32(events)
            return try await withThrowingTaskGroup(of: Int.self) { group in
                var queued = 0
                for index in 0..<events {
                    if index >= inFlight, let done = try await group.next() { queued += done }
                    let next = event(uid: first + UInt32(index) + 1)
                    group.addTask { try await concurrent.handle(next) }
                }
                for try await done in group { queued += done }
                return queued
            }
        }

        // The seal alone: the same message to one of the same subscriptions, nothing stored.
        let message = PushMessage(event: event(uid: 1))
        let subscription = keys[0].subscription
        // Every seal must open for its device, or the figure measures nothing.
        _ = try keys[0].open(try message.seal(to: subscription))
        let sealRate = try Timer.rate(seconds: 1.5) { _ = try message.seal(to: subscription) }

        return Throughput(
            handleRate: handleRate,
            handleShare: cpuShare,
            groupRate: groupRate,
            groupShare: groupShare,
            sealRate: sealRate,
            openssl: OpenSSLECDH.operationsPerSecond()
        )
    }

    /// Makes ``sessions`` live sessions of ``user`` in `storage`, each with fresh P-256 push keys; returns the
    /// device side of each (to check that a push opens).
    static func makeSessions(in storage: any NotifyStorage) async throws -> [WebPush.UserAgentKeys] {
        let now = Date()
        var keys: [WebPush.UserAgentKeys] = []
        for index in 0..<sessions {
            let device = WebPush.UserAgentKeys()
            try await storage.createSession(
                NotifySession(
                    id: UUID().uuidString.lowercased(),
                    user: user,
                    deviceName: "bench device \(index)",
                    tokenHash: SessionToken().hash,
                    created: now,
                    lastSeen: now,
                    expires: now.addingTimeInterval(30 * 24 * 3600),
                    pushPublicKey: device.subscription.publicKeyBytes,
                    pushAuthSecret: device.authSecret.withUnsafeBytes { Array($0) }
                )
            )
            keys.append(device)
        }
        return keys
    }

    /// A new-mail event for ``user``, as Dovecot's ox driver sends it.
    static func event(uid: UInt32) -> DovecotEvent {
        DovecotEvent(
            user: user,
            folder: "INBOX",
            uidValidity: 1_700_000_000,
            uid: uid,
            from: "Bench Sender <sender@example.org>",
            subject: "Quarterly figures, draft \(uid)"
        )
    }

    /// This process's user + system CPU time, in seconds.
    static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    /// Refuses every registration: the bench makes its sessions directly in storage.
    struct NoRegistration: MailAuthenticator {
        func verify(user: String, password: String) async throws(NotifyError) {
            throw .mailServerUnavailable("the bench registers no devices")
        }
    }

    // MARK: - wrk on the event endpoint

    /// One wrk run's figures.
    struct WrkResult {
        /// Requests per second (wrk's `Requests/sec`).
        var requestsPerSecond: Double
        /// The 99th percentile latency, in milliseconds (wrk's `--latency` distribution).
        var p99Milliseconds: Double
        /// The run's length, in seconds (wrk's `N requests in Ts`).
        var seconds: Double
        /// The sum of the answers' `count`: pushes queued.
        var queued: Int
        /// Answers that were not 200.
        var failed: Int
        /// wrk's `Socket errors: …` line (connect, read, write, timeout), when it printed one.
        var socketErrors: String?
    }

    /// The wrk table: SQLite, then PostgreSQL; a row whose tool is missing is skipped with one sentence.
    static func wrkTable() async throws {
        guard let wrk = (["/usr/bin/wrk", "/usr/local/bin/wrk"] as [String]).first(where: { access($0, X_OK) == 0 })
        else {
            print(
                "notify: wrk is missing (Debian: apt-get install wrk; scripts/setup.sh does it); the wrk table is "
                    + "skipped"
            )
            return
        }
        var table = Table(
            "notify: wrk -t2 -c16 -d10s on PUT /v1/events/dovecot (coffer-notify serve on loopback, \(sessions) "
                + "sessions of one user, so \(sessions) pushes per request; wrk runs on the same cores)",
            ["storage", "requests/s", "p99 (ms)", "pushes queued", "pushes/s", "answers not 200"]
        )
        var notes: [String] = []
        func add(_ name: String, _ result: WrkResult) {
            if let errors = result.socketErrors { notes.append("(\(name): wrk's \(errors))") }
            table.add([
                name, format(result.requestsPerSecond, 0), format(result.p99Milliseconds, 1), String(result.queued),
                format(Double(result.queued) / result.seconds, 0), String(result.failed),
            ])
        }
        add("SQLite", try await serveAndLoad(wrk: wrk, postgres: nil))

        if let cluster = startPostgres() {
            defer { _ = try? ImportMemoryBench.spawn(["/bin/bash", postgresScript, "stop", cluster.dir]) }
            add("PostgreSQL", try await serveAndLoad(wrk: wrk, postgres: cluster.postgres))
        }
        table.print()
        for note in notes { print(note) }
    }

    /// `scripts/postgres.sh`: a private PostgreSQL cluster on loopback.
    static let postgresScript = TestServers.repoRoot.appendingPathComponent("scripts/postgres.sh").path

    /// Starts a private cluster with `scripts/postgres.sh start` and returns how to reach it and its folder (for
    /// `stop`); nil, after one sentence, when PostgreSQL is missing or the cluster did not start.
    ///
    /// Through `posix_spawn` and a file, not Foundation's `Process`: the postmaster outlives the script and would
    /// keep the socket Foundation watches for the script's end, so `waitUntilExit` would never return. Through
    /// `env --default-signal`: a child of a Dispatch thread inherits its blocked signals (pg_ctl stops the server
    /// with SIGINT).
    static func startPostgres() -> (postgres: NotifyConfig.Postgres, dir: String)? {
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        guard versions.contains(where: { access("/usr/lib/postgresql/\($0)/bin/initdb", X_OK) == 0 }) else {
            print("notify: PostgreSQL is missing (Debian: apt-get install postgresql); the PostgreSQL row is skipped")
            return nil
        }
        let folder = TemporaryDirectory(prefix: "coffer-bench-notify-postgres")
        defer { withExtendedLifetime(folder) {} }
        let output = "\(folder.path)/start.out"
        do {
            _ = try ImportMemoryBench.spawn(
                ["/usr/bin/env", "--default-signal", "/bin/bash", postgresScript, "start"],
                output: output
            )
        } catch {
            print("notify: scripts/postgres.sh could not start a cluster (\(error)); the PostgreSQL row is skipped")
            return nil
        }
        let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        guard let address = value(after: "COFFER_TEST_POSTGRES=", in: text),
            let dir = value(after: "COFFER_TEST_POSTGRES_DIR=", in: text),
            let colon = address.lastIndex(of: ":"), let port = Int(address[address.index(after: colon)...])
        else {
            print("notify: scripts/postgres.sh printed no address (\(text)); the PostgreSQL row is skipped")
            return nil
        }
        let postgres = NotifyConfig.Postgres(
            host: String(address[..<colon]),
            port: port,
            user: "coffer",
            database: "postgres",
            tls: false
        )
        return (postgres, dir)
    }

    /// Prepares a data folder (event secret, master key, sessions in the chosen storage), starts `coffer-notify
    /// serve` on it, runs wrk against its event endpoint, and kills the server.
    static func serveAndLoad(wrk: String, postgres: NotifyConfig.Postgres?) async throws -> WrkResult {
        let folder = TemporaryDirectory(prefix: "coffer-bench-notify-wrk")
        defer { withExtendedLifetime(folder) {} }
        let home = try NotifyHome(explicit: "\(folder.path)/data")
        let secret = (0..<32).map { _ in "abcdefghijklmnopqrstuvwxyz0123456789".randomElement().map(String.init)! }
            .joined()
        try SecureFile.writeAtomically(Array(secret.utf8), to: "\(home.path)/event-secret")
        var serve = [
            ImportMemoryBench.siblingBinary("coffer-notify"), "serve", "--port", "0", "--data-dir", home.path,
            // The events are never acked: without this the queue cap, not queuing, would be measured.
            "--max-queued-per-session", "1000000000",
        ]
        let config = NotifyConfig(storage: postgres == nil ? "sqlite" : "postgres", postgres: postgres)
        if postgres != nil {
            let path = "\(folder.path)/notify.json"
            try SecureFile.writeAtomically(Array(try JSONEncoder().encode(config)), to: path)
            serve += ["--config", path]
        }
        // The sessions go into the storage the server will open: the same config, and the home's master key
        // (made here; the server reads it). Closed before the server starts.
        do {
            let opened = try await config.openStorage(home: home, logger: quiet)
            _ = try await makeSessions(in: opened.storage)
            opened.postgres?.shutdown()
        }

        // Through `sh`, which prints its pid and becomes the server (exec), so that the server can be killed with
        // SIGKILL: a child started by Foundation from a Dispatch thread may ignore SIGTERM. `env --default-signal`
        // gives the server the signals a shell would.
        let server = try Background(
            ["/bin/sh", "-c", #"echo "coffer-bench pid $$"; exec "$0" "$@""#, "/usr/bin/env", "--default-signal"]
                + serve,
            watch: .standardOutput
        )
        guard server.log.wait(for: "coffer-bench pid ", count: 1, seconds: 10),
            let pid = value(after: "coffer-bench pid ", in: server.log.text).flatMap({ pid_t($0) })
        else { throw BenchError("the server's shell did not start: \(server.log.text)") }
        defer {
            kill(pid, SIGKILL)
            server.stop()  // waits until Foundation has reaped it
        }
        guard server.log.wait(for: "coffer-notify listening on", count: 1, seconds: 60),
            let address = value(after: "coffer-notify listening on ", in: server.log.text),
            let port = address.split(separator: ":").last.flatMap({ Int($0) })
        else { throw BenchError("coffer-notify did not start: \(server.log.text)") }

        let lua = "\(folder.path)/event.lua"
        try Data(luaScript(secret: secret).utf8).write(to: URL(fileURLWithPath: lua))
        let run = try runCommand([
            wrk, "-t2", "-c16", "-d10s", "--latency", "-s", lua, "http://127.0.0.1:\(port)/v1/events/dovecot",
        ])
        guard run.code == 0, let result = parseWrk(run.output) else {
            throw BenchError("wrk failed or printed no figures: \(run.output)")
        }
        return result
    }

    /// The text after `prefix` on the first line that has it.
    static func value(after prefix: String, in text: String) -> String? {
        guard let range = text.range(of: prefix) else { return nil }
        let rest = text[range.upperBound...]
        return String(rest.prefix { $0 != "\n" }).trimmingCharacters(in: .whitespaces)
    }

    /// wrk's Lua: PUT the ox JSON with Basic auth; sum the answers' `count` and the answers that were not 200, and
    /// print both at the end on one line (`coffer-bench queued N failed N`).
    static func luaScript(secret: String) -> String {
        let body =
            #"{"user":"\#(user)","event":"messageNew","folder":"INBOX","imap-uidvalidity":1700000000,"#
            + #""imap-uid":42,"from":"Bench Sender <sender@example.org>","subject":"Quarterly figures, draft 42","#
            + #""snippet":"Please find the figures attached.","unseen":1}"#
        let authorization = "Basic " + Data("dovecot:\(secret)".utf8).base64EncodedString()
        return """
            wrk.method = "PUT"
            wrk.body = [==[\(body)]==]
            wrk.headers["Content-Type"] = "application/json"
            wrk.headers["Authorization"] = "\(authorization)"
            local threads = {}
            function setup(thread) table.insert(threads, thread) end
            function init(args) queued = 0; failed = 0 end
            function response(status, headers, body)
              if status == 200 then
                queued = queued + (tonumber(string.match(body, '"count"%s*:%s*(%d+)')) or 0)
              else
                failed = failed + 1
              end
            end
            function done(summary, latency, requests)
              local q, f = 0, 0
              for _, thread in ipairs(threads) do q = q + thread:get("queued"); f = f + thread:get("failed") end
              io.write(string.format("coffer-bench queued %d failed %d\\n", q, f))
            end

            """
    }

    /// Requests/sec, the 99% latency, the run's length and the Lua's counts from wrk's `--latency` output; nil when
    /// any is missing.
    static func parseWrk(_ output: String) -> WrkResult? {
        var rate: Double?
        var p99: Double?
        var seconds: Double?
        var counts: (Int, Int)?
        var socketErrors: String?
        for line in output.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
            guard let first = fields.first else { continue }
            if first == "Requests/sec:", fields.count >= 2 {
                rate = Double(fields[1])
            } else if first == "99%", fields.count >= 2 {
                p99 = milliseconds(fields[1])
            } else if fields.count >= 4, fields[1] == "requests", fields[2] == "in" {
                // "76270 requests in 10.01s, 8.87MB read"
                seconds = milliseconds(String(fields[3].prefix { $0 != "," })).map { $0 / 1000 }
            } else if first == "coffer-bench", fields.count == 5, let queued = Int(fields[2]),
                let failed = Int(fields[4])
            {
                counts = (queued, failed)
            } else if first == "Socket", fields.count >= 2, fields[1] == "errors:" {
                socketErrors = fields.joined(separator: " ")
            }
        }
        guard let rate, let p99, let seconds, seconds > 0, let counts else { return nil }
        return WrkResult(
            requestsPerSecond: rate,
            p99Milliseconds: p99,
            seconds: seconds,
            queued: counts.0,
            failed: counts.1,
            socketErrors: socketErrors
        )
    }

    /// A wrk duration (`635.91us`, `2.03ms`, `1.20s`, `1.50m`) in milliseconds.
    static func milliseconds(_ text: String) -> Double? {
        for (unit, scale) in [("us", 0.001), ("ms", 1.0), ("s", 1000.0), ("m", 60_000.0), ("h", 3_600_000.0)]
        where text.hasSuffix(unit) {
            return Double(text.dropLast(unit.count)).map { $0 * scale }
        }
        return nil
    }
}

/// Runs `openssl speed -seconds 3 ecdhp256` (one process).
enum OpenSSLECDH {
    /// P-256 ECDH operations per second, or `nil` without openssl or without a figure in its output.
    static func operationsPerSecond() -> Double? {
        // `env --default-signal`: openssl speed ends each test with SIGALRM, which a child of a Dispatch thread
        // inherits blocked (it would never stop).
        guard
            let result = try? runCommand([
                "/usr/bin/env", "--default-signal", "openssl", "speed", "-seconds", "3", "ecdhp256",
            ]),
            result.code == 0
        else { return nil }
        return parse(result.output)
    }

    /// The ops/s figure from `openssl speed ecdhp256`'s output (standard output and error together): the table line
    /// ` 256 bits ecdh (nistp256)   0.0000s  27827.3` (its last field), else the progress line `26930 256-bits ECDH
    /// ops in 1.00s`.
    static func parse(_ output: String) -> Double? {
        let lines = output.split(separator: "\n").map { $0.lowercased() }
        if let line = lines.last(where: { $0.contains("ecdh") && $0.contains("nistp256") }),
            let last = line.split(separator: " ").last, let rate = Double(last), rate > 0
        {
            return rate
        }
        for line in lines.reversed() {
            let fields = line.split(separator: " ")
            guard let ops = fields.firstIndex(of: "ops"), ops >= 3, fields[ops - 1] == "ecdh",
                ops + 2 < fields.count, fields[ops + 1] == "in", let count = Double(fields[ops - 3]),
                let time = Double(fields[ops + 2].trimmingCharacters(in: CharacterSet(charactersIn: "s"))), time > 0
            else { continue }
            return count / time
        }
        return nil
    }
}

/// Issue 24's load test: one in-process `coffer-notify` (the server `serve` runs, with its connection guard, SQLite
/// in a temporary folder) while 1,000 silent sockets from 20 loopback addresses are kept open (reopened as the header
/// deadline closes them) and a stranger tries wrong passwords for the user every 100 ms through the trusted proxy
/// (127.0.0.1, `X-Forwarded-For`). Meanwhile the user's device, from another forwarded address, runs ``cycles``
/// cycles of: register, an event, the push fetched from the stream (long poll), ack, revoke. The table gives the
/// cycle's and the registration's p50 and p99, the cycles that failed, and what the stranger got.
enum NotifyLoadBench {
    static let cycles = 40
    static let silent = 1000
    static let user = "victim@example.org"
    static let password = "the-right-password"

    /// Accepts one password for one user, like a mail server; counts the checks that reach it.
    final class MailServer: MailAuthenticator, @unchecked Sendable {
        private let lock = NSLock()
        private var checks = 0
        var count: Int { lock.withLock { checks } }
        func verify(user: String, password: String) async throws(NotifyError) {
            lock.withLock { checks += 1 }
            guard user == NotifyLoadBench.user, password == NotifyLoadBench.password else { throw .wrongCredentials }
        }
    }

    /// A non-blocking socket connected from `source` that sends nothing.
    static func silentSocket(port: Int, source: String) -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return -1 }
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        inet_pton(AF_INET, source, &local.sin_addr)
        var remote = sockaddr_in()
        remote.sin_family = sa_family_t(AF_INET)
        remote.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, "127.0.0.1", &remote.sin_addr)
        _ = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        _ = withUnsafePointer(to: &remote) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        return descriptor
    }

    /// Whether the server closed `descriptor` (end of stream or an error).
    static func closed(_ descriptor: Int32) -> Bool {
        var pollSet = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        guard poll(&pollSet, 1, 0) > 0 else { return false }
        var byte: UInt8 = 0
        let count = recv(descriptor, &byte, 1, Int32(MSG_DONTWAIT))
        return count == 0 || (count < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
    }

    static func request(
        _ url: String,
        method: String,
        from client: String,
        token: String? = nil,
        body: Data? = nil
    ) async throws -> (status: Int, body: Data) {
        var request = URLRequest(url: URL(string: url)!)
        request.httpMethod = method
        request.timeoutInterval = 60
        request.setValue(client, forHTTPHeaderField: "X-Forwarded-For")
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        if let body {
            request.httpBody = body
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, data)
    }

    static func registration(password: String) throws -> Data {
        let keys = WebPush.UserAgentKeys()
        return try JSONEncoder().encode(
            RegisterRequest(
                user: user,
                password: password,
                deviceName: "bench phone",
                pushPublicKey: Base64URL.encode(keys.subscription.publicKeyBytes),
                pushAuthSecret: keys.authSecret.withUnsafeBytes { Base64URL.encode(Array($0)) }
            )
        )
    }

    static func run() async throws {
        let descriptors = DescriptorLimit.raise()
        let folder = TemporaryDirectory(prefix: "coffer-bench-notify-load")
        defer { withExtendedLifetime(folder) {} }
        let home = try NotifyHome(explicit: "\(folder.path)/data")
        let opened = try await NotifyConfig().openStorage(home: home, logger: NotifyBench.quiet)
        let mail = MailServer()
        var settings = NotifyService.Settings(eventSecret: Array("bench".utf8))
        settings.trustedProxies = [CIDR("127.0.0.1/32")!]
        // The device's own 40 registrations in well under a minute are not what is measured: only failures (the
        // stranger's) slow a client here.
        settings.registrationsPerMinute = 10_000
        let service = NotifyService(
            storage: opened.storage,
            authenticator: mail,
            settings: settings,
            logger: NotifyBench.quiet
        )
        let limits = ConnectionLimits().fitting(descriptors: descriptors)
        let (ports, portSink) = AsyncStream<Int>.makeStream()
        let server = NotifyServer.application(service: service, host: "127.0.0.1", port: 0, limits: limits) {
            portSink.yield($0)
        }
        let group = ServiceGroup(services: [server], gracefulShutdownSignals: [], logger: NotifyBench.quiet)
        let running = Task { try await group.run() }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else { return }
        let base = "http://127.0.0.1:\(port)"

        // 1,000 silent sockets, kept at 1,000 as the server closes them at their header deadline.
        let holder = Task.detached { () -> (opened: Int, closedByServer: Int) in
            var sockets: [(Int32, String)] = (0..<silent).map { index in
                let source = "127.0.1.\(index % 20 + 1)"
                return (silentSocket(port: port, source: source), source)
            }
            var opened = silent
            var closedByServer = 0
            while !Task.isCancelled {
                for index in sockets.indices where closed(sockets[index].0) {
                    close(sockets[index].0)
                    closedByServer += 1
                    sockets[index].0 = silentSocket(port: port, source: sockets[index].1)
                    opened += 1
                }
                try? await Task.sleep(for: .milliseconds(200))
            }
            for (descriptor, _) in sockets { close(descriptor) }
            return (opened, closedByServer)
        }
        // The stranger: a wrong password every 100 ms.
        let stranger = Task.detached { () -> [Int: Int] in
            var statuses: [Int: Int] = [:]
            let body = try? registration(password: "wrong")
            while !Task.isCancelled {
                let status =
                    (try? await request("\(base)/v1/sessions", method: "POST", from: "198.51.100.66", body: body))?
                    .status ?? 0
                statuses[status, default: 0] += 1
                try? await Task.sleep(for: .milliseconds(100))
            }
            return statuses
        }
        try await Task.sleep(for: .seconds(2))

        var cycleTimes: [Double] = []
        var registerTimes: [Double] = []
        var failures = 0
        var firstFailure: String?
        let clock = ContinuousClock()
        for cycle in 0..<cycles {
            let start = clock.now
            do {
                let registered = try await request(
                    "\(base)/v1/sessions",
                    method: "POST",
                    from: "203.0.113.7",
                    body: try registration(password: password)
                )
                registerTimes.append((clock.now - start).milliseconds)
                guard registered.status == 201 else {
                    failures += 1
                    firstFailure = firstFailure ?? "registration answered \(registered.status)"
                    continue
                }
                let decoder = JSONDecoder()
                decoder.dateDecodingStrategy = .iso8601
                let token = try decoder.decode(TokenResponse.self, from: registered.body)
                _ = try await service.handle(
                    DovecotEvent(
                        user: user,
                        folder: "INBOX",
                        uid: UInt32(cycle + 1),
                        from: "a@example.org",
                        subject: "s"
                    )
                )
                let streamed = try await request(
                    "\(base)/v1/stream?wait=10",
                    method: "GET",
                    from: "203.0.113.7",
                    token: token.token
                )
                struct Stream: Decodable {
                    struct Message: Decodable { let id: String }
                    let messages: [Message]
                }
                let messages = try JSONDecoder().decode(Stream.self, from: streamed.body).messages
                guard streamed.status == 200, messages.count == 1 else {
                    failures += 1
                    firstFailure = firstFailure ?? "the stream answered \(streamed.status) with \(messages.count)"
                    continue
                }
                _ = try await request(
                    "\(base)/v1/stream/ack",
                    method: "POST",
                    from: "203.0.113.7",
                    token: token.token,
                    body: try JSONEncoder().encode(AckRequest(ids: messages.map(\.id)))
                )
                _ = try await request(
                    "\(base)/v1/sessions/\(token.sessionID)",
                    method: "DELETE",
                    from: "203.0.113.7",
                    token: token.token
                )
                cycleTimes.append((clock.now - start).milliseconds)
            } catch {
                failures += 1
                firstFailure = firstFailure ?? "\(error)"
            }
            // The cycles span more than the header deadline, so the silent sockets are closed and reopened meanwhile.
            try await Task.sleep(for: .milliseconds(300))
        }
        stranger.cancel()
        holder.cancel()
        let attempts = await stranger.value
        let sockets = await holder.value
        running.cancel()
        _ = try? await running.value

        var table = Table(
            "notify under attack: \(silent) silent sockets and a wrong password every 100 ms, while a device "
                + "registers, streams and gets its pushes (\(cycles) cycles)",
            ["row", "p50 ms", "p99 ms", "n"]
        )
        if !cycleTimes.isEmpty {
            let (p50, p99) = percentiles(cycleTimes)
            table.add(["register, event, stream, ack, revoke", format(p50), format(p99), "\(cycleTimes.count)"])
        }
        if !registerTimes.isEmpty {
            let (p50, p99) = percentiles(registerTimes)
            table.add(["registration alone", format(p50), format(p99), "\(registerTimes.count)"])
        }
        table.print()
        print(
            "device cycles failed: \(failures)\(firstFailure.map { " (first: \($0))" } ?? ""); stranger's answers: "
                + attempts.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ")
                + "; checks that reached the mail server: \(mail.count); silent sockets opened \(sockets.opened), "
                + "closed by the server \(sockets.closedByServer); descriptors \(descriptors), connection cap "
                + "\(limits.total)"
        )
    }
}

extension Duration {
    /// The duration in milliseconds.
    var milliseconds: Double {
        Double(components.seconds) * 1000 + Double(components.attoseconds) / 1e15
    }
}
