import CofferCrypto
import CofferKeychain
import CofferKeymaker
import CofferStore
import CofferTesting

/// The sealed mail store beside the same store with identity cells (like-for-like), measured in the same run.
enum StoreBench {
    static func run(messages: Int = 10_000) async throws {
        let report = try await measure(messages: messages)
        var table = Table(
            "Mail store, \(report.messages) generated messages: sealed vs the same store with identity cells",
            ["operation", "sealed", "identity (plaintext)", "ratio", "aim"]
        )
        func row(_ name: String, _ sealed: Double, _ plain: Double, _ unit: String, _ aim: String) {
            table.add([
                name, "\(format(sealed, 2)) \(unit)", "\(format(plain, 2)) \(unit)", format(sealed / plain, 2), aim,
            ])
        }
        row("import all (s)", report.importSealed, report.importPlain, "s", "≤ 1.2×")
        row(
            "import rate (messages/s)",
            Double(report.messages) / report.importSealed,
            Double(report.messages) / report.importPlain,
            "/s",
            ""
        )
        row("list a page of 50", report.listSealed, report.listPlain, "µs", "≤ 1.2×")
        row("show one message", report.showSealed, report.showPlain, "µs", "≤ 1.2×")
        row("search two words", report.searchSealed, report.searchPlain, "µs", "≤ 1.2×")
        table.print()
    }

    /// Creates a throwaway keychain and Keymaker, then runs ``StoreBenchmark/run(messages:folder:keymaker:iterations:)``.
    static func measure(messages: Int, iterations: Int = 200) async throws -> StoreBenchmark.Report {
        let folder = TemporaryDirectory(prefix: "coffer-bench-store")
        let device = try DeviceIdentity.loadOrCreate(
            secretPath: "\(folder.path)/state/device-secret",
            keychainFolder: "\(folder.path)/keychain"
        )
        let keychain = try FileKeychain(folder: "\(folder.path)/keychain", device: device)
        let keymaker = Keymaker(account: "bench", keychain: keychain, device: device)
        try await keymaker.createMainKey()
        try SecureFile.makePrivateDirectory("\(folder.path)/stores")
        return try await StoreBenchmark.run(
            messages: messages,
            folder: "\(folder.path)/stores",
            keymaker: keymaker,
            iterations: iterations
        )
    }
}
