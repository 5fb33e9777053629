import CofferCrypto
import CofferKeychain
import CofferKeymaker
import CofferStore
import CofferTesting

/// The sealed mail store beside the same schema in plaintext GRDB, measured in the same run.
enum StoreBench {
    static func run() async throws {
        let folder = TemporaryDirectory(prefix: "coffer-bench-store")
        let device = try DeviceIdentity.loadOrCreate(
            secretPath: "\(folder.path)/state/device-secret",
            keychainFolder: "\(folder.path)/keychain"
        )
        let keychain = try FileKeychain(folder: "\(folder.path)/keychain", device: device)
        let keymaker = Keymaker(account: "bench", keychain: keychain, device: device)
        try await keymaker.createMainKey()
        try SecureFile.makePrivateDirectory("\(folder.path)/stores")
        let report = try await StoreBenchmark.run(messages: 10_000, folder: "\(folder.path)/stores", keymaker: keymaker)
        var table = Table(
            "Mail store, \(report.messages) generated messages: sealed vs plaintext GRDB (same schema)",
            ["operation", "Coffer", "plaintext GRDB", "ratio", "aim"]
        )
        func row(_ name: String, _ sealed: Double, _ plain: Double, _ unit: String, _ aim: String) {
            table.add([
                name, "\(format(sealed, 2)) \(unit)", "\(format(plain, 2)) \(unit)", format(sealed / plain, 2), aim,
            ])
        }
        row("import all (s)", report.importSealed, report.importPlain, "s", "≤ 1.5×")
        row(
            "import rate (messages/s)",
            Double(report.messages) / report.importSealed,
            Double(report.messages) / report.importPlain,
            "/s",
            ""
        )
        row("list a page of 50", report.listSealed, report.listPlain, "µs", "≤ 1.5×")
        row("show one message", report.showSealed, report.showPlain, "µs", "< 2 ms")
        row("search two words", report.searchSealed, report.searchPlain, "µs", "")
        table.print()
    }
}
