import CofferCrypto
import CofferSampleMail
import CofferTesting
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// `coffer-bench send`: sending through a private loopback Dovecot submission service (relaying through Postfix into
/// bob's mailbox, ``TestServers/SubmissionDovecot``) beside Python's `smtplib` sending the same bytes to the same
/// server in the same run. Not in the default sections: it takes a few minutes (100 `coffer compose` processes per
/// round to fill the outbox, and three 25 MB sends each side).
///
/// 1. A message with a 25 MB attachment (random bytes, fixed seed): one `coffer compose … --attach FILE --send`
///    process per round, from a fresh unprotected home set up before the clock starts (no key derivation in the
///    figure). Its wall time includes sealing the draft and its attachment, writing the sealed outbox file, the SMTP
///    transaction and the Sent copy (IMAP `APPEND`, then the import into the store). While it runs, this process
///    samples the kernel's TCP table and the child's `VmHWM` every 2 ms, so the same run also gives how long the SMTP
///    connection was open and how long the IMAP one was, and the peak resident set reached by the end of each.
///    The reference reads the bytes Coffer sent (fetched back from alice's Sent folder: Coffer appends exactly the
///    bytes it sent) and times `SMTP_SSL` connect, login, `sendmail` and quit inside the script; a second figure
///    adds the same script's `imaplib` APPEND of those bytes (`\Seen`) to a folder of its own, the Sent copy's
///    network part without a store.
/// 2. 100 small messages through the outbox: `coffer compose … --send --delay 3s` each (stopped with SIGINT once it
///    says it is queued, so it stays queued), then one timed `coffer outbox --flush` sends the 100 over one SMTP
///    connection and stores their Sent copies over one IMAP connection. The reference sends the same 100 messages
///    over one `smtplib` connection.
///
/// Three rounds each, the order alternating; medians; peak resident set from `wait4`. Needs Dovecot and Postfix
/// (scripts/setup.sh) and Postfix's master starts as root.
enum SendBench {
    typealias Server = TestServers.SubmissionDovecot

    static func run(attachmentBytes: Int = 25_000_000, smallMessages: Int = 100, rounds: Int = 3) async throws {
        let server = try await Server.start()
        defer { server.stop() }
        let folder = TemporaryDirectory(prefix: "coffer-bench-send")
        // A private runtime folder: no agent of this machine answers for these homes.
        let runtime = "\(folder.path)/runtime"
        guard mkdir(runtime, 0o700) == 0 else { throw CofferCryptoError.io(operation: "mkdir", errno: errno) }
        setenv("XDG_RUNTIME_DIR", runtime, 1)
        // The queued messages are stopped with SIGINT; a shell that started this in the background ignores SIGINT,
        // and its children would inherit that and send what they queued.
        signal(SIGINT, SIG_DFL)
        let bench = try Bench(server: server, folder: folder.path)
        try bench.large(attachmentBytes: attachmentBytes, rounds: rounds)
        try bench.small(count: smallMessages, rounds: rounds)
    }

    /// What one run of the reference showed: the seconds from SMTP connect to quit, then from IMAP connect to
    /// logout around the APPEND of the same messages (with `\Seen`) to a folder of their own, and its usage.
    typealias Reference = (inScript: Double, append: Double, usage: ImportMemoryBench.Usage)

    /// What one run of a child process showed.
    struct Sampled {
        /// Wall time from spawn to exit.
        var seconds: Double
        /// wait4's peak resident set and CPU time.
        var usage: ImportMemoryBench.Usage
        /// The first connection to the submission port, and the first to the IMAPS port.
        var smtp: Window?
        var imap: Window?
    }

    /// When a client connection was first seen established and first seen gone, in seconds from the spawn, with the
    /// child's `VmHWM` (KiB) at both moments.
    struct Window {
        var opened: Double
        var closed: Double
        var highWaterAtOpen: Int
        var highWaterAtClose: Int
        var seconds: Double { closed - opened }
    }

    /// The servers, the binaries and the files every run shares.
    struct Bench {
        let server: Server
        let folder: String
        let coffer = ImportMemoryBench.siblingBinary("coffer")
        let python: String
        let script: String
        let lmtpPort: Int
        let relayPort: Int
        /// `COFFER_BENCH_SEND_WRAP`: words put before each timed `coffer` command, for a profiling run (`strace -f -c
        /// -o FILE`, `perf record -g -o FILE`); its figures are then the wrapper's, not Coffer's.
        let wrap =
            getenv("COFFER_BENCH_SEND_WRAP").map { String(cString: $0).split(separator: " ").map(String.init) }
            ?? []

