import CofferCrypto
import CofferTesting
import Foundation
import Testing

@Suite struct EnvelopeTests {
    let key = try! EnvelopeKey(SecretBytes(randomCount: 32))
    let context: EnvelopeContext = ["store", "messages", "subject", "42"]

    @Test(arguments: EnvelopeAlgorithm.allCases, [0, 1, 1024, 65_536])
    func sealThenOpenRoundTrips(algorithm: EnvelopeAlgorithm, size: Int) throws {
        let plaintext = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let sealed = try Envelope.seal(plaintext, with: key, context: context, algorithm: algorithm)
        #expect(sealed.count == plaintext.count + Envelope.overhead)
        #expect(try Envelope.open(sealed, with: key, context: context) == plaintext)
    }

    @Test func noncesAreFreshSoEqualPlaintextsDiffer() throws {
        let a = try Envelope.seal([1, 2, 3], with: key, context: context)
        let b = try Envelope.seal([1, 2, 3], with: key, context: context)
        #expect(a != b)
    }

    @Test func anotherKeyIsWrongKey() throws {
        let sealed = try Envelope.seal([1, 2, 3], with: key, context: context)
        let other = try EnvelopeKey(SecretBytes(randomCount: 32))
        #expect(throws: CofferCryptoError.wrongKey) { try Envelope.open(sealed, with: other, context: context) }
    }

    @Test(arguments: [
        EnvelopeContext(["store", "messages", "subject", "43"]),
        EnvelopeContext(["store", "messages", "body", "42"]),
        EnvelopeContext(["store", "messages", "subject42"]),
        EnvelopeContext([]),
    ])
    func anotherPlaceIsWrongContext(other: EnvelopeContext) throws {
        let sealed = try Envelope.seal([1, 2, 3], with: key, context: context)
        #expect(throws: CofferCryptoError.wrongContext) { try Envelope.open(sealed, with: key, context: other) }
    }

    @Test func contextPartsAreUnambiguous() {
        #expect(EnvelopeContext(["ab", "c"]) != EnvelopeContext(["a", "bc"]))
        #expect(EnvelopeContext(["a"]).appending("b") == EnvelopeContext(["a", "b"]))
    }

    @Test(arguments: EnvelopeAlgorithm.allCases)
    func everyFlippedBitIsDetected(algorithm: EnvelopeAlgorithm) throws {
        let sealed = try Envelope.seal(Array("secret text".utf8), with: key, context: context, algorithm: algorithm)
        for bit in 0..<(sealed.count * 8) {
            var tampered = sealed
            tampered[bit / 8] ^= 1 << (bit % 8)
            #expect(throws: CofferCryptoError.self) { try Envelope.open(tampered, with: key, context: context) }
        }
    }

