import CofferCrypto
import Crypto

#if canImport(Glibc)
import Glibc
#endif

/// Envelope and stream throughput beside `openssl speed -evp aes-256-gcm`.
enum CryptoBench {
    static let sizes = [1024, 65_536, 1_048_576]

    static func envelopes() throws {
        let key = try EnvelopeKey(SecretBytes(randomCount: 32))
        let context: EnvelopeContext = ["bench", "envelope"]
        var table = Table(
            "Envelope v1 (AES-256-GCM) vs openssl speed -evp aes-256-gcm (3 alternating rounds, medians; both in CPU time)",
            [
                "operation", "size", "Coffer MB/s", "OpenSSL MB/s", "ratio", "swift-crypto AES.GCM alone MB/s",
                "its ratio",
            ]
        )
        // The floor through swift-crypto's public API: one AES.GCM call with a prepared key, nothing else.
        let bare = SymmetricKey(size: .bits256)
        for size in sizes {
            let plaintext = [UInt8](repeating: 0x5A, count: size)
            let sealed = try Envelope.seal(plaintext, with: key, context: context)
            let seal = try OpenSSLSpeed.alternating(bytes: size, decrypt: false) {
                try CPUTimer.rate { _ = try Envelope.seal(plaintext, with: key, context: context) }
            }
            let open = try OpenSSLSpeed.alternating(bytes: size, decrypt: true) {
                try CPUTimer.rate { _ = try Envelope.open(sealed, with: key, context: context) }
            }
            let nonce = AES.GCM.Nonce()
            let box = try AES.GCM.seal(plaintext, using: bare, nonce: nonce)
            // A fixed nonce, only to time the AEAD itself (the envelope draws one per call).
            let bareSeal = try CPUTimer.rate { _ = try AES.GCM.seal(plaintext, using: bare, nonce: nonce) }
            let bareOpen = try CPUTimer.rate { _ = try AES.GCM.open(box, using: bare) }
            for (name, measured, floor) in [("seal", seal, bareSeal), ("open", open, bareOpen)] {
                let swiftCrypto = floor * Double(size) / 1e6
                table.add([
                    name, label(size), format(measured.coffer, 0), measured.openssl.map { format($0, 0) } ?? "n/a",
                    measured.ratio.map { format($0, 2) } ?? "n/a", format(swiftCrypto, 0),
                    measured.openssl.map { format(swiftCrypto / $0, 2) } ?? "n/a",
                ])
            }
        }
        table.print()
        try fixedCost(key: key, context: context, bare: bare)
    }

    /// Where one 1 KiB envelope's time goes: each step alone, in nanoseconds per call, beside the whole call.
    static func fixedCost(key: EnvelopeKey, context: EnvelopeContext, bare: SymmetricKey) throws {
        let plaintext = [UInt8](repeating: 0x5A, count: 1024)
        let aad = [UInt8](repeating: 0x11, count: Envelope.headerCount + context.encoded.count)
        let nonce = AES.GCM.Nonce()
        let box = try AES.GCM.seal(plaintext, using: bare, nonce: nonce, authenticating: aad)
        let sealed = try Envelope.seal(plaintext, with: key, context: context)
        var table = Table("One 1 KiB envelope, step by step (CPU ns per call)", ["step", "ns"])
        func row(_ name: String, _ body: () throws -> Void) rethrows {
            table.add([name, format(1e9 / (try CPUTimer.rate(body)), 0)])
        }
        var direct = [UInt8](repeating: 0, count: 12)
        try row("seal: 12-byte nonce, one getrandom call") {
            direct.withUnsafeMutableBytes { SystemRandom.fill($0) }
        }
        try row("seal: 12-byte nonce from the buffered pool (what seal uses)") { _ = SystemRandom.publicBytes(12) }
        try row("seal: context tag (HMAC-SHA256 through swift-crypto)") {
            _ = key.withContextTag(context) { $0.first }
        }
        try row("seal: AES.GCM.seal with the header as associated data") {
            _ = try AES.GCM.seal(plaintext, using: bare, nonce: nonce, authenticating: aad).combined
        }
        try row("seal: the whole Envelope.seal") { _ = try Envelope.seal(plaintext, with: key, context: context) }
        try row("open: AES.GCM.open with the header as associated data") {
            _ = try AES.GCM.open(box, using: bare, authenticating: aad)
        }
        try row("open: the whole Envelope.open") { _ = try Envelope.open(sealed, with: key, context: context) }
        // A store list opens one summary cell of a few hundred bytes per message.
        for algorithm in EnvelopeAlgorithm.allCases {
            let cell = try Envelope.seal(Array(plaintext[..<256]), with: key, context: context, algorithm: algorithm)
            try row("open: a 256-byte Envelope, \(algorithm)") {
                _ = try Envelope.open(cell, with: key, context: context)
            }
        }
        table.print()
    }

