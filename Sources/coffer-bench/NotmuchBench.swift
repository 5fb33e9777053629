import CofferApp
import CofferCrypto
import CofferSampleMail
import CofferTesting
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// `coffer list`, `search` and `show` beside notmuch (Debian's `notmuch`), the local mail index users know, as
/// whole commands with their process start: the same N generated messages (``SyntheticMail``) written once as a
/// Maildir, imported by `coffer import` into a sealed home served by a running `coffer agent`, and indexed by
/// `notmuch new` into a plaintext Xapian database (a private config through `NOTMUCH_CONFIG`). The pairs run in
/// alternating order for several rounds; the medians are reported.
enum NotmuchBench {
    static let rounds = 21
    /// The generator's seed, which also names every message's Message-ID (`<index.seed@synthetic.example>`).
    private static let seed: UInt64 = 2026
    /// The searched word: the name of one of the generator's 60 senders (`Person 17 <person17@…>`), in about one
    /// message in 60.
    static let word = "person17"

    /// One pair's medians (ms).
    struct Pair {
        /// `list`, `search` or `show`.
        var key: String
        /// The command, as the table names it.
        var name: String
        /// The notmuch command, as the table names it.
        var reference: String
        /// Coffer's median.
        var coffer: Double
        /// notmuch's median.
        var notmuch: Double
    }

    /// What else a run found: its load, the import and index times, and the search's hits.
    struct Facts {
        var load: String
        var writeSeconds: Double
        var importSeconds: Double
        var indexSeconds: Double
        var hits: Int
    }

    /// The whole section: ``measure(messages:rounds:notmuch:)`` printed as a table.
    static func run(messages: Int) async throws {
        let sectionStart = Timer.now()
        guard let notmuch = notmuchPath() else {
            print("notmuch: notmuch is missing (Debian: apt-get install notmuch; scripts/setup.sh does it); skipped")
            return
        }
        let (pairs, facts) = try await measure(messages: messages, rounds: rounds, notmuch: notmuch)
        var table = Table(
            "coffer beside notmuch, \(messages) generated messages: whole commands with process start (ms, median of "
                + "\(rounds) alternating rounds; load \(facts.load))",
            ["command", "coffer", "notmuch", "notmuch command", "coffer / notmuch", "aim"]
        )
        for pair in pairs {
            table.add([
                pair.name, format(pair.coffer, 1), format(pair.notmuch, 1), pair.reference,
                format(pair.coffer / pair.notmuch, 2), "≤ 1.0×",
            ])
        }
        table.add([
            "import (`coffer import` of the Maildir, one-shot)", format(facts.importSeconds * 1000, 0),
            format(facts.indexSeconds * 1000, 0), "`new`", format(facts.importSeconds / facts.indexSeconds, 2), "",
        ])
        table.print()
        print(
            "\n(Maildir written in \(format(facts.writeSeconds, 1)) s; \(word): \(facts.hits) messages in both; "
                + "notmuch search lists threads, coffer messages; the section took "
                + "\(format(seconds(since: sectionStart), 0)) s)"
        )
    }

    /// notmuch's executable, or nil when it is not installed.
    static func notmuchPath() -> String? {
        (["/usr/bin/notmuch", "/usr/local/bin/notmuch"] as [String]).first { path in access(path, X_OK) == 0 }
    }

