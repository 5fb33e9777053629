import CofferCrypto

#if canImport(Glibc)
import Glibc
#endif

/// `coffer-bench`: measures Coffer beside its references in the same run and prints ratio tables.
///
/// Build and run in release: `swift run -c release --static-swift-stdlib coffer-bench [section ...]`. Sections:
/// `crypto`, `stream`, `unlock`, `tpm` (a private swtpm; not in the default set), `store`, `agent`, `sanitize`, `import-rss`, `sync`,
/// `push`, `notify`, `openpgp`, `send` (not in the default set either; default: all the others; `import-rss` writes a 1 GiB
/// mbox, `COFFER_BENCH_MBOX_MB` changes that; `sync` delivers 10,000 messages to a loopback Dovecot, `--messages N`
/// changes that (`--messages 10000,100000` runs `sync`, `store` and `notmuch` at each size in turn), and needs `mbsync` from Debian's isync; `store` imports 10,000 messages, `--messages N` changes that
/// too; `push` times 200 deliveries unlocked and 200 locked, `--deliveries N` changes that; `notify` is
/// coffer-notify's pushes per second beside `openssl speed ecdhp256`, then `wrk` on its event endpoint with SQLite and
/// PostgreSQL, ``NotifyBench``; `send` is a 25 MB message and 100 small ones through a loopback Dovecot submission
/// service beside Python's smtplib, several minutes, ``SendBench``; `openpgp` reads 1,000 PGP/MIME messages beside
/// `gpg`, ``OpenPGPBench``; `notmuch` times `coffer list`, `search` and `show` through a running agent beside
/// Debian's notmuch on the same `--messages N` generated messages, as whole commands, about 30 s at 10,000,
/// ``NotmuchBench``). `--check [--baselines FILE]` is the CI
/// regression guard (``CheckBench``; `send` is not in it: it needs root for Postfix and takes minutes). Every figure
/// is a median of several runs on this machine at this moment; machines are noisy, which is why no test asserts a
/// timing.
@main
struct CofferBench {
    static func main() async throws {
        ProcessSettings.tuneAllocator()
        var arguments = Array(CommandLine.arguments.dropFirst())
        let sizes = positiveOptions("--messages", in: &arguments) ?? [10_000]
        let deliveries = positiveOptions("--deliveries", in: &arguments)?.first ?? 200
        if let flag = arguments.firstIndex(of: "--check") {
            arguments.remove(at: flag)
            var path = CheckBench.defaultPath
            if let option = arguments.firstIndex(of: "--baselines") {
                guard option + 1 < arguments.count else {
                    print("--baselines needs a file")
                    exit(2)
                }
                path = arguments[option + 1]
            }
            do {
                exit(try await CheckBench.run(baselinesPath: path) ? 0 : 1)
            } catch {
                print("coffer-bench --check: \(error)")
                exit(2)
            }
        }
        let sections =
            arguments.isEmpty
            ? [
                "crypto", "stream", "unlock", "store", "agent", "sanitize", "import-rss", "sync", "push", "notify",
                "openpgp", "notmuch",
            ]
            : arguments
        print("coffer-bench: \(nproc()) cores, sections: \(sections.joined(separator: ", "))")
        for section in sections {
            do {
                for messages in ["store", "sync", "notmuch"].contains(section) ? sizes : [sizes[0]] {
                    try await run(section, messages: messages, deliveries: deliveries)
                }
            } catch {
                // One sentence, not a trap: a section that cannot start (a binary not built, no swtpm) says why.
                print("coffer-bench \(section): \(error)")
                exit(1)
            }
        }
    }

    /// The values of `--name N[,N...]` (removed from `arguments`), nil when absent; exits with a sentence when one
    /// is not a positive number.
    private static func positiveOptions(_ name: String, in arguments: inout [String]) -> [Int]? {
        guard let flag = arguments.firstIndex(of: name) else { return nil }
        let values = flag + 1 < arguments.count ? arguments[flag + 1].split(separator: ",").map { Int($0) } : []
        guard !values.isEmpty, values.allSatisfy({ ($0 ?? 0) > 0 }) else {
            print("\(name) needs a positive number, or several separated by commas")
            exit(2)
        }
        arguments.removeSubrange(flag...(flag + 1))
        return values.compactMap { $0 }
    }

