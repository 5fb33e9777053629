import CofferCrypto
import CofferKeychain
import CofferTesting
import Foundation
import Testing

/// Device secret v1 and keychain item v1 against vectors that `Tests/CofferCryptoTests/Fixtures/make_vectors.py`
/// computes from `docs/FORMAT.md` with Python's `cryptography`, independently of this code.
@Suite struct KeychainKnownAnswerTests {
    struct DeviceVector: Decodable {
        var secretFile: String
        var machineIDFile: String
        var machineID: String
        var pepperLabel: String
        var pepper: String
    }

    struct ItemVector: Decodable {
        var device: Int
        var accessGroup: String
        var service: String
        var account: String
        var accessibility: UInt8
        var value: String
        var nonce: String
        var fileName: String
        var file: String
    }

    struct Vectors: Decodable {
        var deviceSecret: [DeviceVector]
        var keychainItem: [ItemVector]
    }

    static let vectors: Vectors = {
        do {
            return try Fixtures.json(Vectors.self, "../CofferCryptoTests/Fixtures/vectors.json")
        } catch {
            Issue.record("cannot read CofferCryptoTests/Fixtures/vectors.json: \(error)")
            return Vectors(deviceSecret: [], keychainItem: [])
        }
    }()

    static func bytes(_ hex: String) -> [UInt8] { [UInt8](hexString: hex) ?? [0xFF, 0xFF, 0xFF] }

    /// The device of vector `index`, loaded from its files exactly as `coffer` loads them.
    static func device(_ index: Int, in root: TemporaryDirectory) throws -> DeviceIdentity {
        let vector = vectors.deviceSecret[index]
        let state = "\(root.path)/state-\(index)"
        try SecureFile.makePrivateDirectory(state)
        try SecureFile.writeAtomically(bytes(vector.secretFile), to: "\(state)/device-secret")
        try SecureFile.writeAtomically(bytes(vector.machineIDFile), to: "\(state)/machine-id")
        return try DeviceIdentity.load(secretPath: "\(state)/device-secret", machineIDPaths: ["\(state)/machine-id"])
    }

    @Test func theVectorsArePresent() {
        #expect(Self.vectors.deviceSecret.count == 2)
        #expect(Self.vectors.keychainItem.count == 6)
    }

    @Test(arguments: 0..<2)
    func deviceSecretFilesLoadToTheSameMachineIDAndPepper(index: Int) throws {
        let root = TemporaryDirectory()
        let vector = Self.vectors.deviceSecret[index]
        let device = try Self.device(index, in: root)
        #expect(device.machineID.hexString == vector.machineID)
        #expect(device.pepper(label: vector.pepperLabel).withUnsafeBytes { Array($0).hexString } == vector.pepper)
    }

    @Test(arguments: 0..<6)
    func keychainItemsSealAndOpenByteForByte(index: Int) throws {
        let vector = Self.vectors.keychainItem[index]
        let root = TemporaryDirectory()
        let keychain = try FileKeychain(folder: "\(root.path)/keychain", device: Self.device(vector.device, in: root))
        let address = KeychainAddress(accessGroup: vector.accessGroup, service: vector.service, account: vector.account)
        let accessibility = try #require(KeychainAccessibility(rawValue: vector.accessibility))
        let value = SecretBytes(copying: Self.bytes(vector.value))
        let sealed = try keychain.itemFile(
            value,
            at: address,
            accessibility: accessibility,
            nonce: Self.bytes(vector.nonce)
        )
        #expect(sealed.name == vector.fileName)
        #expect(sealed.bytes.hexString == vector.file)
        // The Python file, put in place, opens to the value.
        try SecureFile.writeAtomically(Self.bytes(vector.file), to: "\(root.path)/keychain/\(vector.fileName)")
        #expect(try keychain.read(address) == value)
        #expect(try keychain.addresses(accessGroup: vector.accessGroup, service: vector.service) == [address])
    }
}
