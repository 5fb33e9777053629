import CofferCrypto
import CofferKeychain
import CofferKeymaker
import CofferKeymakerTPM
import CofferTesting

#if canImport(Glibc)
import Glibc
#endif

/// `coffer-bench tpm`: a PIN unlock bound to a TPM (a private swtpm on loopback) beside the scrypt-only PIN, same
/// scrypt cost, same run. `COFFER_BENCH_TINY_KDF=1` uses N=2^10 (a debug-build check that the section runs).
enum TPMUnlockBench {
    static func run() async throws {
        let folder = TemporaryDirectory(prefix: "coffer-bench-tpm")
        let tpm = try SoftwareTPM(stateDirectory: "\(folder.path)/swtpm")
        defer { tpm.stop() }
        let device = try DeviceIdentity.loadOrCreate(
            secretPath: "\(folder.path)/state/device-secret",
            keychainFolder: "\(folder.path)/keychain"
        )
        let keychain = try FileKeychain(folder: "\(folder.path)/keychain", device: device)
        let tiny = getenv("COFFER_BENCH_TINY_KDF").map { String(cString: $0) == "1" } ?? false
        let scrypt: ScryptParameters = tiny ? .insecureForTestingOnly : .standard
        let configuration = Keymaker.Configuration(scrypt: scrypt, allowInsecureKDF: tiny)
        let pin = SecretBytes(copying: Array("24681357".utf8))
        let runs = tiny ? 9 : 5
        var medians: [PINElement: Double] = [:]
        for element in PINElement.allCases {
            let keymaker = Keymaker(
                account: "bench-\(element.rawValue)",
                keychain: keychain,
                device: device,
                pinBinder: TPMPINBinder(configuration: tpm.configuration),
                configuration: configuration
            )
            try await keymaker.createMainKey()
            try await keymaker.activatePIN(pin, authorizedBy: .none, element: element)
            medians[element] = try await Timer.median(runs: runs) {
                await keymaker.lock()
                try await keymaker.unlock(.pin(pin))
            }
            try await keymaker.logout(authorizedBy: .pin(pin))
        }
        let software = medians[.software] ?? 0
        let bound = medians[.tpm] ?? 0
        var table = Table(
            "PIN unlock, \(scrypt)\(tiny ? " (tiny: a run check, not a measurement)" : ""), swtpm on loopback",
            ["PIN", "median (ms)", "ratio to software"]
        )
        table.add(["software (scrypt only)", format(software * 1000, 2), "1.00"])
        table.add([
            "TPM-bound (scrypt + counter read, increment, unseal)", format(bound * 1000, 2), ratio(bound, software),
        ])
        table.add(["the TPM's share", format((bound - software) * 1000, 2), ""])
        table.print()
    }

    private static func ratio(_ value: Double, _ base: Double) -> String { base > 0 ? format(value / base, 2) : "-" }
}
