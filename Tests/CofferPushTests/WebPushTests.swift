import Crypto
import Foundation
import Testing

@_spi(Testing) @testable import CofferPush

@Suite("RFC 8291 Web Push message encryption")
struct WebPushTests {
    static let file = "rfc8291.txt"

    static func userAgent() throws -> WebPush.UserAgentKeys {
        try WebPush.UserAgentKeys(
            privateKey: try Vectors.bytes(file, "ua_private"),
            authSecret: try Vectors.bytes(file, "auth_secret")
        )
    }

    @Test("Appendix A: the user agent opens the example body")
    func userAgentOpensKnownAnswer() throws {
        let keys = try Self.userAgent()
        #expect(keys.subscription.publicKeyBytes == (try Vectors.bytes(Self.file, "ua_public")))
        #expect(try keys.open(try Vectors.bytes(Self.file, "body")) == (try Vectors.bytes(Self.file, "plaintext")))
    }

    @Test("Appendix A: the application server's encryption is reproduced byte for byte")
    func serverSealsKnownAnswer() throws {
        let ephemeral = try P256.KeyAgreement.PrivateKey(rawRepresentation: try Vectors.bytes(Self.file, "as_private"))
        #expect(Array(ephemeral.publicKey.x963Representation) == (try Vectors.bytes(Self.file, "as_public")))
        let subscription = try WebPush.Subscription(
            publicKey: try Vectors.bytes(Self.file, "ua_public"),
            authSecret: try Vectors.bytes(Self.file, "auth_secret")
        )
        let body = try WebPush.seal(
            try Vectors.bytes(Self.file, "plaintext"),
            to: subscription,
            padding: .none,
            ephemeralKey: ephemeral,
            salt: try Vectors.bytes(Self.file, "salt")
        )
        #expect(Array(body.prefix(WebPush.headerLength)) == (try Vectors.bytes(Self.file, "header")))
        #expect(Array(body.dropFirst(WebPush.headerLength)) == (try Vectors.bytes(Self.file, "ciphertext")))
        #expect(body == (try Vectors.bytes(Self.file, "body")))
    }

    @Test("Appendix A: the intermediate IKM matches")
    func intermediateKeyMatches() throws {
        let keys = try Self.userAgent()
        let ikm = try WebPush.inputKey(
            privateKey: keys.privateKey,
            peer: try WebPush.publicKey(try Vectors.bytes(Self.file, "as_public")),
            authSecret: keys.authSecret,
            userAgentPublicKey: try Vectors.bytes(Self.file, "ua_public"),
            serverPublicKey: try Vectors.bytes(Self.file, "as_public")
        )
        #expect(ikm.withUnsafeBytes { Array($0) } == (try Vectors.bytes(Self.file, "IKM")))
    }

    @Test(
        "Standard padding: different plaintext lengths give bodies of exactly 4096 octets",
        arguments: [0, 1, 57, 1000, 3993]
    )
    func fixedSizePadding(length: Int) throws {
        let keys = WebPush.UserAgentKeys()
        let plaintext = [UInt8](repeating: 0x61, count: length)
        let body = try WebPush.seal(plaintext, to: keys.subscription)
        #expect(body.count == WebPush.standardBodyLength)
        #expect(try keys.open(body) == plaintext)
    }

    @Test("Two different-length subjects are indistinguishable by length")
    func equalLengths() throws {
        let keys = WebPush.UserAgentKeys()
        let short = try WebPush.seal(Array("Re: hi".utf8), to: keys.subscription)
        let long = try WebPush.seal(
            Array(String(repeating: "Quarterly results and layoffs ", count: 40).utf8),
            to: keys.subscription
        )
        #expect(short.count == long.count)
        #expect(short != long)
    }