        init(server: Server, folder: String) throws {
            self.server = server
            self.folder = folder
            let found = try runCommand(["/usr/bin/env", "python3", "-c", "import sys; print(sys.executable)"])
            guard found.code == 0, let line = found.output.split(separator: "\n").last else {
                throw CofferCryptoError.io(operation: "find python3 (\(found.output))", errno: ENOENT)
            }
            python = String(line)
            script = "\(folder)/reference.py"
            try Data(SendBench.referenceScript.utf8).write(to: URL(fileURLWithPath: script))
            let info = try JSONSerialization.jsonObject(
                with: Data(contentsOf: URL(fileURLWithPath: "\(server.dir)/server.json"))
            )
            guard let info = info as? [String: Any], let lmtp = info["lmtp_port"] as? Int,
                let relay = info["relay_port"] as? Int
            else { throw CofferCryptoError.io(operation: "read server.json", errno: EINVAL) }
            lmtpPort = lmtp
            relayPort = relay
        }

        // MARK: The 25 MB message

        func large(attachmentBytes: Int, rounds: Int) throws {
            let attachment = "\(folder)/attachment.bin"
            try writeRandom(attachmentBytes, to: attachment)
            let body = "\(folder)/body.txt"
            try Data("Dear Bob,\n\nthe archive is attached.\n\nAlice\n".utf8).write(to: URL(fileURLWithPath: body))
            let eml = "\(folder)/large"
            var cofferRuns: [Sampled] = []
            var referenceRuns: [Reference] = []
            var wireBytes = 0
            for round in 0..<rounds {
                for client in round % 2 == 0 ? ["coffer", "smtplib"] : ["smtplib", "coffer"] {
                    settle()
                    if client == "coffer" {
                        let home = try setUpHome("large-\(round)")
                        let output = "\(folder)/large-\(round).out"
                        let run = try sampled(
                            wrap + [
                                coffer, "compose", "--home", home, "--to", Server.recipient.address, "--subject",
                                "coffer-bench 25 MB r\(round)", "--attach", attachment, "--body-file", body, "--send",
                            ],
                            output: output
                        )
                        let said = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
                        guard said.contains("Sent (message") else {
                            throw CofferCryptoError.io(
                                operation: "coffer compose --send (it said: \(said))",
                                errno: EIO
                            )
                        }
                        cofferRuns.append(run)
                        if round == 0 {
                            try fetchSent(subject: "coffer-bench 25 MB r0", expect: 1, into: eml)
                            wireBytes = try fileSize("\(eml)/0.eml")
                        }
                    } else {
                        referenceRuns.append(try sendReference(files: ["\(eml)/0.eml"]))
                    }
                }
            }
            report(
                title: "send of one message with a \(attachmentBytes / 1_000_000) MB attachment "
                    + "(\(format(Double(wireBytes) / 1e6, 1)) MB on the wire) through Dovecot submission → Postfix →"
                    + " LMTP; median of \(rounds) alternating rounds",
                command: "`coffer compose --attach --send`",
                coffer: cofferRuns,
                reference: referenceRuns,
                messages: 1,
                rssAim: "coffer < 64 MiB",
                timeAim: "≤ 1.2"
            )
        }

        // MARK: 100 small messages

