import CofferCrypto
import CofferKeychain
import CofferKeymaker
import CofferTesting
import Testing

/// Runs the whole MainKey lifecycle on real files with marker strings and a known MainKey, then scans every byte
/// under the data, keychain, device and secure element folders.
@Suite struct CanaryTests {
    @Test func noMarkerPINOrKeyBytesReachTheDisk() async throws {
        let root = TemporaryDirectory(prefix: "coffer-canary")
        let folders = (
            data: "\(root.path)/data", keychain: "\(root.path)/data/keychain", state: "\(root.path)/state"
        )
        let device = try DeviceIdentity.loadOrCreate(
            secretPath: "\(folders.state)/device-secret",
            keychainFolder: folders.keychain
        )
        let keychain = try FileKeychain(folder: folders.keychain, device: device)
        let presence = TestPresence()
        let element = try SoftwareSecureElement(
            folder: "\(folders.state)/secure-element",
            device: device,
            presence: presence
        )
        func keymaker() -> Keymaker {
            Keymaker(
                account: "canary-account-3141",
                keychain: keychain,
                device: device,
                secureElement: element,
                configuration: Fixtures.keymakerConfiguration
            )
        }
        let knownKey = (0..<32).map { UInt8(0xC0 ^ $0) }
        let pin = "CANARY-PIN-5813"
        let markers = ["CANARY-TOKEN-2718", "canary.user@example.org", "CANARY-PRIVATE-KEY-1618"]

        let first = keymaker()
        try await first.createMainKey(injected: SecretBytes(copying: knownKey))
        let key = try await first.mainKey(for: .userRequest)
        try SecureFile.makePrivateDirectory(folders.data)
        for (index, marker) in markers.enumerated() {
            let sealed = try Locked(clearValue: marker, with: key, label: "canary.\(index)")
            try SecureFile.writeAtomically(sealed.encrypted, to: "\(folders.data)/value-\(index).sealed")
        }
        try await first.activatePIN(Fixtures.pin(pin), authorizedBy: .none)
        try await first.activateSecureElement(authorizedBy: .pin(Fixtures.pin(pin)))
        try await first.setAutolock(.after(seconds: 90))
        await first.lock()
        _ = try? await first.unlock(.pin(Fixtures.pin("0000")))
        let second = keymaker()
        try await second.unlock(.pin(Fixtures.pin(pin)))
        try await second.deactivate(.secureElement, authorizedBy: .pin(Fixtures.pin(pin)))

        let needles = markers.map { Array($0.utf8) } + [Array(pin.utf8), knownKey]
        func scan() -> [(file: String, needle: Int)] { CanaryScanner.occurrences(of: needles, under: [root.path]) }
        let hits = scan()
        #expect(hits.isEmpty, "found \(hits.map { "needle \($0.needle) in \($0.file)" })")
        // The scanner itself must be able to find what it looks for.
        try SecureFile.writeAtomically(Array("x\(markers[0])x".utf8), to: "\(root.path)/control")
        #expect(scan().count == 1)
        try SecureFile.remove("\(root.path)/control")

        try await second.destroy()
        #expect(scan().isEmpty)
        let keychainFiles = TemporaryDirectory.files(below: folders.keychain).filter { $0.hasSuffix(".item") }
        #expect(keychainFiles.isEmpty)
    }
}
