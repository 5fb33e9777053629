import CofferCrypto
import CofferKeychain
import CofferKeymaker
import CofferTesting

/// Unlock time split into the PIN KDF and everything else, over a real `FileKeychain` in a temporary folder.
enum UnlockBench {
    static func run() async throws {
        let folder = TemporaryDirectory(prefix: "coffer-bench")
        let device = try DeviceIdentity.loadOrCreate(
            secretPath: "\(folder.path)/state/device-secret",
            keychainFolder: "\(folder.path)/keychain"
        )
        let keychain = try FileKeychain(folder: "\(folder.path)/keychain", device: device)
        let pin = SecretBytes(copying: Array("24681357".utf8))
        var table = Table("Unlock: the PIN KDF and everything else", ["part", "median (ms)", "aim"])

        for parameters in [ScryptParameters.minimum, ScryptParameters.standard] {
            let kdf = try await Timer.median(runs: 5) { _ = try derive(pin, parameters) }
            let note = parameters == .standard ? "the default; about 500 ms" : "the floor (Proton's cost)"
            table.add(["KDF \(parameters)", format(kdf * 1000, 1), note])
        }

        // Everything but the KDF: the same PIN unlock with a negligible KDF (N=2^10), minus that KDF's own time.
        // This includes the attempt lock, the durable pre-count of the attempt and the reset after a success (two
        // keychain writes, measured below), keychain reads, the envelope open and the autolock policy. (Unlock minus a separate
        // production KDF run would be dominated by the KDF's own variance.)
        let cheap = Keymaker(
            account: "bench-cheap",
            keychain: keychain,
            device: device,
            configuration: Keymaker.Configuration(scrypt: .insecureForTestingOnly, allowInsecureKDF: true)
        )
        try await cheap.createMainKey()
        try await cheap.activatePIN(pin, authorizedBy: .none)
        let cheapUnlock = try await Timer.median(runs: 21) {
            await cheap.lock()
            try await cheap.unlock(.pin(pin))
        }
        let cheapKDF = try await Timer.median(runs: 21) { try derive(pin, .insecureForTestingOnly) }
        table.add([
            "PIN unlock minus its KDF (N=2^10 so the KDF is small)", format((cheapUnlock - cheapKDF) * 1000, 2),
            "< 5 ms",
        ])
        let durable = try await Timer.median(runs: 9) {
            try keychain.set(
                SecretBytes(copying: [1, 2, 3]),
                at: KeychainAddress(service: "bench", account: "write"),
                accessibility: .afterFirstUnlockThisDeviceOnly
            )
        }
        table.add(["one durable keychain write (fsync ×2), two per PIN unlock", format(durable * 1000, 2), ""])
        try await cheap.deactivate(.pin, authorizedBy: .pin(pin))
        let none = try await Timer.median(runs: 21) {
            await cheap.lock()
            try await cheap.unlock(.none)
        }
        table.add(["unlock with strategy none", format(none * 1000, 2), "< 5 ms"])
        table.print()
    }

    private static func derive(_ pin: SecretBytes, _ parameters: ScryptParameters) throws {
        _ = try PINKeyDerivation.deriveKey(
            pin: pin,
            salt: [UInt8](repeating: 7, count: 16),
            parameters: parameters,
            devicePepper: SecretBytes(randomCount: 32),
            allowInsecureParameters: true
        )
    }
}