    static func stream() throws {
        let key = try EnvelopeKey(SecretBytes(randomCount: 32))
        let context: EnvelopeContext = ["bench", "stream"]
        let total = 256 << 20
        var table = Table(
            "Streaming AEAD v1, 256 MiB in 64 KiB chunks, constant memory (CPU time, as openssl speed)",
            ["operation", "Coffer MB/s", "OpenSSL 64 KiB MB/s", "ratio"]
        )
        // Encrypt a generated 256 MiB into a sink that keeps only the last chunk, then decrypt a recorded stream.
        var source = PatternSource(total: total)
        var sink = CountingSink(keepAll: false)
        var start = CPUTimer.now()
        try StreamingAEAD.encrypt(from: &source, to: &sink, key: key, context: context)
        let encrypt = Double(total) / 1e6 / (Double(CPUTimer.now() - start) / 1e9)
        var recordSource = PatternSource(total: 32 << 20)
        var recorded = CountingSink(keepAll: true)
        try StreamingAEAD.encrypt(from: &recordSource, to: &recorded, key: key, context: context)
        start = CPUTimer.now()
        var decryptedBytes = 0
        for _ in 0..<8 {
            var sealedSource = BufferSource(recorded.bytes)
            var out = CountingSink(keepAll: false)
            try StreamingAEAD.decrypt(from: &sealedSource, to: &out, key: key, context: context)
            decryptedBytes += out.count
        }
        let decrypt = Double(decryptedBytes) / 1e6 / (Double(CPUTimer.now() - start) / 1e9)
        for (name, coffer, isDecrypt) in [("encrypt", encrypt, false), ("decrypt", decrypt, true)] {
            let openssl = OpenSSLSpeed.megabytesPerSecond(bytes: 65_536, decrypt: isDecrypt)
            table.add([
                name, format(coffer, 0), openssl.map { format($0, 0) } ?? "n/a",
                openssl.map { format(coffer / $0, 2) } ?? "n/a",
            ])
        }
        table.print()
        print("(sink sizes: encrypted \(sink.count) bytes for \(total) plaintext bytes; peak memory is two chunks)")
    }

    static func label(_ size: Int) -> String {
        size >= 1 << 20 ? "\(size >> 20) MiB" : size >= 1024 ? "\(size >> 10) KiB" : "\(size) B"
    }
}

/// Yields `total` bytes of a pattern without holding them.
struct PatternSource: ByteSource {
    var remaining: Int
    init(total: Int) { remaining = total }

    mutating func read(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        let count = min(buffer.count, remaining)
        for index in 0..<count { buffer[index] = UInt8(truncatingIfNeeded: index) }
        remaining -= count
        return count
    }
}

/// Counts what is written; keeps it only when asked.
struct CountingSink: ByteSink {
    var count = 0
    var bytes: [UInt8] = []
    let keepAll: Bool

    mutating func write(_ chunk: [UInt8]) {
        count += chunk.count
        if keepAll { bytes += chunk }
    }
}