        func small(count: Int, rounds: Int) throws {
            let body = "\(folder)/small-body.txt"
            try Data(
                String(repeating: "A short note about the plans for the week, nothing attached.\n", count: 6).utf8
            ).write(to: URL(fileURLWithPath: body))
            let eml = "\(folder)/small"
            var cofferRuns: [Sampled] = []
            var referenceRuns: [Reference] = []
            var queueSeconds: [Double] = []
            for round in 0..<rounds {
                for client in round % 2 == 0 ? ["coffer", "smtplib"] : ["smtplib", "coffer"] {
                    if client == "coffer" {
                        let home = try setUpHome("small-\(round)")
                        let queueStart = Timer.now()
                        for index in 0..<count {
                            try queue(home: home, subject: "coffer-bench small r\(round) #\(index)", body: body)
                        }
                        queueSeconds.append(Double(Timer.now() - queueStart) / 1e9)
                        // Every message is due 3 s after it was queued.
                        usleep(3_200_000)
                        settle()
                        let output = "\(folder)/small-\(round).out"
                        let run = try sampled(wrap + [coffer, "outbox", "--home", home, "--flush"], output: output)
                        let said = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
                        guard said.hasPrefix("\(count) sent."), !said.contains("not stored") else {
                            throw CofferCryptoError.io(
                                operation: "coffer outbox --flush (it said: \(said))",
                                errno: EIO
                            )
                        }
                        cofferRuns.append(run)
                        if round == 0 {
                            try fetchSent(subject: "coffer-bench small r0 #", expect: count, into: eml)
                        }
                    } else {
                        settle()
                        referenceRuns.append(try sendReference(files: (0..<count).map { "\(eml)/\($0).eml" }))
                    }
                }
            }
            report(
                title: "\(count) small messages through the outbox: one `coffer outbox --flush` (queued beforehand by"
                    + " \(count) `coffer compose --send --delay 3s`, median \(format(percentiles(queueSeconds).p50, 1))"
                    + " s) beside smtplib sending the same \(count) messages over one connection; median of \(rounds)"
                    + " alternating rounds",
                command: "`coffer outbox --flush`",
                coffer: cofferRuns,
                reference: referenceRuns,
                messages: count,
                rssAim: "",
                timeAim: ""
            )
        }

        /// Queues one message in `home` without sending it: `--send --delay 3s`, stopped with SIGINT (as Ctrl-C,
        /// which keeps it in the outbox) once it says it is queued. `stdbuf -oL` makes its output reach the file
        /// line by line.
        private func queue(home: String, subject: String, body: String) throws {
            let output = "\(folder)/queue.out"
            let pid = try ImportMemoryBench.start(
                [
                    "/usr/bin/stdbuf", "-oL", coffer, "compose", "--home", home, "--to", Server.recipient.address,
                    "--subject", subject, "--body-file", body, "--send", "--delay", "3s",
                ],
                output: output
            )
            var said = ""
            var status: Int32 = 0
            let deadline = Timer.now() + 30_000_000_000
            while !said.contains("Sending in"), Timer.now() < deadline {
                if waitpid(pid, &status, WNOHANG) == pid {
                    throw CofferCryptoError.io(operation: "coffer compose --delay (it said: \(said))", errno: EIO)
                }
                usleep(2000)
                said = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
            }
            kill(pid, SIGINT)
            _ = waitpid(pid, &status, 0)
            guard said.contains("is queued") else {
                throw CofferCryptoError.io(operation: "coffer compose --delay (it said: \(said))", errno: EIO)
            }
        }

        // MARK: Pieces

        /// A fresh unprotected home with alice's account: IMAP and submission, both pinned.
        private func setUpHome(_ name: String) throws -> String {
            let home = "\(folder)/home-\(name)"
            _ = try ImportMemoryBench.spawn([coffer, "init", "--home", home, "--account", "alice"])
            let password = "\(folder)/password"
            try Data("\(Server.sender.password)\n".utf8).write(to: URL(fileURLWithPath: password))
            let pins = [try server.pin("a"), try server.pin("backup")]
            _ = try ImportMemoryBench.spawn(
                [
                    coffer, "account", "add", "--home", home, "--imap", "imaps://\(Server.name):\(server.imapsPort)",
                    "--user", Server.sender.user, "--ca-file", "\(server.certs)/ca.pem", "--connect", "127.0.0.1",
                    "--smtp", "submissions://\(Server.name):\(server.submissionsPort)", "--from",
                    "Alice <\(Server.sender.address)>", "--password-stdin",
                ] + pins.flatMap { ["--pin-sha256", $0, "--smtp-pin-sha256", $0] },
                input: password
            )
            return home
        }

