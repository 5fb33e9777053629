import CofferCrypto
import CofferSampleMail
import CofferTesting
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// `coffer sync` beside `mbsync` (Debian's isync) in the same run: N generated messages delivered to a private
/// loopback Dovecot, then each client syncs the same account from nothing (Coffer into its sealed store, mbsync into
/// a Maildir), three times each in alternating order. Wall time, CPU time and peak RSS (wait4's rusage) of each
/// process, as ratios. The issue's aim: faster than mbsync while sealing every message, and under 100 MB resident.
enum SyncBench {
    static func run(messages: Int) async throws {
        guard
            let mbsync = (["/usr/bin/mbsync", "/usr/local/bin/mbsync"] as [String]).first(where: { path in
                access(path, X_OK) == 0
            })
        else {
            print("sync: mbsync is missing (Debian: apt-get install isync; scripts/setup.sh does it); skipped")
            return
        }
        let server = try await TestServers.PinnedDovecot.start()
        defer { server.stop() }
        let folder = TemporaryDirectory(prefix: "coffer-bench-sync")
        let deliveryStart = Timer.now()
        try deliver(messages, to: server)
        let deliverySeconds = Double(Timer.now() - deliveryStart) / 1e9

        // Three rounds, the order alternating (mbsync first in the first round), so that neither client alone
        // meets Dovecot's cold index and page caches; the medians are reported.
        let coffer = ImportMemoryBench.siblingBinary("coffer")
        var cofferRuns: [(seconds: Double, usage: ImportMemoryBench.Usage)] = []
        var mbsyncRuns: [(seconds: Double, usage: ImportMemoryBench.Usage)] = []
        for round in 0..<3 {
            let runFolder = "\(folder.path)/round-\(round)"
            try FileManager.default.createDirectory(atPath: runFolder, withIntermediateDirectories: true)
            for client in round % 2 == 0 ? ["mbsync", "coffer"] : ["coffer", "mbsync"] {
                if client == "coffer" {
                    cofferRuns.append(try syncCoffer(coffer, server: server, messages: messages, folder: runFolder))
                } else {
                    mbsyncRuns.append(try syncMbsync(mbsync, server: server, messages: messages, folder: runFolder))
                }
            }
        }
        func median(_ values: [Double]) -> Double { percentiles(values).p50 }
        let cofferSeconds = median(cofferRuns.map(\.seconds))
        let mbsyncSeconds = median(mbsyncRuns.map(\.seconds))
        let cofferCPU = median(cofferRuns.map(\.usage.cpuSeconds))
        let mbsyncCPU = median(mbsyncRuns.map(\.usage.cpuSeconds))
        let cofferRSS = cofferRuns.map(\.usage.maxRSSKiB).max() ?? 0
        let mbsyncRSS = mbsyncRuns.map(\.usage.maxRSSKiB).max() ?? 0

        var table = Table(
            "sync of \(messages) generated messages from a loopback Dovecot (stored and indexed in \(format(deliverySeconds, 1)) s;"
                + " median of 3 alternating rounds)",
            ["measure", "coffer sync", "mbsync", "coffer / mbsync", "aim"]
        )
        table.add([
            "wall time", "\(format(cofferSeconds, 2)) s", "\(format(mbsyncSeconds, 2)) s",
            format(cofferSeconds / mbsyncSeconds, 2), "< 1",
        ])
        table.add([
            "client CPU (user + system)", "\(format(cofferCPU, 2)) s", "\(format(mbsyncCPU, 2)) s",
            format(cofferCPU / max(0.001, mbsyncCPU), 2), "",
        ])
        table.add([
            "peak resident set (largest run)", "\(cofferRSS / 1024) MiB", "\(mbsyncRSS / 1024) MiB",
            format(Double(cofferRSS) / Double(max(1, mbsyncRSS)), 2), "coffer < 100 MiB",
        ])
        table.add([
            "messages per second", format(Double(messages) / cofferSeconds, 0),
            format(Double(messages) / mbsyncSeconds, 0), "", "",
        ])
        table.print()
    }

    /// One `coffer sync` from nothing: an unprotected home (no PIN's key derivation in the figure), the account
    /// pinned to the server.
    private static func syncCoffer(
        _ coffer: String,
        server: TestServers.PinnedDovecot,
        messages: Int,
        folder: String
    ) throws -> (seconds: Double, usage: ImportMemoryBench.Usage) {
        let home = "\(folder)/home"
        _ = try ImportMemoryBench.spawn([coffer, "init", "--home", home, "--account", "bench@example.com"])
        let passwordFile = "\(folder)/password"
        try Data("\(TestServers.PinnedDovecot.password)\n".utf8).write(to: URL(fileURLWithPath: passwordFile))
        _ = try ImportMemoryBench.spawn(
            [
                coffer, "account", "add", "--home", home, "--imap",
                "imaps://\(TestServers.PinnedDovecot.name):\(server.server.imapsPort)", "--user",
                TestServers.PinnedDovecot.user, "--ca-file", "\(server.certs)/ca.pem", "--connect", "127.0.0.1",
                "--pin-sha256", try server.pin("a"), "--pin-sha256", try server.pin("backup"), "--password-stdin",
            ],
            input: passwordFile
        )
        let output = "\(folder)/coffer-sync.out"
        let start = Timer.now()
        let usage = try ImportMemoryBench.spawn([coffer, "sync", "--home", home], output: output)
        let seconds = Double(Timer.now() - start) / 1e9
        let summary = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        guard summary.contains(": \(messages) new") else {
            throw CofferCryptoError.io(operation: "coffer sync (it said: \(summary))", errno: EIO)
        }
        return (seconds, usage)
    }

