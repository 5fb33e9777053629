import CofferCrypto
import CofferOpenPGP
import Testing

/// The engine on its own: keys round trip, tampering and bad input give typed errors and no plaintext, nothing
/// secret is printed.
@Suite struct OpenPGPTests {
    static let alice = Result { try OpenPGP.generateKey(userID: "Alice <alice@example.org>") }
    static let bob = Result { try OpenPGP.generateKey(userID: "Bob <bob@example.org>") }
    let plaintext = Array("The quarterly figures, before anyone else sees them.\n".utf8)

    @Test func keyBytesReadBack() throws {
        let alice = try Self.alice.get()
        let secret = try OpenPGPSecretKey(bytes: alice.bytes)
        #expect(secret.fingerprint == alice.fingerprint)
        #expect(secret.publicKey == alice.publicKey)
        #expect(try OpenPGPPublicKey(bytes: alice.publicKey.bytes) == alice.publicKey)
        #expect(try OpenPGPPublicKey(bytes: Array(alice.publicKey.armored.utf8)) == alice.publicKey)
        // A secret key read as a certificate gives the certificate; a certificate is no secret key.
        #expect(try OpenPGPPublicKey(bytes: alice.bytes.withUnsafeBytes { Array($0) }) == alice.publicKey)
        #expect(throws: OpenPGPError.notSecretKey(fingerprint: alice.fingerprint)) {
            try OpenPGPSecretKey(bytes: SecretBytes(copying: alice.publicKey.bytes))
        }
        // Two keys where one is expected.
        let both = alice.publicKey.bytes + (try Self.bob.get()).publicKey.bytes
        #expect(throws: OpenPGPError.wrongKeyCount(found: 2)) { try OpenPGPPublicKey(bytes: both) }
        #expect(
            try OpenPGP.importKeys(from: both).map(\.fingerprint) == [
                alice.fingerprint, try Self.bob.get().fingerprint,
            ]
        )
    }

    @Test func roundTripSignedAndEmpty() throws {
        let alice = try Self.alice.get()
        let bob = try Self.bob.get()
        for (message, armored) in [
            (plaintext, false), (plaintext, true), ([], false), (Array(repeating: 0x61, count: 300_000), true),
        ] {
            let sealed = try OpenPGP.encrypt(message, to: [bob.publicKey], signedBy: alice, armored: armored)
            let opened = try OpenPGP.decrypt(sealed, with: [bob], verifyingWith: [alice.publicKey])
            #expect(opened.plaintext == message)
            #expect(opened.signatures.map(\.status) == [.valid])
            #expect(opened.signatures.first?.signerFingerprint == alice.fingerprint)
            #expect(opened.cipher == "AES256")
        }
        let unsigned = try OpenPGP.decrypt(try OpenPGP.encrypt(plaintext, to: [bob.publicKey]), with: [bob])
        #expect(unsigned.signatures.isEmpty && !unsigned.isSignedAndVerified)
    }

    @Test func wrongKeyGivesNoPlaintext() throws {
        let alice = try Self.alice.get()
        let bob = try Self.bob.get()
        let sealed = try OpenPGP.encrypt(plaintext, to: [alice.publicKey])
        let error = #expect(throws: OpenPGPError.self) { try OpenPGP.decrypt(sealed, with: [bob]) }
        guard case .noMatchingSecretKey(let keyIDs) = error else {
            Issue.record("expected noMatchingSecretKey, got \(String(describing: error))")
            return
        }
        #expect(keyIDs.count == 1)
        #expect(throws: OpenPGPError.self) { try OpenPGP.decrypt(sealed, with: []) }
    }

    /// Every byte position of a short message's encrypted data packet: an error, never plaintext.
    @Test func flippedByteGivesNoPlaintext() throws {
        let alice = try Self.alice.get()
        let sealed = try OpenPGP.encrypt(plaintext, to: [alice.publicKey], signedBy: alice)
        var outcomes: [String: Int] = [:]
        for offset in sealed.indices {
            var tampered = sealed
            tampered[offset] ^= 0x01
            do {
                let opened = try OpenPGP.decrypt(tampered, with: [alice], verifyingWith: [alice.publicKey])
                // Only a change RNP ignores (a packet header's unused bits) may still open, and then unchanged.
                #expect(opened.plaintext == plaintext && opened.isSignedAndVerified, "offset \(offset) opened changed")
                outcomes["opened unchanged", default: 0] += 1
            } catch {
                outcomes["\(error)".prefix(40).description, default: 0] += 1
            }
        }
        print("flipped bits in \(sealed.count) bytes: \(outcomes)")
        // The last bytes are the MDC: changing them is an integrity failure.
        var tampered = sealed
        tampered[tampered.count - 1] ^= 0x80
        #expect(throws: OpenPGPError.integrityFailure) { try OpenPGP.decrypt(tampered, with: [alice]) }
        tampered = sealed
        tampered[tampered.count - 30] ^= 0x80
        #expect(throws: OpenPGPError.integrityFailure) { try OpenPGP.decrypt(tampered, with: [alice]) }
    }

    enum BadMessage: String, CaseIterable, Sendable {
        case empty, garbage, emptyArmor, armorWithoutEnd, truncatedArmored, truncatedBinary, oneByte, certificate
        case binaryCutAfterHeader, armoredBadBase64, cleartextSignedWithEscapes, armorHeaderWithEscapes

        func bytes(valid binary: [UInt8], armored: [UInt8], certificate: [UInt8]) -> [UInt8] {
            switch self {
            case .empty: []
            case .garbage: Array("Dear friend, this is not an OpenPGP message at all.\n".utf8)
            case .emptyArmor: Array("-----BEGIN PGP MESSAGE-----\n\n-----END PGP MESSAGE-----\n".utf8)
            case .armorWithoutEnd: Array(armored.prefix(while: { $0 != 0x0A })) + [0x0A, 0x0A]
            case .truncatedArmored: Array(armored.prefix(armored.count / 2))
            case .truncatedBinary: Array(binary.prefix(binary.count - 40))
            case .oneByte: [0x85]
            case .certificate: certificate
            case .binaryCutAfterHeader: Array(binary.prefix(3))
            case .cleartextSignedWithEscapes:
                Array(
                    "-----BEGIN PGP SIGNED MESSAGE-----\n\u{1B}]0;owned\u{07}\u{1B}[2J: x\n\nhello\n-----BEGIN PGP SIGNATURE-----\n\n-----END PGP SIGNATURE-----\n"
                        .utf8
                )
            case .armorHeaderWithEscapes:
                // A valid message whose armor carries a header with terminal escapes (RNP would print it).
                Array(armored.prefix { $0 != 0x0A }) + Array("\nX-Note: \u{1B}]0;owned\u{07}\u{1B}[2J".utf8)
                    + armored.drop { $0 != 0x0A }
            case .armoredBadBase64:
                Array("-----BEGIN PGP MESSAGE-----\n\n!!!!not*base64@@@@\n=AAAA\n-----END PGP MESSAGE-----\n".utf8)
            }
        }
    }

    @Test(arguments: BadMessage.allCases)
    func badMessageGivesTypedError(_ bad: BadMessage) throws {
        let alice = try Self.alice.get()
        let binary = try OpenPGP.encrypt(plaintext, to: [alice.publicKey])
        let armored = try OpenPGP.encrypt(plaintext, to: [alice.publicKey], armored: true)
        let input = bad.bytes(valid: binary, armored: armored, certificate: alice.publicKey.bytes)
        let error = #expect(throws: OpenPGPError.self) { try OpenPGP.decrypt(input, with: [alice]) }
        if case .failed = error { Issue.record("\(bad): untyped RNP failure \(String(describing: error))") }
        if bad == .cleartextSignedWithEscapes { #expect(error == .notEncrypted) }
        if bad == .armorHeaderWithEscapes { #expect(error == .malformed(what: "message")) }
    }

    enum BadKey: String, CaseIterable, Sendable {
        case empty, garbage, emptyArmor, truncatedArmored, truncatedBinary, message, signature, headerWithEscapes

        func bytes(key: OpenPGPSecretKey, message: [UInt8], signature: [UInt8]) -> [UInt8] {
            let armored = Array(key.publicKey.armored.utf8)
            return switch self {
            case .empty: []
            case .garbage: Array("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBad alice@example.org\n".utf8)
            case .emptyArmor: Array("-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n-----END PGP PUBLIC KEY BLOCK-----\n".utf8)
            case .truncatedArmored: Array(armored.prefix(armored.count / 2))
            case .truncatedBinary: Array(key.publicKey.bytes.prefix(key.publicKey.bytes.count / 3))
            case .message: message
            case .signature: signature
            case .headerWithEscapes:
                Array("-----BEGIN PGP PUBLIC KEY BLOCK-----\nComment: \u{1B}[31m".utf8) + armored.drop { $0 != 0x0A }
            }
        }
    }

    @Test(arguments: BadKey.allCases)
    func badKeyGivesTypedError(_ bad: BadKey) throws {
        let alice = try Self.alice.get()
        let input = bad.bytes(
            key: alice,
            message: try OpenPGP.encrypt(plaintext, to: [alice.publicKey], armored: true),
            signature: try OpenPGP.signDetached(plaintext, with: alice)
        )
        for attempt in [
            { _ = try OpenPGP.importKeys(from: input) },
            { _ = try OpenPGPPublicKey(bytes: input) },
            { _ = try OpenPGPSecretKey(bytes: SecretBytes(copying: input)) },
        ] as [() throws -> Void] {
            let error = #expect(throws: OpenPGPError.self) { try attempt() }
            if case .failed = error { Issue.record("\(bad): untyped RNP failure \(String(describing: error))") }
        }
    }

    @Test func detachedSignatureFailsOnChangedMessage() throws {
        let alice = try Self.alice.get()
        let signature = try OpenPGP.signDetached(plaintext, with: alice, armored: false)
        let good = try OpenPGP.verifyDetached(plaintext, signature: signature, publicKeys: [alice.publicKey])
        #expect(good.map(\.status) == [.valid])
        #expect(good.first?.signerFingerprint == alice.fingerprint)
        var changed = plaintext
        changed[3] ^= 0x20
        #expect(
            try OpenPGP.verifyDetached(changed, signature: signature, publicKeys: [alice.publicKey]).map(\.status)
                == [.invalid]
        )
        #expect(
            try OpenPGP.verifyDetached(plaintext, signature: signature, publicKeys: []).map(\.status) == [.unknownKey]
        )
        let bob = try Self.bob.get()
        #expect(
            try OpenPGP.verifyDetached(plaintext, signature: signature, publicKeys: [bob.publicKey]).map(\.status)
                == [.unknownKey]
        )
        #expect(throws: OpenPGPError.malformed(what: "signature")) {
            try OpenPGP.verifyDetached(
                plaintext,
                signature: Array("not a signature".utf8),
                publicKeys: [alice.publicKey]
            )
        }
        #expect(throws: OpenPGPError.malformed(what: "signature")) {
            try OpenPGP.verifyDetached(plaintext, signature: [], publicKeys: [alice.publicKey])
        }
    }

    @Test(arguments: [
        ("", "it is empty"), ("Alice\n<alice@example.org>", "control"), ("Alice\u{0}", "control"),
        (String(repeating: "a", count: 129), "128"), ("Zoë " + String(repeating: "ü", count: 62), "128"),
    ])
    func invalidUserIDIsRefused(userID: String, reason: String) {
        let error = #expect(throws: OpenPGPError.self) { try OpenPGP.generateKey(userID: userID) }
        guard case .invalidUserID(let why) = error else {
            Issue.record("expected invalidUserID, got \(String(describing: error))")
            return
        }
        #expect(why.contains(reason))
    }

    /// RNP's longest user id, in UTF-8 bytes, round trips unchanged.
    @Test func longestUserIDIsAccepted() throws {
        let userID = "Zoë Ünïcode <" + String(repeating: "z", count: 128 - 29) + "@example.org>"
        #expect(userID.utf8.count == 128)
        let key = try OpenPGP.generateKey(userID: userID)
        #expect(key.publicKey.userIDs == [userID])
        #expect(try OpenPGPPublicKey(bytes: key.publicKey.bytes).userIDs == [userID])
    }

    @Test func noRecipientIsRefused() {
        #expect(throws: OpenPGPError.self) { try OpenPGP.encrypt(plaintext, to: []) }
    }

    /// The secret key and the plaintext print as a fingerprint and counts only: `description`, `debugDescription`,
    /// string interpolation, `String(reflecting:)` and `dump` (one line, no children).
    @Test func secretsAreNeverPrinted() throws {
        let alice = try Self.alice.get()
        let expected = "OpenPGPSecretKey(\(alice.fingerprint), <redacted>)"
        var dumped = ""
        dump(alice, to: &dumped)
        #expect(dumped == "- \(expected)\n")
        for text in [alice.description, alice.debugDescription, "\(alice)", String(reflecting: alice)] {
            #expect(text == expected)
        }
        #expect(alice.bytes.description == "SecretBytes(<redacted>)")

        let opened = try OpenPGP.decrypt(try OpenPGP.encrypt(plaintext, to: [alice.publicKey]), with: [alice])
        var dumpedMessage = ""
        dump(opened, to: &dumpedMessage)
        #expect(dumpedMessage == "- \(opened.description)\n")
        for text in [opened.description, dumpedMessage, String(reflecting: opened)] {
            #expect(!text.contains("quarterly"))
            #expect(text.contains("\(plaintext.count) bytes"))
        }
    }
}