        /// Runs `arguments`, sampling every 2 ms the TCP table (its connections to the submission and IMAPS ports)
        /// and its `VmHWM`, until it exits.
        ///
        /// The peak resident set: posix_spawn's child shares this process's memory until it execs, and the kernel
        /// carries that image's high-water mark into the child's `ru_maxrss`, so `ru_maxrss` is never below this
        /// process's own peak. When it is not above it, the child's own `VmHWM`, last sampled, is the figure.
        private func sampled(_ arguments: [String], output: String) throws -> Sampled {
            let ownPeak = Self.highWater(getpid())
            let start = Timer.now()
            let pid = try ImportMemoryBench.start(arguments, output: output)
            var usage = rusage()
            var status: Int32 = 0
            var highWater = 0
            var smtp: (opened: Double, hwm: Int)?
            var imap: (opened: Double, hwm: Int)?
            var smtpWindow: Window?
            var imapWindow: Window?
            func observe(
                _ open: Bool,
                _ at: Double,
                _ pending: inout (opened: Double, hwm: Int)?,
                _ window: inout Window?
            ) {
                guard window == nil else { return }
                if open, pending == nil { pending = (at, highWater) }
                if !open, let started = pending {
                    window = Window(
                        opened: started.opened,
                        closed: at,
                        highWaterAtOpen: started.hwm,
                        highWaterAtClose: highWater
                    )
                }
            }
            while true {
                let waited = wait4(pid, &status, WNOHANG, &usage)
                let now = Double(Timer.now() - start) / 1e9
                if waited == pid {
                    observe(false, now, &smtp, &smtpWindow)
                    observe(false, now, &imap, &imapWindow)
                    break
                }
                guard waited == 0 || errno == EINTR else {
                    throw CofferCryptoError.io(operation: "wait for \(arguments[0])", errno: errno)
                }
                highWater = max(highWater, Self.highWater(pid))
                let open = Self.openClientPorts()
                observe(open.contains(server.submissionsPort), now, &smtp, &smtpWindow)
                observe(open.contains(server.imapsPort), now, &imap, &imapWindow)
                usleep(2000)
            }
            guard status == 0 else {
                throw CofferCryptoError.io(operation: "run \(arguments.joined(separator: " "))", errno: EIO)
            }
            var measured = usage.measured
            if measured.maxRSSKiB <= ownPeak { measured.maxRSSKiB = highWater }
            return Sampled(
                seconds: Double(Timer.now() - start) / 1e9,
                usage: measured,
                smtp: smtpWindow,
                imap: imapWindow
            )
        }

        /// Runs the smtplib reference on `files` (each one message, sent over one connection): the time it measured
        /// around connect, login, every sendmail and quit, and its process's usage.
        private func sendReference(files: [String]) throws -> Reference {
            let arguments = [
                "\(server.submissionsPort)", "\(server.certs)/ca.pem", Server.sender.user, Server.sender.password,
                Server.sender.address, Server.recipient.address, "\(server.imapsPort)",
            ]
            let list = "\(folder)/reference-files.txt"
            try Data(files.joined(separator: "\n").utf8).write(to: URL(fileURLWithPath: list))
            let output = "\(folder)/reference.out"
            let usage = try sampled([python, script, "send", list] + arguments, output: output).usage
            let said = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
            let figures = said.split(whereSeparator: \.isWhitespace).compactMap { Double($0) }
            guard figures.count == 2 else {
                throw CofferCryptoError.io(operation: "the smtplib reference (it said: \(said))", errno: EIO)
            }
            return (figures[0], figures[1], usage)
        }

        /// Fetches the messages of alice's Sent folder whose subject holds `subject` into `folder/N.eml` (in UID
        /// order): the bytes Coffer sent, as it appended them.
        private func fetchSent(subject: String, expect: Int, into target: String) throws {
            try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true)
            let result = try runCommand([
                python, script, "fetch", target, "\(server.imapsPort)", "\(server.certs)/ca.pem", Server.sender.user,
                Server.sender.password, subject,
            ])
            guard result.code == 0, result.output.contains("fetched \(expect)") else {
                throw CofferCryptoError.io(operation: "fetch the Sent copies (\(result.output))", errno: EIO)
            }
        }

        /// Waits (up to 60 s) until Postfix has no connection open to Dovecot's LMTP and Dovecot none to Postfix, so
        /// that the previous run's delivery does not compete with the next run.
        private func settle() {
            let deadline = Timer.now() + 60_000_000_000
            var quiet = 0
            while quiet < 50, Timer.now() < deadline {
                let open = Self.openClientPorts()
                quiet = open.contains(lmtpPort) || open.contains(relayPort) ? 0 : quiet + 1
                usleep(2000)
            }
        }