    /// One `mbsync` from nothing: the same account over IMAPS into a Maildir. The server's own certificate is the one
    /// it trusts (mbsync accepts a directly matched certificate whatever the host name, and it connects to 127.0.0.1).
    private static func syncMbsync(
        _ mbsync: String,
        server: TestServers.PinnedDovecot,
        messages: Int,
        folder: String
    ) throws -> (seconds: Double, usage: ImportMemoryBench.Usage) {
        let maildir = "\(folder)/maildir"
        try FileManager.default.createDirectory(atPath: maildir, withIntermediateDirectories: true)
        let config = "\(folder)/mbsyncrc"
        try Data(
            """
            IMAPAccount bench
            Host 127.0.0.1
            Port \(server.server.imapsPort)
            User \(TestServers.PinnedDovecot.user)
            Pass \(TestServers.PinnedDovecot.password)
            SSLType IMAPS
            SystemCertificates no
            CertificateFile \(server.certs)/a.pem

            IMAPStore remote
            Account bench

            MaildirStore local
            Path \(maildir)/
            Inbox \(maildir)/INBOX

            Channel bench
            Far :remote:
            Near :local:
            Patterns INBOX
            Create Near
            SyncState *

            """.utf8
        ).write(to: URL(fileURLWithPath: config))
        let start = Timer.now()
        let usage = try ImportMemoryBench.spawn([mbsync, "-q", "-c", config, "-a"])
        let seconds = Double(Timer.now() - start) / 1e9
        let fetched = ["cur", "new"].reduce(0) { count, sub in
            count + ((try? FileManager.default.contentsOfDirectory(atPath: "\(maildir)/INBOX/\(sub)").count) ?? 0)
        }
        guard fetched == messages else {
            throw CofferCryptoError.io(operation: "mbsync (it fetched \(fetched) of \(messages))", errno: EIO)
        }
        return (seconds, usage)
    }

    /// Puts `count` generated messages (one in ten with an attachment) straight into the user's Maildir INBOX on the
    /// server, as Dovecot's own delivery stores them (LF line ends, owned by the server's user), then has Dovecot
    /// index the folder once over IMAPS, so that neither client meets a folder not yet indexed. LMTP delivery of
    /// 100,000 messages took over 20 minutes here (it slows as the folder grows); this takes seconds.
    private static func deliver(_ count: Int, to server: TestServers.PinnedDovecot) throws {
        let mail = "\(server.server.dir)/mail"
        let inbox = "\(mail)/\(TestServers.PinnedDovecot.user)"
        var owner = stat()
        guard stat(mail, &owner) == 0 else {
            throw CofferCryptoError.io(operation: "reading the server's mail folder", errno: errno)
        }
        for sub in ["cur", "new", "tmp"] {
            try FileManager.default.createDirectory(atPath: "\(inbox)/\(sub)", withIntermediateDirectories: true)
        }
        for path in [inbox, "\(inbox)/cur", "\(inbox)/new", "\(inbox)/tmp"] {
            guard chown(path, owner.st_uid, owner.st_gid) == 0 else {
                throw CofferCryptoError.io(operation: "giving the Maildir to the server's user", errno: errno)
            }
        }
        let generator = SyntheticMail(seed: 2026)
        let stamp = Int(Date().timeIntervalSince1970)
        for index in 0..<count {
            var message = generator.message(index, attachment: index % 10 == 3)
            message.removeAll { $0 == UInt8(ascii: "\r") }
            // Maildir's unique name, its size (S=) and no flags (":2,"): the message is unseen, as a delivery.
            let path = "\(inbox)/cur/\(stamp).M\(index)P\(getpid()).bench,S=\(message.count):2,"
            try Data(message).write(to: URL(fileURLWithPath: path))
            guard chown(path, owner.st_uid, owner.st_gid) == 0 else {
                throw CofferCryptoError.io(operation: "giving a message to the server's user", errno: errno)
            }
        }
        let script = """
            import ssl, sys
            sys.path.insert(0, \(String(reflecting: TestServers.repoRoot.appendingPathComponent("Tests/servers").path)))
            import dovecot
            info = dovecot.load(\(String(reflecting: server.server.dir)))
            context = ssl.create_default_context(cafile=\(String(reflecting: "\(server.certs)/ca.pem")))
            with dovecot.IMAPS(info["imaps_port"], \(String(reflecting: TestServers.PinnedDovecot.name)), context) as imap:
                imap.login(\(String(reflecting: TestServers.PinnedDovecot.user)), \(String(reflecting: TestServers.PinnedDovecot.password)))
                _, data = imap.select("INBOX", readonly=True)
                imap.uid("FETCH", "1:*", "(FLAGS RFC822.SIZE)")
                imap.logout()
            print(int(data[0]))
            """
        let result = try runCommand(["/usr/bin/env", "python3", "-c", script])
        guard result.code == 0, Int(result.output.trimmingCharacters(in: .whitespacesAndNewlines)) == count else {
            throw CofferCryptoError.io(operation: "indexing the delivered Maildir (\(result.output))", errno: EIO)
        }
    }
}
