import CofferCrypto
import CofferKeychain
import CofferTesting
import Foundation
import Testing

@testable import CofferKeymaker

/// The vectors in `Fixtures/keymaker_vectors.json`, made by `Fixtures/make_vectors.py` from docs/FORMAT.md with an
/// independent implementation: the Keymaker must read exactly these bytes (and write the deterministic ones).
struct KeymakerVectors: Decodable {
    struct Protection: Decodable {
        var strategies: [String]
        var record: String
    }
    struct Attempts: Decodable {
        var failures: Int
        var lastFailure: Int64
        var record: String
    }
    struct Sealed: Decodable {
        var label: String
        var json: String
        var sealed: String
    }
    var account: String
    var mainKey: String
    var deviceSecret: String
    var machineID: String
    var pin: String
    var protection: [Protection]
    var attempts: [Attempts]
    var pinWrap: String
    var elementLabel: String
    var elementFileName: String
    var elementKeyFile: String
    var elementWrap: String
    var lockedAutolock: Sealed
    var lockedString: Sealed

    static func load(file: String = #filePath) throws -> KeymakerVectors {
        try Fixtures.json(KeymakerVectors.self, "Fixtures/keymaker_vectors.json", besideFile: file)
    }
}

func bytes(_ hex: String) throws -> [UInt8] { try #require([UInt8](hexString: hex)) }

@Suite struct KnownAnswerTests {
    let vectors: KeymakerVectors
    let device: DeviceIdentity

    init() throws {
        vectors = try KeymakerVectors.load()
        device = try DeviceIdentity(
            secret: SecretBytes(copying: try bytes(vectors.deviceSecret)),
            machineID: Array(vectors.machineID.utf8)
        )
    }

    func keychain(protection: Int, items: [(String, String)]) throws -> InMemoryKeychain {
        let keychain = InMemoryKeychain()
        for (service, hex) in items + [("coffer.protection", vectors.protection[protection].record)] {
            try keychain.set(
                SecretBytes(copying: try bytes(hex)),
                at: KeychainAddress(service: service, account: vectors.account),
                accessibility: .afterFirstUnlockThisDeviceOnly
            )
        }
        return keychain
    }

    @Test func protectionRecordsBothWays() throws {
        for vector in vectors.protection {
            let strategies = Set(vector.strategies.compactMap(ProtectionStrategy.init(rawValue:)))
            #expect(strategies.count == vector.strategies.count)
            #expect(ProtectionRecords.encodeProtection(strategies) == (try bytes(vector.record)))
            #expect(try ProtectionRecords.decodeProtection(try bytes(vector.record)) == strategies)
        }
    }

    @Test func attemptRecordsBothWays() throws {
        for vector in vectors.attempts {
            let record = ProtectionRecords.Attempts(failures: vector.failures, lastFailure: vector.lastFailure)
            #expect(record.encoded() == (try bytes(vector.record)))
            #expect(try ProtectionRecords.Attempts(decoding: try bytes(vector.record)) == record)
        }
    }

    @Test func thePINWrapUnlocksToTheMainKey() async throws {
        let wrap = try bytes(vectors.pinWrap)
        #expect(try ProtectionRecords.PINWrap(decoding: wrap).encoded() == wrap)
        let keychain = try keychain(
            protection: 1,
            items: [("coffer.mainkey.pin", vectors.pinWrap), ("coffer.attempts", vectors.attempts[0].record)]
        )
        let keymaker = Keymaker(
            account: vectors.account,
            keychain: keychain,
            device: device,
            clock: TestClock(),
            configuration: Fixtures.keymakerConfiguration
        )
        await #expect(throws: KeymakerError.wrongPIN(attemptsLeft: 9)) {
            try await keymaker.unlock(.pin(Fixtures.pin("000000")))
        }
        try await keymaker.unlock(.pin(Fixtures.pin(vectors.pin)))
        #expect(try await keymaker.keyBytes() == (try bytes(vectors.mainKey)))
    }

    @Test func theSecureElementKeyFileAndWrapUnlockToTheMainKey() async throws {
        let folder = TemporaryDirectory()
        let presence = TestPresence()
        let element = try SoftwareSecureElement(folder: folder.path, device: device, presence: presence)
        try SecureFile.writeAtomically(
            try bytes(vectors.elementKeyFile),
            to: "\(folder.path)/\(vectors.elementFileName)"
        )
        let keychain = try keychain(protection: 2, items: [("coffer.mainkey.secure-element", vectors.elementWrap)])
        let keymaker = Keymaker(
            account: vectors.account,
            keychain: keychain,
            device: device,
            secureElement: element,
            clock: TestClock(),
            configuration: Fixtures.keymakerConfiguration
        )
        try await keymaker.unlock(.secureElement(reason: "vectors"))
        #expect(try await keymaker.keyBytes() == (try bytes(vectors.mainKey)))
        #expect(
            try ProtectionRecords.encodeSecureElementWrap(
                ProtectionRecords.decodeSecureElementWrap(try bytes(vectors.elementWrap))
            ) == (try bytes(vectors.elementWrap))
        )
    }

    @Test func lockedValuesOpenUnderTheMainKey() async throws {
        let keychain = try keychain(
            protection: 0,
            items: [
                ("coffer.mainkey.none", vectors.mainKey), ("coffer.autolock", vectors.lockedAutolock.sealed),
            ]
        )
        let keymaker = Keymaker(
            account: vectors.account,
            keychain: keychain,
            device: device,
            clock: TestClock(),
            configuration: Fixtures.keymakerConfiguration
        )
        try await keymaker.unlock(.none)
        // The stored autolock setting is a Locked<AutolockPolicy>.
        #expect(await keymaker.autolockPolicy == .after(seconds: 120))
        #expect(await keymaker.autolockSettingFallback == nil)
        let token = Locked<String>(encrypted: try bytes(vectors.lockedString.sealed), label: vectors.lockedString.label)
        let key = try await keymaker.mainKey(for: .userRequest)
        #expect(try token.unlock(with: key) == "token-2718")
        // Under another label the same bytes do not open.
        let moved = Locked<String>(encrypted: try bytes(vectors.lockedString.sealed), label: "account.other")
        #expect(throws: KeymakerError.self) { try moved.unlock(with: key) }
    }
}