        /// Prints the table of one part.
        private func report(
            title: String,
            command: String,
            coffer: [Sampled],
            reference: [Reference],
            messages: Int,
            rssAim: String,
            timeAim: String
        ) {
            func median(_ values: [Double]) -> Double { values.isEmpty ? .nan : percentiles(values).p50 }
            let whole = median(coffer.map(\.seconds))
            let smtp = median(coffer.compactMap(\.smtp?.seconds))
            let before = median(coffer.compactMap(\.smtp?.opened))
            let imap = median(coffer.compactMap(\.imap?.seconds))
            let afterSMTP = median(coffer.compactMap { run in run.smtp.map { run.seconds - $0.closed } })
            let referenceSeconds = median(reference.map(\.inScript))
            let referenceAppend = median(reference.map { $0.inScript + $0.append })
            let cofferCPU = median(coffer.map(\.usage.cpuSeconds))
            let referenceCPU = median(reference.map(\.usage.cpuSeconds))
            let cofferRSS = coffer.map(\.usage.maxRSSKiB).max() ?? 0
            let referenceRSS = reference.map(\.usage.maxRSSKiB).max() ?? 0
            let smtpRSS = coffer.compactMap(\.smtp?.highWaterAtClose).max() ?? 0
            let imapRSS = coffer.compactMap(\.imap?.highWaterAtClose).max() ?? 0
            func seconds(_ value: Double) -> String { "\(format(value, 2)) s" }
            func rate(_ value: Double) -> String { "\(format(Double(messages) / value, 1)) msg/s" }
            let show = messages > 1 ? rate : seconds
            var table = Table(title, ["measure", "coffer", "smtplib", "coffer / smtplib", "aim"])
            table.add([
                "\(command), whole process (start, store, send, Sent copy) vs smtplib connect → quit",
                show(whole), show(referenceSeconds), format(whole / referenceSeconds, 2) + "× the time",
                timeAim,
            ])
            table.add([
                "\(command), whole process vs smtplib connect → quit, then imaplib APPEND of the same bytes to a folder",
                show(whole), show(referenceAppend), format(whole / referenceAppend, 2) + "× the time", "",
            ])
            table.add([
                "SMTP connection only (open → closed: TLS, AUTH, DATA, QUIT) vs smtplib connect → quit",
                show(smtp), show(referenceSeconds), format(smtp / referenceSeconds, 2) + "× the time", timeAim,
            ])
            table.add([
                "coffer: start → SMTP connect (open the store\(messages == 1 ? ", seal draft and outbox file" : ""))",
                seconds(before), "", "", "",
            ])
            table.add([
                "coffer: SMTP closed → exit (the Sent copy: IMAP login, LIST, APPEND, import into the store)",
                seconds(afterSMTP), "", "", "",
            ])
            table.add(["coffer: … of which the IMAP connection was open", seconds(imap), "", "", ""])
            table.add([
                "CPU time of the process (user + system)", seconds(cofferCPU), seconds(referenceCPU),
                format(cofferCPU / max(0.001, referenceCPU), 2), "",
            ])
            table.add([
                "peak resident set (wait4, largest run)", "\(cofferRSS / 1024) MiB", "\(referenceRSS / 1024) MiB",
                format(Double(cofferRSS) / Double(max(1, referenceRSS)), 2), rssAim,
            ])
            table.add([
                "coffer: peak resident set (VmHWM) by the end of the SMTP connection / of the IMAP one (largest run)",
                "\(smtpRSS / 1024) / \(imapRSS / 1024) MiB", "", "", rssAim,
            ])
            table.add([
                "each run (coffer: whole process; smtplib: connect → quit)",
                coffer.map { seconds($0.seconds) }.joined(separator: ", "),
                reference.map { seconds($0.inScript) }.joined(separator: ", "), "", "",
            ])
            table.print()
            fflush(nil)
        }

        /// `count` bytes from SplitMix (seed 25) into `path`, a MiB at a time (this process's own peak resident set
        /// stays small: see ``sampled(_:output:)``).
        private func writeRandom(_ count: Int, to path: String) throws {
            let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            guard fd >= 0 else { throw CofferCryptoError.io(operation: "create \(path)", errno: errno) }
            defer { close(fd) }
            var sink = FileDescriptorSink(fd: fd)
            var random = SplitMix(seed: 25)
            var written = 0
            var chunk: [UInt8] = []
            while written < count {
                chunk.removeAll(keepingCapacity: true)
                while chunk.count < min(1 << 20, count - written) {
                    var word = random.next()
                    for _ in 0..<8 where chunk.count < min(1 << 20, count - written) {
                        chunk.append(UInt8(truncatingIfNeeded: word))
                        word >>= 8
                    }
                }
                try sink.write(chunk)
                written += chunk.count
            }
        }

