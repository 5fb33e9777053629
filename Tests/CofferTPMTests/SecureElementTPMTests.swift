import CofferCrypto
import CofferKeychain
import CofferKeymaker
import CofferKeymakerTPM
import CofferTPM
import CofferTesting
import Foundation
import Testing

@Suite("Secure element key sealed by the TPM against swtpm", .timeLimit(.minutes(2)))
struct SecureElementTPMTests {
    let root = TemporaryDirectory(prefix: "coffer-tpm-se")
    let device = Fixtures.device()
    let presence = TestPresence()

    func keymaker(element: SoftwareSecureElement, keychain: any Keychain) -> Keymaker {
        Keymaker(
            account: "alice",
            keychain: keychain,
            device: device,
            secureElement: element,
            pinBinder: nil,
            configuration: Fixtures.keymakerConfiguration
        )
    }

    @Test func theKeyFileIsSealedByTheTPMAndOpensOnlyThereAndWithPresence() async throws {
        let fixture = try TPMFixture()
        fixture.disconnect()
        let folder = "\(root.path)/secure-element"
        let element = try SoftwareSecureElement(
            folder: folder,
            device: device,
            presence: presence,
            sealer: TPMKeySealer(configuration: fixture.tpm.configuration)
        )
        let keychain = InMemoryKeychain()
        let keymaker = keymaker(element: element, keychain: keychain)
        try await keymaker.createMainKey()
        let bytes = try await keymaker.mainKey(for: .userRequest).withUnsafeBytes { Array($0) }
        try await keymaker.activateSecureElement(authorizedBy: .none)
        #expect(await keymaker.secureElementHolder() == "TPM")
        let files = TemporaryDirectory.files(below: folder).filter { $0.hasSuffix(".key") }
        #expect(files.count == 1)
        let file = try #require(try SecureFile.read(files[0]))
        #expect(Array(file[0..<5]) == Array("CFSE".utf8) + [2])
        await keymaker.lock()
        // The presence gate stays.
        presence.setPresent(false)
        await #expect(throws: KeymakerError.presenceNotConfirmed) {
            try await keymaker.unlock(.secureElement(reason: "test"))
        }
        presence.setPresent(true)
        try await keymaker.unlock(.secureElement(reason: "test"))
        #expect(try await keymaker.mainKey(for: .userRequest).withUnsafeBytes { Array($0) } == bytes)
        await keymaker.lock()

        // The key file and the device secret copied to another machine (another TPM, or none) open nothing.
        let other = try TPMFixture(name: "other-machine")
        other.disconnect()
        let thieves: [(String, String?, KeymakerError)] = [
            ("other-tpm", other.tpm.configuration, .tpmMismatch), ("no-tpm", nil, .tpmUnavailable),
        ]
        for (name, tpm, expected) in thieves {
            let copy = "\(root.path)/\(name)"
            let sealer = tpm.map(TPMKeySealer.init(configuration:))
            let thief = try SoftwareSecureElement(folder: copy, device: device, presence: presence, sealer: sealer)
            try FileManager.default.copyItem(
                atPath: files[0],
                toPath: "\(copy)/\((files[0] as NSString).lastPathComponent)"
            )
            let stolen = self.keymaker(element: thief, keychain: keychain)
            await #expect(throws: expected) { try await stolen.unlock(.secureElement(reason: "test")) }
            #expect(await stolen.isLocked)
        }
    }

    @Test func withoutATPMTheKeyFileStaysSoftware() async throws {
        let element = try SoftwareSecureElement(
            folder: "\(root.path)/secure-element",
            device: device,
            presence: presence,
            sealer: nil
        )
        let keymaker = keymaker(element: element, keychain: InMemoryKeychain())
        try await keymaker.createMainKey()
        try await keymaker.activateSecureElement(authorizedBy: .none)
        #expect(await keymaker.secureElementHolder() == "software")
        await keymaker.lock()
        try await keymaker.unlock(.secureElement(reason: "test"))
    }
}