    /// Writes, imports and indexes `messages` generated messages, checks that both print the same, and times the
    /// three pairs (`list`, `search`, `show`) for `rounds` alternating rounds after two uncounted ones.
    static func measure(messages: Int, rounds: Int, notmuch: String) async throws -> ([Pair], Facts) {
        let coffer = ImportMemoryBench.siblingBinary("coffer")
        let folder = TemporaryDirectory(prefix: "coffer-bench-notmuch")
        let maildir = "\(folder.path)/mail"
        let writeStart = Timer.now()
        try writeMaildir(messages, to: maildir)
        let writeSeconds = seconds(since: writeStart)

        // The agent and every command share one environment: the agent's socket is under the home's state folder
        // (no XDG_RUNTIME_DIR), and notmuch reads only this run's config.
        let config = "\(folder.path)/notmuch-config"
        try Data(
            """
            [database]
            path=\(maildir)
            [user]
            name=Me
            primary_email=me0@coffer.example
            other_email=me1@coffer.example;me2@coffer.example
            [new]
            tags=unread;inbox;
            [search]
            exclude_tags=
            [maildir]
            synchronize_flags=false

            """.utf8
        ).write(to: URL(fileURLWithPath: config))
        var variables = ProcessInfo.processInfo.environment
        variables["XDG_RUNTIME_DIR"] = nil
        variables["COFFER_HOME"] = nil
        variables["NOTMUCH_CONFIG"] = config
        variables["NOTMUCH_PROFILE"] = nil
        let environment = variables.map { "\($0.key)=\($0.value)" }
        let run = Runner(environment: environment, folder: folder.path)

        let home = "\(folder.path)/home"
        try run.checked([coffer, "init", "--home", home, "--account", "bench@example.com"])
        let importStart = Timer.now()
        try run.checked([coffer, "import", maildir, "--home", home])
        let importSeconds = seconds(since: importStart)
        let indexStart = Timer.now()
        try run.checked([notmuch, "new", "--quiet"])
        let indexSeconds = seconds(since: indexStart)
        print(
            "notmuch: \(messages) messages written as a Maildir in \(format(writeSeconds, 1)) s, coffer import "
                + "\(format(importSeconds, 1)) s, notmuch new \(format(indexSeconds, 1)) s (load \(loadAverage()))"
        )

        let agent = try Background([coffer, "agent", "--home", home], environment: variables, watch: .standardError)
        defer { agent.stop() }
        let socket = "\(home)/state/agent/\(AppPaths(data: "\(home)/data", keychain: "", state: "").agentSocketName)"
        for _ in 0..<300 where access(socket, F_OK) != 0 { try await Task.sleep(for: .milliseconds(50)) }
        guard access(socket, F_OK) == 0 else { throw BenchError("coffer agent did not start: \(agent.log.text)") }
        try run.checked([coffer, "unlock", "--home", home])

        // What each command prints is checked once before the rounds: the same page, hits and message.
        let list = [coffer, "list", "--home", home, "--limit", "50"]
        let listLines = try run.output(list).split(separator: "\n")
        let threads = try run.output([notmuch, "search", "--limit=50", "*"]).split(separator: "\n")
        guard listLines.count == min(50, messages), threads.count == min(50, messages) else {
            throw BenchError("list printed \(listLines.count) lines and notmuch search \(threads.count)")
        }
        // The search's page is at most 1,000 messages: all hits are counted page by page.
        var cofferHits = 0
        while true {
            let page = try run.output([
                coffer, "search", "--home", home, "--limit", "1000", "--offset", "\(cofferHits)", word,
            ])
            let found = page.hasPrefix("No messages match.") ? 0 : page.split(separator: "\n").count
            cofferHits += found
            if found < 1000 { break }
        }
        let notmuchHits = Int(
            try run.output([notmuch, "count", "--output=messages", word]).trimmingCharacters(
                in: .whitespacesAndNewlines
            )
        )
        guard cofferHits == notmuchHits, cofferHits > 0 else {
            throw BenchError("\(word): coffer search found \(cofferHits), notmuch \(notmuchHits ?? -1)")
        }
        // The newest message: the first of Coffer's list, message messages - 1 of the generator.
        guard let id = listLines.first?.split(separator: "\t").first.map(String.init) else {
            throw BenchError("list printed no id")
        }
        let show = [coffer, "show", "--home", home, id]
        let notmuchShow = [notmuch, "show", "id:\(messages - 1).\(seed)@synthetic.example"]
        let shown = try run.output(show)
        guard
            let subject = shown.split(separator: "\n").first(where: { $0.hasPrefix("Subject: ") }),
            try run.output(notmuchShow).contains(subject)
        else { throw BenchError("coffer show \(id) and notmuch show are not the same message") }

        let load = loadAverage()
        let pairs: [(key: String, name: String, coffer: [String], notmuch: [String], reference: String)] = [
            (
                "list", "`coffer list --limit 50` (agent)", list, [notmuch, "search", "--limit=50", "*"],
                "`search --limit=50 '*'`"
            ),
            (
                "search", "`coffer search \(word)` (\(cofferHits) hits, page of 50)",
                [coffer, "search", "--home", home, word], [notmuch, "search", "--limit=50", word],
                "`search --limit=50 \(word)`"
            ),
            ("show", "`coffer show ID` (agent)", show, notmuchShow, "`show id:…`"),
        ]
        var measured: [Pair] = []
        for pair in pairs {
            var cofferTimes: [Double] = []
            var notmuchTimes: [Double] = []
            for round in 0..<(rounds + 2) {
                let cofferFirst = round % 2 == 1
                let first = try run.timed(cofferFirst ? pair.coffer : pair.notmuch)
                let second = try run.timed(cofferFirst ? pair.notmuch : pair.coffer)
                // The first two rounds warm the page cache and the agent's statements; they are not counted.
                guard round >= 2 else { continue }
                cofferTimes.append(cofferFirst ? first : second)
                notmuchTimes.append(cofferFirst ? second : first)
            }
            measured.append(
                Pair(
                    key: pair.key,
                    name: pair.name,
                    reference: pair.reference,
                    coffer: percentiles(cofferTimes).p50,
                    notmuch: percentiles(notmuchTimes).p50
                )
            )
        }
        let facts = Facts(
            load: load,
            writeSeconds: writeSeconds,
            importSeconds: importSeconds,
            indexSeconds: indexSeconds,
            hits: cofferHits
        )
        return (measured, facts)
    }

