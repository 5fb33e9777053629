import CofferCrypto
import CofferKeymaker
import CofferMIME
import CofferSampleMail
@_spi(Benchmark) import CofferStore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Benchmarks of the sealed store against itself with sealing replaced by identity (``PlaintextCellCipher``): the
/// same schema, parsing, batching, statements and keyed search tokens, so the ratio is what sealing costs.
enum StoreBenchmark {
    /// Timings of one run.
    struct Report: Sendable, CustomStringConvertible {
        /// Messages imported into each store.
        var messages: Int
        /// Seconds to import every message, sealed.
        var importSealed: Double
        /// Seconds to import every message, plaintext.
        var importPlain: Double
        /// Microseconds to list a page of 50 (newest first, with subject and senders), sealed.
        var listSealed: Double
        /// Microseconds to list a page of 50, plaintext.
        var listPlain: Double
        /// Microseconds to show one whole message, sealed.
        var showSealed: Double
        /// Microseconds to show one whole message, plaintext.
        var showPlain: Double
        /// Microseconds for a two-word search (first page of 50), sealed.
        var searchSealed: Double
        /// Microseconds for a two-word search, plaintext.
        var searchPlain: Double

        /// A table for people.
        var description: String {
            func row(_ name: String, _ sealed: Double, _ plain: Double, _ unit: String) -> String {
                let ratio = plain > 0 ? sealed / plain : 0
                return
                    "\(name.padding(toLength: 22, withPad: " ", startingAt: 0)) sealed \(format(sealed)) \(unit)"
                    + "   plaintext \(format(plain)) \(unit)   ratio \(format(ratio))x"
            }
            return [
                "store benchmark, \(messages) messages",
                row("import (all)", importSealed, importPlain, "s"),
                row("list page of 50", listSealed, listPlain, "us"),
                row("show one", showSealed, showPlain, "us"),
                row("search two words", searchSealed, searchPlain, "us"),
            ].joined(separator: "\n")
        }

        private func format(_ value: Double) -> String { String(format: "%.2f", value) }
    }

    /// Runs the benchmark in `folder` (two stores are created there) with an unlocked `keymaker`.
    ///
    /// - Parameters:
    ///   - messages: Generated messages to import (``SyntheticMail``, about 1 in 10 with an attachment).
    ///   - folder: An empty folder.
    ///   - keymaker: An unlocked Keymaker.
    ///   - iterations: Repetitions of each read operation (the mean is reported).
    static func run(
        messages: Int = 10_000,
        folder: String,
        keymaker: Keymaker,
        iterations: Int = 200
    )
        async throws -> Report
    {
        let generator = SyntheticMail(seed: 2024)
        let corpus = (0..<messages).map { RawMessage(bytes: generator.message($0)) }
        let batches = stride(from: 0, to: corpus.count, by: MailStore.defaultBatchSize).map {
            Array(corpus[$0..<min($0 + MailStore.defaultBatchSize, corpus.count)])
        }
        var report = Report(
            messages: messages,
            importSealed: 0,
            importPlain: 0,
            listSealed: 0,
            listPlain: 0,
            showSealed: 0,
            showPlain: 0,
            searchSealed: 0,
            searchPlain: 0
        )

        let plain = try MailStore(folder: "\(folder)/plain", keys: keymaker, cellCipher: PlaintextCellCipher())
        let store = try MailStore(folder: "\(folder)/sealed", keys: keymaker)
        // Batches alternate between the two stores, so both see the same warm-up, page cache and machine load.
        for batch in batches {
            var start = ContinuousClock.now
            _ = try await plain.importMessages(batch)
            report.importPlain += seconds(since: start)
            start = ContinuousClock.now
            _ = try await store.importMessages(batch)
            report.importSealed += seconds(since: start)
        }

        var random = SplitMix(seed: 99)
        let ids = (0..<iterations).map { _ in Int64(random.next() % UInt64(max(messages, 1))) + 1 }
        let query = "meeting budget"

        // Both stores skip the same duplicates, so an id names the same message in each.
        (report.listPlain, report.listSealed) = try await paired(
            iterations,
            { _ in _ = try await plain.list(limit: 50, offset: 0) },
            { _ in _ = try await store.list(limit: 50, offset: 0) }
        )
        (report.showPlain, report.showSealed) = try await paired(
            iterations,
            { index in _ = try await plain.message(ids[index]) },
            { index in _ = try await store.message(ids[index]) }
        )
        (report.searchPlain, report.searchSealed) = try await paired(
            iterations,
            { _ in _ = try await plain.search(query) },
            { _ in _ = try await store.search(query) }
        )
        try store.close()
        try plain.close()
        return report
    }

    static func seconds(since start: ContinuousClock.Instant) -> Double {
        let elapsed = ContinuousClock.now - start
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    /// Mean microseconds of `plain` and of `sealed` over `count` runs each (after one warm-up run of each), the two
    /// alternating so that both see the same machine load.
    static func paired(
        _ count: Int,
        _ plain: (Int) async throws -> Void,
        _ sealed: (Int) async throws -> Void
    ) async throws -> (plain: Double, sealed: Double) {
        try await plain(0)
        try await sealed(0)
        var plainSeconds = 0.0
        var sealedSeconds = 0.0
        for index in 0..<count {
            var start = ContinuousClock.now
            try await plain(index)
            plainSeconds += seconds(since: start)
            start = ContinuousClock.now
            try await sealed(index)
            sealedSeconds += seconds(since: start)
        }
        let runs = Double(max(count, 1))
        return (plainSeconds * 1e6 / runs, sealedSeconds * 1e6 / runs)
    }
}

/// The identity "cipher": a cell is stored as its plaintext. Only for the benchmark's like-for-like reference; it
/// never reaches a real store (the CLI cannot open a store with it).
struct PlaintextCellCipher: CellCipher {
    func seal(
        _ plaintext: [UInt8],
        with key: EnvelopeKey,
        context: EnvelopeContext
    ) throws(CofferCryptoError)
        -> [UInt8]
    { plaintext }

    func open(_ sealed: [UInt8], with key: EnvelopeKey, context: EnvelopeContext) -> [UInt8]? { sealed }
}
