import CofferCrypto

#if canImport(Glibc)
import Glibc
#endif

/// `coffer-bench --check [--baselines FILE]`: a regression guard for CI. Runs a small corpus of each measure and
/// fails when a ratio falls below half its recorded baseline in two runs, so a 2× regression cannot land silently.
///
/// Every measure is a ratio "Coffer speed / reference speed in the same run" (higher is better), never an absolute
/// time: the store against itself with identity cells, envelopes against `openssl speed`, the sanitizer and `coffer
/// render` against nh3, `coffer list`, `search` and `show` against notmuch's, the agent's `list` against the same
/// request in process, coffer-notify's pushes against `openssl speed ecdhp256`. The baselines file has one line per
/// measure, `name debug release`, the ratio recorded for a debug and a release build; `#` starts a comment. A measure
/// whose reference is missing (no `openssl`, no `.venv` with nh3, no notmuch) is reported as skipped.
enum CheckBench {
    /// The committed baselines, relative to the package root.
    static let defaultPath = "Benchmarks/check-baselines.txt"
    /// Messages in the small store corpus.
    static let messages = 1000

    /// One measured ratio.
    struct Measure {
        var name: String
        var ratio: Double?
    }

    /// Runs the measures and compares them; returns whether every ratio held.
    ///
    /// A group of measures with a row below its floor is measured once more, and the row fails only if the second
    /// run is below the floor too: a real 2× regression fails both runs, while a one-off dip of a shared machine (an
    /// envelope row once measured 0.433 against a floor of 0.435, and 0.92 when run again at once) does not fail CI.
    static func run(baselinesPath: String) async throws -> Bool {
        let baselines = try readBaselines(baselinesPath)
        let groups: [() async throws -> [Measure]] = [
            {
                let store = try await StoreBench.measure(messages: messages, iterations: 50)
                return [
                    Measure(name: "store.import", ratio: store.importPlain / store.importSealed),
                    Measure(name: "store.list", ratio: store.listPlain / store.listSealed),
                    Measure(name: "store.show", ratio: store.showPlain / store.showSealed),
                    Measure(name: "store.search", ratio: store.searchPlain / store.searchSealed),
                ]
            },
            { try envelopes() },
            { [Measure(name: "sanitize.newsletters", ratio: try SanitizeBench.ratioToNH3(count: 8))] },
            {
                let flood = try SanitizeBench.floodRates(count: 5_000, rounds: 3)
                return [Measure(name: "sanitize.attributes", ratio: flood.nh3.map { flood.coffer / $0 })]
            },
            { try await wholeCommands() },
            { [Measure(name: "agent.list.p99", ratio: try await AgentBench.listRatio(requests: 300))] },
            {
                let render = try SanitizeBench.renderRates(bytes: 2_000_000, rounds: 2)
                return [Measure(name: "render.page", ratio: render.nh3.map { render.coffer / $0 })]
            },
            {
                let notify = try await NotifyBench.measureThroughput(events: 100, rounds: 3)
                return [
                    Measure(name: "notify.handle", ratio: notify.openssl.map { notify.handleRate / $0 }),
                    Measure(name: "notify.inflight", ratio: notify.openssl.map { notify.groupRate / $0 }),
                    Measure(name: "notify.seal", ratio: notify.openssl.map { notify.sealRate / $0 }),
                ]
            },
        ]

        #if DEBUG
        let build = "debug"
        #else
        let build = "release"
        #endif
        var table = Table(
            "coffer-bench --check (\(build) build): Coffer speed / reference speed, fails below half the baseline "
                + "in two runs",
            ["measure", "ratio", "second run", "baseline", "floor", "result"]
        )
        // The baseline of a measure for this build; a ratio holds at half of it or above.
        func baseline(_ name: String) -> Double? { baselines[name].map { isDebugBuild ? $0.debug : $0.release } }
        func holds(_ ratio: Double, _ recorded: Double) -> Bool { ratio.isFinite && ratio >= recorded / 2 }
        var passed = true
        for group in groups {
            let first = try await group()
            let anyBelow = first.contains { measure in
                guard let ratio = measure.ratio, let recorded = baseline(measure.name) else { return false }
                return !holds(ratio, recorded)
            }
            let second = anyBelow ? try await group() : nil
            for measure in first {
                let shown = measure.ratio.map { format($0, 3) } ?? "n/a"
                guard let recorded = baseline(measure.name) else {
                    table.add([measure.name, shown, "", "none", "", "no baseline"])
                    continue
                }
                let columns = [format(recorded, 3), format(recorded / 2, 3)]
                guard let ratio = measure.ratio else {
                    table.add([measure.name, shown, ""] + columns + ["skipped (no reference)"])
                    continue
                }
                if holds(ratio, recorded) {
                    table.add([measure.name, shown, ""] + columns + ["ok"])
                    continue
                }
                let again = second?.first { $0.name == measure.name }?.ratio
                let heldAgain = again.map { holds($0, recorded) } ?? false
                if !heldAgain { passed = false }
                let againShown = again.map { format($0, 3) } ?? "n/a"
                table.add([measure.name, shown, againShown] + columns + [heldAgain ? "ok" : "FAIL"])
            }
        }
        table.print()
        return passed
    }