        private func fileSize(_ path: String) throws -> Int {
            (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
        }

        /// The child's peak resident set so far (`VmHWM`, KiB), 0 once it has exited.
        static func highWater(_ pid: pid_t) -> Int {
            for line in readProcFile("/proc/\(pid)/status").split(separator: "\n") where line.hasPrefix("VmHWM:") {
                return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
            }
            return 0
        }

        /// A file of /proc read to its end (its size is 0 to `stat`, and the TCP table spans many pages), "" when it
        /// cannot be opened (the process has gone).
        static func readProcFile(_ path: String) -> String {
            let fd = open(path, O_RDONLY)
            guard fd >= 0 else { return "" }
            defer { close(fd) }
            var bytes: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { break }
                bytes += buffer[0..<count]
            }
            return String(decoding: bytes, as: UTF8.self)
        }

        /// The remote ports of IPv4 TCP connections that are established or closing on the peer's side
        /// (`/proc/net/tcp` states 01 and 08).
        static func openClientPorts() -> Set<Int> {
            let table = readProcFile("/proc/net/tcp")
            var ports: Set<Int> = []
            for line in table.split(separator: "\n").dropFirst() {
                let fields = line.split(separator: " ", omittingEmptySubsequences: true)
                guard fields.count > 3, fields[3] == "01" || fields[3] == "08",
                    let colon = fields[2].lastIndex(of: ":"),
                    let port = Int(fields[2][fields[2].index(after: colon)...], radix: 16)
                else { continue }
                ports.insert(port)
            }
            return ports
        }
    }

    /// The reference: `send LIST PORT CA USER PASSWORD FROM TO` sends each file named in LIST over one SMTP_SSL
    /// connection and prints the seconds from connect to quit; `fetch DIR PORT CA USER PASSWORD SUBJECT` saves the
    /// Sent folder's messages whose subject holds SUBJECT as DIR/N.eml. Both connect to 127.0.0.1 and check the
    /// server's certificate against the test CA under its name.
    static let referenceScript = """
        import imaplib, smtplib, socket, ssl, sys, time

        NAME = \(String(reflecting: Server.name))

        class SMTP(smtplib.SMTP_SSL):
            def _get_socket(self, host, port, timeout):
                raw = socket.create_connection(("127.0.0.1", port), timeout)
                return self.context.wrap_socket(raw, server_hostname=host)

        class IMAP(imaplib.IMAP4_SSL):
            def _create_socket(self, timeout):
                raw = socket.create_connection(("127.0.0.1", self.port), timeout)
                return self.ssl_context.wrap_socket(raw, server_hostname=self.host)

        def send(listing, port, ca, user, password, sender, recipient, imaps):
            with open(listing) as f:
                names = [line for line in f.read().split("\\n") if line]
            messages = []
            for name in names:
                with open(name, "rb") as f:
                    messages.append(f.read())
            context = ssl.create_default_context(cafile=ca)
            start = time.monotonic()
            client = SMTP(NAME, int(port), local_hostname="bench.coffer.test", context=context, timeout=300)
            client.login(user, password)
            for message in messages:
                client.sendmail(sender, [recipient], message)
            client.quit()
            sent = time.monotonic()
            imap = IMAP(NAME, int(imaps), ssl_context=context)
            imap.login(user, password)
            imap.create("BenchSent")
            for message in messages:
                status, reply = imap.append("BenchSent", "(\\Seen)", None, message)
                if status != "OK":
                    raise SystemExit("APPEND: %r" % reply)
            imap.logout()
            print(sent - start, time.monotonic() - sent)

        def fetch(target, port, ca, user, password, subject):
            context = ssl.create_default_context(cafile=ca)
            client = IMAP(NAME, int(port), ssl_context=context)
            client.login(user, password)
            status, listing = client.list()
            sent = "Sent"
            for line in listing:
                text = line.decode()
                if "\\\\Sent" in text:
                    sent = text.rsplit(" ", 1)[-1].strip('"')
            client.select('"%s"' % sent, readonly=True)
            status, found = client.uid("SEARCH", "SUBJECT", '"%s"' % subject)
            uids = sorted(int(uid) for uid in found[0].split())
            for index, uid in enumerate(uids):
                status, data = client.uid("FETCH", str(uid), "(BODY.PEEK[])")
                with open("%s/%d.eml" % (target, index), "wb") as f:
                    f.write(data[0][1])
            client.logout()
            print("fetched %d" % len(uids))

        if sys.argv[1] == "send":
            send(*sys.argv[2:])
        else:
            fetch(*sys.argv[2:])

        """
}
