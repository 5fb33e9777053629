import CofferCrypto
import Crypto
import Testing

@Suite struct PINKeyDerivationTests {
    @Test func matchesKnownAnswerVectors() throws {
        for vector in try KnownAnswers.load().pinKDF {
            let kek = try PINKeyDerivation.deriveKey(
                pin: SecretBytes(copying: Array(vector.pin.utf8)),
                salt: [UInt8](hexString: vector.salt)!,
                parameters: ScryptParameters(logN: vector.logN, r: vector.r, p: vector.p),
                devicePepper: SecretBytes(copying: [UInt8](hexString: vector.pepper)!),
                allowInsecureParameters: true
            )
            #expect(kek.withUnsafeBytes { Array($0) }.hexString == vector.kek)
        }
    }

    @Test func weakParametersAreRefusedUnlessAllowed() {
        #expect(throws: CofferCryptoError.self) {
            try PINKeyDerivation.deriveKey(
                pin: SecretBytes(copying: Array("1234".utf8)),
                salt: [UInt8](repeating: 1, count: 16),
                parameters: .insecureForTestingOnly,
                devicePepper: SecretBytes(randomCount: 32)
            )
        }
        #expect(ScryptParameters.standard.meetsMinimum)
        #expect(ScryptParameters.standard.logN >= 15)
        #expect(!ScryptParameters.insecureForTestingOnly.meetsMinimum)
    }

    @Test func shortSaltsAndOutOfRangeParametersAreRefused() {
        #expect(throws: CofferCryptoError.self) {
            try PINKeyDerivation.deriveKey(
                pin: SecretBytes(copying: Array("1234".utf8)),
                salt: [1, 2, 3],
                parameters: .insecureForTestingOnly,
                devicePepper: SecretBytes(randomCount: 32),
                allowInsecureParameters: true
            )
        }
        #expect(throws: CofferCryptoError.self) { try ScryptParameters(logN: 40, r: 8, p: 1) }
        #expect(throws: CofferCryptoError.self) { try ScryptParameters(logN: 15, r: 0, p: 1) }
        #expect(throws: CofferCryptoError.self) { try ScryptParameters(logN: 15, r: 8, p: 99) }
    }

    @Test func thePepperChangesTheKey() throws {
        func derive(_ pepper: SecretBytes) throws -> [UInt8] {
            try PINKeyDerivation.deriveKey(
                pin: SecretBytes(copying: Array("1234".utf8)),
                salt: [UInt8](repeating: 1, count: 16),
                parameters: .insecureForTestingOnly,
                devicePepper: pepper,
                allowInsecureParameters: true
            ).withUnsafeBytes { Array($0) }
        }
        #expect(try derive(SecretBytes(randomCount: 32)) != derive(SecretBytes(randomCount: 32)))
    }
}