    static var isDebugBuild: Bool {
        #if DEBUG
        true
        #else
        false
        #endif
    }

    /// Envelope seal and open at 1 KiB, 64 KiB and 1 MiB against `openssl speed` at the same size, both in CPU time
    /// (``CPUTimer``).
    static func envelopes() throws -> [Measure] {
        let key = try EnvelopeKey(SecretBytes(randomCount: 32))
        let context: EnvelopeContext = ["bench", "check"]
        var measures: [Measure] = []
        for (size, suffix) in [(1024, "1k"), (65_536, "64k"), (1_048_576, "1m")] {
            let plaintext = [UInt8](repeating: 0x5A, count: size)
            let sealed = try Envelope.seal(plaintext, with: key, context: context)
            let seal = try OpenSSLSpeed.alternating(bytes: size, decrypt: false) {
                try CPUTimer.rate(seconds: 0.3) { _ = try Envelope.seal(plaintext, with: key, context: context) }
            }
            let open = try OpenSSLSpeed.alternating(bytes: size, decrypt: true) {
                try CPUTimer.rate(seconds: 0.3) { _ = try Envelope.open(sealed, with: key, context: context) }
            }
            measures.append(Measure(name: "envelope.seal.\(suffix)", ratio: seal.ratio))
            measures.append(Measure(name: "envelope.open.\(suffix)", ratio: open.ratio))
        }
        return measures
    }

    /// `coffer list`, `search` and `show` through the agent beside notmuch's, as whole commands, on 1,000 messages
    /// (``NotmuchBench``): notmuch's median over Coffer's. Skipped without notmuch.
    static func wholeCommands() async throws -> [Measure] {
        let keys = ["list", "search", "show"]
        guard let notmuch = NotmuchBench.notmuchPath() else {
            return keys.map { Measure(name: "notmuch.\($0)", ratio: nil) }
        }
        let (pairs, _) = try await NotmuchBench.measure(messages: 1000, rounds: 9, notmuch: notmuch)
        return keys.map { key in
            Measure(name: "notmuch.\(key)", ratio: pairs.first { $0.key == key }.map { $0.notmuch / $0.coffer })
        }
    }

    /// `name -> (debug, release)` from the baselines file.
    static func readBaselines(_ path: String) throws -> [String: (debug: Double, release: Double)] {
        guard let file = fopen(path, "r") else { throw CheckError.unreadable(path) }
        defer { fclose(file) }
        var result: [String: (debug: Double, release: Double)] = [:]
        var buffer = [CChar](repeating: 0, count: 1024)
        while fgets(&buffer, Int32(buffer.count), file) != nil {
            let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
            let line = String(decoding: bytes, as: UTF8.self)
            let content = line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            let fields = content.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" })
            if fields.isEmpty { continue }
            guard fields.count == 3, let debug = Double(fields[1]), let release = Double(fields[2]), debug > 0,
                release > 0
            else { throw CheckError.malformed(path) }
            result[String(fields[0])] = (debug, release)
        }
        return result
    }

    /// Why the baselines could not be read.
    enum CheckError: Error, CustomStringConvertible {
        case unreadable(String)
        case malformed(String)

        var description: String {
            switch self {
            case .unreadable(let path): "cannot read the baselines file \(path)"
            case .malformed(let path): "the baselines file \(path) has a line that is not `name debug release`"
            }
        }
    }
}