/// Rates in the calling thread's CPU time (user + system, `CLOCK_THREAD_CPUTIME_ID`), the measure `openssl speed`
/// divides by (its CPU user time, unless given `-elapsed`).
///
/// On a shared machine a wall clock charges Coffer for the time other processes hold the cores, which `openssl speed`
/// is never charged: with two busy loops beside it, `openssl speed -bytes 65536` still printed 4,444 MB/s and
/// `-elapsed` 2,811 MB/s, and a wall-clock Coffer figure fell the same way, so the ratio measured the machine's load.
/// Time in the kernel (a nonce refill, a page fault) still counts against Coffer.
enum CPUTimer {
    /// Nanoseconds of CPU time this thread has used.
    static func now() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &spec)
        return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
    }

    /// Runs `body` for about `seconds` of CPU time and returns operations per CPU second (median of three rounds).
    /// The clock (a system call) is read once per batch of calls, a batch being about a millisecond.
    static func rate(seconds: Double = 0.6, _ body: () throws -> Void) rethrows -> Double {
        var batch = 1
        while true {
            let start = now()
            for _ in 0..<batch { try body() }
            if now() - start >= 1_000_000 || batch >= 1 << 20 { break }
            batch *= 2
        }
        var rates: [Double] = []
        let budget = UInt64(seconds / 3 * 1e9)
        for _ in 0..<3 {
            let start = now()
            var operations = 0
            while now() - start < budget {
                for _ in 0..<batch { try body() }
                operations += batch
            }
            rates.append(Double(operations) / (Double(now() - start) / 1e9))
        }
        return rates.sorted()[1]
    }
}

/// Runs `openssl speed` for one buffer size.
enum OpenSSLSpeed {
    /// Coffer's MB/s at `bytes` (from `coffer`, operations per second, to be measured in CPU time with ``CPUTimer``
    /// as openssl measures itself) beside `openssl speed`'s, in `rounds` rounds that alternate the two, so that both
    /// see the same machine: the medians of each and of the rounds' ratios.
    static func alternating(
        bytes: Int,
        decrypt: Bool,
        rounds: Int = 3,
        _ coffer: () throws -> Double
    ) rethrows -> (coffer: Double, openssl: Double?, ratio: Double?) {
        var cofferRates: [Double] = []
        var opensslRates: [Double] = []
        var ratios: [Double] = []
        for _ in 0..<rounds {
            let rate = try coffer() * Double(bytes) / 1e6
            cofferRates.append(rate)
            if let reference = megabytesPerSecond(bytes: bytes, decrypt: decrypt) {
                opensslRates.append(reference)
                ratios.append(rate / reference)
            }
        }
        // Without openssl there is no reference and no ratio.
        return (
            percentiles(cofferRates).p50, opensslRates.isEmpty ? nil : percentiles(opensslRates).p50,
            ratios.isEmpty ? nil : percentiles(ratios).p50
        )
    }

    /// MB/s (10^6 bytes per second) from `openssl speed -evp aes-256-gcm -bytes N`, or `nil` without openssl.
    static func megabytesPerSecond(bytes: Int, decrypt: Bool) -> Double? {
        let command =
            "openssl speed -evp aes-256-gcm -seconds 1 -bytes \(bytes)\(decrypt ? " -decrypt" : "") 2>/dev/null"
        guard let pipe = popen(command, "r") else { return nil }
        var output = ""
        var buffer = [CChar](repeating: 0, count: 4096)
        while fgets(&buffer, Int32(buffer.count), pipe) != nil {
            output += String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        pclose(pipe)
        // The last line reads e.g. "AES-256-GCM    4157451.87k": thousands of bytes per second.
        guard let last = output.split(separator: "\n").last(where: { $0.uppercased().hasPrefix("AES-256-GCM") }),
            let field = last.split(separator: " ").last, field.hasSuffix("k"),
            let thousands = Double(field.dropLast())
        else { return nil }
        return thousands * 1000 / 1e6
    }
}