    @Test("A message longer than the padded size is refused, not sent unpadded")
    func tooLarge() throws {
        let keys = WebPush.UserAgentKeys()
        #expect(throws: CofferPushError.plaintextTooLarge(maximum: 3993, actual: 3994)) {
            try WebPush.seal([UInt8](repeating: 0, count: 3994), to: keys.subscription)
        }
        #expect(throws: CofferPushError.self) {
            try WebPush.seal([1], to: keys.subscription, padding: .bodyLength(50))
        }
    }

    @Test("Each message has a fresh ephemeral key and salt")
    func freshEphemeral() throws {
        let keys = WebPush.UserAgentKeys()
        let first = try WebPush.seal([1, 2, 3], to: keys.subscription)
        let second = try WebPush.seal([1, 2, 3], to: keys.subscription)
        #expect(first.prefix(16) != second.prefix(16))
        #expect(first[21..<86] != second[21..<86])
    }

    enum Attack: String, CaseIterable, Sendable {
        case wrongAuthSecret, wrongKey, truncatedHeader, truncatedRecord, emptyRecords, keyIDTooShort, keyIDTooLong
        case publicKeyNotOnCurve, publicKeyCompressed, twoRecords
    }

    @Test("Bad input is a typed error", arguments: Attack.allCases)
    func badInput(attack: Attack) throws {
        let keys = try Self.userAgent()
        let body = try Vectors.bytes(Self.file, "body")
        var receiver = keys
        var input = body
        let expected: CofferPushError
        switch attack {
        case .wrongAuthSecret:
            receiver = try WebPush.UserAgentKeys(
                privateKey: try Vectors.bytes(Self.file, "ua_private"),
                authSecret: [UInt8](repeating: 1, count: 16)
            )
            expected = .authenticationFailed
        case .wrongKey:
            receiver = try WebPush.UserAgentKeys(
                privateKey: P256.KeyAgreement.PrivateKey().rawRepresentation,
                authSecret: try Vectors.bytes(Self.file, "auth_secret")
            )
            expected = .authenticationFailed
        case .truncatedHeader:
            input = Array(body.prefix(60))
            expected = .truncated
        case .truncatedRecord:
            input = Array(body.dropLast(1))
            expected = .authenticationFailed
        case .emptyRecords:
            input = Array(body.prefix(WebPush.headerLength))
            expected = .truncated
        case .keyIDTooShort:
            input = Array(body[0..<20]) + [33] + Array(body[21..<54]) + Array(body[86...])
            expected = .invalidKeyID(expected: 65, actual: 33)
        case .keyIDTooLong:
            input = Array(body[0..<20]) + [66] + Array(body[21..<86]) + [0] + Array(body[86...])
            expected = .invalidKeyID(expected: 65, actual: 66)
        case .publicKeyNotOnCurve:
            input[85] ^= 0x01
            expected = .invalidPublicKey
        case .publicKeyCompressed:
            input[21] = 0x02
            expected = .invalidPublicKey
        case .twoRecords:
            // Record size 18 with a 58-octet record: the layout says several records.
            input[16...19] = [0, 0, 0, 18]
            expected = .malformedRecord("a push message must be a single record")
        }
        #expect(throws: expected) { try receiver.open(input) }
    }

    /// RFC 8188 does not authenticate the record size: any size that still makes the body one record opens it.
    @Test(
        "Every flipped octet of the example body outside the record size is refused",
        arguments: Array(0..<16) + Array(20..<144)
    )
    func flippedOctet(position: Int) throws {
        var body = try Vectors.bytes(Self.file, "body")
        body[position] ^= 0x01
        #expect(throws: CofferPushError.self) { try Self.userAgent().open(body) }
    }

    @Test(
        "A changed record size that keeps one record does not change the plaintext (RFC 8188 leaves it unauthenticated)"
    )
    func recordSizeIsNotAuthenticated() throws {
        var body = try Vectors.bytes(Self.file, "body")
        body[17] ^= 0x01
        #expect(try Self.userAgent().open(body) == (try Vectors.bytes(Self.file, "plaintext")))
    }

    @Test("Subscriptions refuse invalid points and auth secrets of the wrong length")
    func subscriptionValidation() throws {
        let good = WebPush.UserAgentKeys().subscription.publicKeyBytes
        var offCurve = good
        offCurve[64] ^= 0x01
        #expect(throws: CofferPushError.invalidPublicKey) {
            try WebPush.Subscription(publicKey: offCurve, authSecret: [UInt8](repeating: 0, count: 16))
        }
        #expect(throws: CofferPushError.invalidPublicKey) {
            try WebPush.Subscription(publicKey: good.prefix(33), authSecret: [UInt8](repeating: 0, count: 16))
        }
        #expect(throws: CofferPushError.invalidLength(what: "auth secret", expected: 16, actual: 15)) {
            try WebPush.Subscription(publicKey: good, authSecret: [UInt8](repeating: 0, count: 15))
        }
        #expect(throws: CofferPushError.invalidLength(what: "P-256 private key", expected: 32, actual: 31)) {
            try WebPush.UserAgentKeys(
                privateKey: [UInt8](repeating: 1, count: 31),
                authSecret: [UInt8](repeating: 0, count: 16)
            )
        }
    }

    @Test("Descriptions print no secret")
    func redaction() throws {
        let keys = try Self.userAgent()
        let secretHex = try Vectors.bytes(Self.file, "auth_secret").map { String(format: "%02x", $0) }.joined()
        var dumped = ""
        dump(keys.subscription, to: &dumped)
        dump(keys, to: &dumped)
        for text in [
            keys.description, String(reflecting: keys), keys.subscription.description,
            String(reflecting: keys.subscription), "\(keys)", dumped,
        ] {
            #expect(text.contains("redacted"))
            #expect(!text.contains(secretHex))
            #expect(!text.contains(try #require(Vectors.load(Self.file)["ua_private"])))
        }
    }
}