    private static func run(_ section: String, messages: Int, deliveries: Int) async throws {
        switch section {
        case "crypto": try CryptoBench.envelopes()
        case "stream": try CryptoBench.stream()
        case "unlock": try await UnlockBench.run()
        case "tpm": try await TPMUnlockBench.run()
        case "store": try await StoreBench.run(messages: messages)
        case "agent": try await AgentBench.run()
        case "sanitize": try SanitizeBench.run()
        case "import-rss":
            let megabytes = getenv("COFFER_BENCH_MBOX_MB").flatMap { Int(String(cString: $0)) } ?? 1024
            try ImportMemoryBench.run(megabytes: megabytes)
        case "sync": try await SyncBench.run(messages: messages)
        case "push": try await PushBench.run(deliveries: deliveries)
        case "notify": try await NotifyBench.run()
        case "send": try await SendBench.run()
        case "openpgp": try OpenPGPBench.run()
        case "notmuch": try await NotmuchBench.run(messages: messages)
        default:
            print(
                "unknown section \(section); known: crypto, stream, unlock, tpm, store, agent, sanitize, import-rss, "
                    + "sync, push, notify, send, openpgp, notmuch"
            )
            exit(2)
        }
    }

    private static func nproc() -> Int { sysconf(Int32(_SC_NPROCESSORS_ONLN)) }
}

/// Wall-clock measurement helpers.
enum Timer {
    /// Nanoseconds on the monotonic clock.
    static func now() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
    }

    /// Runs `body` repeatedly for about `seconds` and returns operations per second (median of three rounds).
    static func rate(seconds: Double = 0.6, _ body: () throws -> Void) rethrows -> Double {
        var rates: [Double] = []
        for _ in 0..<3 {
            let start = now()
            var operations = 0
            let budget = UInt64(seconds / 3 * 1e9)
            while now() - start < budget {
                try body()
                operations += 1
            }
            rates.append(Double(operations) / (Double(now() - start) / 1e9))
        }
        return rates.sorted()[1]
    }

    /// The median duration of `runs` calls, in seconds.
    static func median(runs: Int, _ body: () async throws -> Void) async rethrows -> Double {
        var times: [Double] = []
        for _ in 0..<runs {
            let start = now()
            try await body()
            times.append(Double(now() - start) / 1e9)
        }
        return times.sorted()[runs / 2]
    }
}

/// A Markdown table printed to standard output.
struct Table {
    let title: String
    let header: [String]
    var rows: [[String]] = []

    init(_ title: String, _ header: [String]) {
        self.title = title
        self.header = header
    }

    mutating func add(_ row: [String]) { rows.append(row) }

    func print() {
        Swift.print("\n### \(title)\n")
        Swift.print("| " + header.joined(separator: " | ") + " |")
        Swift.print("|" + header.map { _ in "---" }.joined(separator: "|") + "|")
        for row in rows { Swift.print("| " + row.joined(separator: " | ") + " |") }
    }
}

/// The 50th and 99th percentiles of `values` (nearest rank); `values` must not be empty.
func percentiles(_ values: [Double]) -> (p50: Double, p99: Double) {
    let sorted = values.sorted()
    func at(_ p: Double) -> Double {
        sorted[min(sorted.count - 1, max(0, Int((p * Double(sorted.count)).rounded(.up)) - 1))]
    }
    return (at(0.5), at(0.99))
}

/// Formats a number with `digits` decimals.
func format(_ value: Double, _ digits: Int = 1) -> String {
    guard value.isFinite else { return "n/a" }
    var scale = 1.0
    for _ in 0..<digits { scale *= 10 }
    let rounded = (value * scale).rounded() / scale
    var text = String(rounded)
    if digits == 0, text.hasSuffix(".0") { text.removeLast(2) }
    return text
}