    @Test func everyTruncationIsDetected() throws {
        let sealed = try Envelope.seal(Array("secret text".utf8), with: key, context: context)
        for length in 0..<sealed.count {
            #expect(throws: CofferCryptoError.self) {
                try Envelope.open(Array(sealed.prefix(length)), with: key, context: context)
            }
        }
        #expect(throws: CofferCryptoError.truncated) {
            try Envelope.open(Array(sealed.prefix(Envelope.overhead - 1)), with: key, context: context)
        }
        #expect(throws: CofferCryptoError.authenticationFailed) {
            try Envelope.open(Array(sealed.dropLast()), with: key, context: context)
        }
    }

    @Test func unknownVersionAlgorithmAndMagicAreTyped() throws {
        let sealed = try Envelope.seal([9], with: key, context: context)
        var version = sealed
        version[4] = 2
        #expect(throws: CofferCryptoError.unsupportedVersion(2)) {
            try Envelope.open(version, with: key, context: context)
        }
        var algorithm = sealed
        algorithm[5] = 9
        #expect(throws: CofferCryptoError.unsupportedAlgorithm(9)) {
            try Envelope.open(algorithm, with: key, context: context)
        }
        var magic = sealed
        magic[0] = 0
        #expect(throws: CofferCryptoError.notCofferFormat) { try Envelope.open(magic, with: key, context: context) }
        #expect(throws: CofferCryptoError.truncated) { try Envelope.open([], with: key, context: context) }
    }

    @Test func openSecretReturnsRedactedBytes() throws {
        let sealed = try Envelope.seal([7, 7, 7], with: key, context: context)
        let secret = try Envelope.openSecret(sealed, with: key, context: context)
        #expect(secret == SecretBytes(copying: [7, 7, 7]))
    }

    @Test func errorsFromRealFailuresCarryNoPlaintextKeyOrContext() throws {
        let rootBytes = (0..<32).map { UInt8(0xA0 &+ $0) }
        let key = try EnvelopeKey(SecretBytes(copying: rootBytes))
        let plaintext = Array("CANARY-PLAINTEXT-4711".utf8)
        let context: EnvelopeContext = ["store", "messages", "CANARY-CONTEXT-0815", "42"]
        let sealed = try Envelope.seal(plaintext, with: key, context: context)
        var flipped = sealed
        flipped[sealed.count - 1] ^= 1
        var version = sealed
        version[4] = 9
        let other = try EnvelopeKey(SecretBytes(randomCount: 32))
        let failures: [(CofferCryptoError, () throws(CofferCryptoError) -> [UInt8])] = [
            (
                .authenticationFailed,
                { () throws(CofferCryptoError) in try Envelope.open(flipped, with: key, context: context) }
            ),
            (.wrongKey, { () throws(CofferCryptoError) in try Envelope.open(sealed, with: other, context: context) }),
            (.wrongContext, { () throws(CofferCryptoError) in try Envelope.open(sealed, with: key, context: ["x"]) }),
            (
                .unsupportedVersion(9),
                { () throws(CofferCryptoError) in try Envelope.open(version, with: key, context: context) }
            ),
            (
                .truncated,
                { () throws(CofferCryptoError) in
                    try Envelope.open(Array(sealed.prefix(40)), with: key, context: context)
                }
            ),
        ]
        for (expected, attempt) in failures {
            do throws(CofferCryptoError) {
                _ = try attempt()
                Issue.record("\(expected) was not thrown")
            } catch {
                #expect(error == expected)
                #expect(error.description.hasSuffix("."))
                for secret in [plaintext, Array("CANARY-CONTEXT-0815".utf8), rootBytes, context.encoded] {
                    #expect(Redaction.leaks(of: secret, in: error).isEmpty, "\(expected)")
                }
            }
        }
        // The key itself prints only its public id.
        #expect(Redaction.leaks(of: rootBytes, in: key).isEmpty)
        #expect(Redaction.leaks(of: context.encoded, in: context).isEmpty)
        #expect(String(describing: key) == "EnvelopeKey(id: \(key.id.hexString))")
    }

    // Known answers computed independently by Fixtures/make_vectors.py (Python `cryptography`) from FORMAT.md.
    @Test func matchesKnownAnswerVectors() throws {
        let vectors = try KnownAnswers.load()
        #expect(vectors.envelope.count == 6)
        for vector in vectors.envelope {
            let key = try EnvelopeKey(SecretBytes(copying: [UInt8](hexString: vector.key)!))
            let context = EnvelopeContext(vector.context)
            let plaintext = KnownAnswers.pattern(vector.plaintextLength, small: vector.plaintextLength < 100)
            let algorithm = try #require(EnvelopeAlgorithm(rawValue: vector.algorithm))
            let sealed = try plaintext.withUnsafeBytes { raw in
                try Envelope.seal(
                    raw,
                    with: key,
                    context: context,
                    algorithm: algorithm,
                    nonce: [UInt8](hexString: vector.nonce)!
                )
            }
            #expect(sealed.hexString == vector.envelope)
            #expect(try Envelope.open([UInt8](hexString: vector.envelope)!, with: key, context: context) == plaintext)
        }
    }
}

/// The vectors in `Fixtures/vectors.json`.
struct KnownAnswers: Decodable {
    struct EnvelopeVector: Decodable {
        var key: String
        var context: [String]
        var algorithm: UInt8
        var nonce: String
        var plaintextLength: Int
        var envelope: String
    }

    struct StreamVector: Decodable {
        var key: String
        var context: [String]
        var algorithm: UInt8
        var salt: String
        var plaintextLength: Int
        var sha256: String
        var length: Int
        var stream: String?
    }

    struct PINVector: Decodable {
        var pin: String
        var salt: String
        var pepper: String
        var logN: UInt8
        var r: UInt32
        var p: UInt32
        var kek: String
    }

    var envelope: [EnvelopeVector]
    var stream: [StreamVector]
    var pinKDF: [PINVector]

    static func load() throws -> KnownAnswers {
        try Fixtures.json(KnownAnswers.self, "Fixtures/vectors.json")
    }

    /// The generator's plaintexts: `b""`, `b"hello, coffer"` and `i % 251` patterns.
    static func pattern(_ count: Int, small: Bool = false) -> [UInt8] {
        if small && count == 13 { return Array("hello, coffer".utf8) }
        return (0..<count).map { UInt8($0 % 251) }
    }
}
