import CofferCrypto
import CofferTesting
import Testing

@Suite struct SecretBytesTests {
    @Test func descriptionsAndMirrorsAreRedacted() {
        let secret = SecretBytes(copying: Array("hunter2-marker".utf8))
        #expect(secret.description == "SecretBytes(<redacted>)")
        #expect(secret.debugDescription == "SecretBytes(<redacted>)")
        #expect(!String(describing: secret).contains("hunter2"))
        #expect(!String(reflecting: secret).contains("hunter2"))
        var dumped = ""
        dump(secret, to: &dumped)
        #expect(!dumped.contains("hunter2"))
        #expect(!dumped.contains("104"))  // 'h' as a number would show up in a reflected byte array
        #expect(Mirror(reflecting: secret).children.isEmpty)
        #expect(Redaction.leaks(of: Array("hunter2-marker".utf8), in: secret).isEmpty)
        let random = SecretBytes(randomCount: 32)
        #expect(Redaction.leaks(of: random.withUnsafeBytes { Array($0) }, in: random).isEmpty)
    }

    @Test func equalityComparesBytes() {
        let a = SecretBytes(copying: [1, 2, 3])
        #expect(a == SecretBytes(copying: [1, 2, 3]))
        #expect(a != SecretBytes(copying: [1, 2, 4]))
        #expect(a != SecretBytes(copying: [1, 2]))
        #expect(ConstantTime.equals([UInt8](), [UInt8]()))
    }

    @Test func randomSecretsDiffer() {
        let a = SecretBytes(randomCount: 32)
        let b = SecretBytes(randomCount: 32)
        #expect(a.count == 32)
        #expect(a != b)
    }

    @Test func wipeZeroesTheBytes() {
        let secret = SecretBytes(copying: [UInt8](repeating: 0xAA, count: 64))
        #expect(!secret.isWiped)
        secret.wipe()
        #expect(secret.isWiped)
        #expect(secret.withUnsafeBytes { $0.allSatisfy { $0 == 0 } })
    }

    @Test func wipedKeysAreRefusedForSealing() {
        let secret = SecretBytes(randomCount: 32)
        secret.wipe()
        #expect(throws: CofferCryptoError.keyWiped) { try EnvelopeKey(secret) }
    }

    @Test func keysOfTheWrongLengthAreRefused() {
        #expect(throws: CofferCryptoError.invalidKeyLength(expected: 32, actual: 16)) {
            try EnvelopeKey(SecretBytes(randomCount: 16))
        }
    }
}