    /// Writes messages 0..<count of the generator into a new Maildir at `path` (its `cur` folder, seen).
    private static func writeMaildir(_ count: Int, to path: String) throws {
        for sub in ["cur", "new", "tmp"] {
            try FileManager.default.createDirectory(atPath: "\(path)/\(sub)", withIntermediateDirectories: true)
        }
        let generator = SyntheticMail(seed: seed)
        for index in 0..<count {
            let bytes = generator.message(index)
            let file = "\(path)/cur/\(index).bench:2,S"
            let fd = open(file, O_WRONLY | O_CREAT | O_EXCL, 0o600)
            guard fd >= 0 else { throw BenchError("could not create \(file): errno \(errno)") }
            defer { close(fd) }
            var sink = FileDescriptorSink(fd: fd)
            try sink.write(bytes)
        }
    }

    private static func seconds(since start: UInt64) -> Double { Double(Timer.now() - start) / 1e9 }

    /// The one-minute load average, as `uptime` prints it.
    static func loadAverage() -> String {
        var loads = [Double](repeating: 0, count: 3)
        guard getloadavg(&loads, 3) == 3 else { return "unknown" }
        return format(loads[0], 2)
    }

    /// Runs commands with one environment, their standard output into a file of `folder`.
    private struct Runner {
        let environment: [String]
        let folder: String

        /// The command's wall time in milliseconds, from spawn to exit; it must succeed.
        func timed(_ arguments: [String]) throws -> Double {
            let start = Timer.now()
            try checked(arguments)
            return Double(Timer.now() - start) / 1e6
        }

        /// What the command printed on standard output; it must succeed.
        func output(_ arguments: [String]) throws -> String {
            try checked(arguments)
            return try String(contentsOfFile: "\(folder)/stdout", encoding: .utf8)
        }

        /// Runs the command to its end and throws, with its standard error, unless it exits with 0.
        func checked(_ arguments: [String]) throws {
            var pid: pid_t = 0
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 1, "\(folder)/stdout", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            posix_spawn_file_actions_addopen(&actions, 2, "\(folder)/stderr", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
            var envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup($0) } + [nil]
            defer { for pointer in argv + envp { free(pointer) } }
            let status = posix_spawn(&pid, arguments[0], &actions, nil, &argv, &envp)
            guard status == 0 else { throw BenchError("could not start \(arguments[0]): errno \(status)") }
            var waitStatus: Int32 = 0
            guard waitpid(pid, &waitStatus, 0) == pid else { throw BenchError("wait for \(arguments[0]) failed") }
            guard waitStatus == 0 else {
                let stderr = (try? String(contentsOfFile: "\(folder)/stderr", encoding: .utf8)) ?? ""
                throw BenchError("\(arguments.joined(separator: " ")) failed: \(stderr)")
            }
        }
    }
}
