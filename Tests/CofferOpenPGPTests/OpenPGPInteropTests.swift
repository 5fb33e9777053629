import CofferCrypto
import CofferOpenPGP
import Foundation
import Testing

/// Interop both ways with GnuPG and Sequoia: keys, encrypted and signed messages, detached signatures.
@Suite struct OpenPGPInteropTests {
    let plaintext = Array("Meet at the usual place at nine.\r\nThe code word is larkspur.\r\n".utf8)

    @Test func generatedKeyImportsIntoGnuPG() throws {
        let tools = try InteropTools()
        let key = try OpenPGP.generateKey(userID: "Alice Example <alice@example.org>")
        #expect(key.fingerprint.count == 40)
        #expect(key.publicKey.userIDs == ["Alice Example <alice@example.org>"])
        #expect(key.publicKey.armored.hasPrefix("-----BEGIN PGP PUBLIC KEY BLOCK-----"))

        try tools.gpg(["--import"], input: Array(key.publicKey.armored.utf8))
        let listing = try tools.gpg(["--with-colons", "--list-keys", key.fingerprint]).text
        let records = listing.split(separator: "\n").map { $0.split(separator: ":", omittingEmptySubsequences: false) }
        // pub: algorithm 22 (EdDSA) on ed25519, sign + certify; sub: algorithm 18 (ECDH) on cv25519, encrypt.
        let primary = try #require(records.first { $0[0] == "pub" })
        #expect(primary[3] == "22" && primary[11].contains("s") && primary[11].contains("c"))
        #expect(primary[1] != "e" && primary[1] != "r" && primary[1] != "i")
        let subkey = try #require(records.first { $0[0] == "sub" })
        #expect(subkey[3] == "18" && subkey[11] == "e" && subkey[16] == "cv25519")
        #expect(records.contains { $0[0] == "fpr" && $0[9] == Substring(key.fingerprint) })

        // The secret key too: gpg takes it without a passphrase and lists it as a secret key.
        let secret = key.bytes.withUnsafeBytes { Array($0) }
        try tools.gpg(["--import"], input: secret)
        let secrets = try tools.gpg(["--with-colons", "--list-secret-keys", key.fingerprint]).text
        #expect(secrets.contains("sec:") && secrets.contains("ssb:"))
    }

    @Test func generatedKeyImportsIntoSequoia() throws {
        let tools = try InteropTools()
        let key = try OpenPGP.generateKey(userID: "Alice Example <alice@example.org>")
        let cert = try tools.sq(["inspect"], input: Array(key.publicKey.armored.utf8)).text
        #expect(cert.contains(key.fingerprint))
        #expect(cert.contains("EdDSA") && cert.contains("ECDH"))
        #expect(cert.contains("Alice Example <alice@example.org>"))
        let secret = try tools.sq(["inspect"], input: key.bytes.withUnsafeBytes { Array($0) }).text
        #expect(secret.contains("Transferable Secret Key"))
        #expect(secret.contains("Unencrypted"))
        #expect(!secret.contains("Encrypted\n"))
    }

    @Test func gnupgEncryptsAndSignsToUs() throws {
        let tools = try InteropTools()
        let ours = try OpenPGP.generateKey(userID: "Alice <alice@example.org>")
        let gpgFingerprint = try tools.gpgGenerateKey(userID: "Bob <bob@example.org>")
        try tools.gpg(["--import"], input: Array(ours.publicKey.armored.utf8))
        let message = try tools.gpg(
            ["--armor", "--encrypt", "--sign", "--recipient", ours.fingerprint, "--local-user", gpgFingerprint],
            input: plaintext
        ).output
        let bob = try OpenPGPPublicKey(bytes: try tools.gpg(["--export", gpgFingerprint]).output)
        #expect(bob.fingerprint == gpgFingerprint)

        let opened = try OpenPGP.decrypt(message, with: [ours], verifyingWith: [bob])
        #expect(opened.plaintext == plaintext)
        #expect(opened.protection == .mdc)
        #expect(opened.signatures.count == 1)
        #expect(opened.signatures.first?.status == .valid)
        #expect(opened.signatures.first?.signerFingerprint == gpgFingerprint)
        #expect(opened.isSignedAndVerified)

        // Without Bob's certificate the message still opens, and the signature says why it cannot be checked.
        let unverified = try OpenPGP.decrypt(message, with: [ours])
        #expect(unverified.plaintext == plaintext)
        #expect(unverified.signatures.map(\.status) == [.unknownKey])
        #expect(!unverified.isSignedAndVerified)
    }

    @Test func sequoiaEncryptsAndSignsToUs() throws {
        let tools = try InteropTools()
        let ours = try OpenPGP.generateKey(userID: "Alice <alice@example.org>")
        let (sqKey, sqCert) = try tools.sqGenerateKey(userID: "Carol <carol@example.org>")
        let ourCert = try tools.file(ours.publicKey.bytes, name: "alice.pgp")
        let message = try tools.sq(
            ["encrypt", "--recipient-cert", ourCert, "--signer-key", sqKey],
            input: plaintext
        ).output
        let carol = try OpenPGPPublicKey(bytes: try [UInt8](Data(contentsOf: URL(fileURLWithPath: sqCert))))

        let opened = try OpenPGP.decrypt(message, with: [ours], verifyingWith: [carol])
        #expect(opened.plaintext == plaintext)
        #expect(opened.signatures.map(\.status) == [.valid])
        #expect(opened.signatures.first?.signerFingerprint == carol.fingerprint)
    }

    @Test(arguments: [false, true])
    func weEncryptAndSignForGnuPG(armored: Bool) throws {
        let tools = try InteropTools()
        let ours = try OpenPGP.generateKey(userID: "Alice <alice@example.org>")
        let gpgFingerprint = try tools.gpgGenerateKey(userID: "Bob <bob@example.org>")
        let bob = try OpenPGPPublicKey(bytes: try tools.gpg(["--export", "--armor", gpgFingerprint]).output)
        try tools.gpg(["--import"], input: Array(ours.publicKey.armored.utf8))

        let message = try OpenPGP.encrypt(plaintext, to: [bob, ours.publicKey], signedBy: ours, armored: armored)
        #expect(message.starts(with: Array("-----BEGIN PGP MESSAGE-----".utf8)) == armored)
        let decrypted = try tools.gpg(["--status-fd", "2", "--decrypt"], input: message)
        #expect(decrypted.output == plaintext)
        #expect(decrypted.errors.contains("[GNUPG:] GOODSIG"))
        #expect(decrypted.errors.contains("[GNUPG:] VALIDSIG"))
        #expect(decrypted.errors.contains(ours.fingerprint))
        #expect(decrypted.errors.contains("[GNUPG:] DECRYPTION_OKAY"))
        #expect(decrypted.errors.contains("[GNUPG:] GOODMDC"))

        // Encrypted to our own key too: we read what we sent.
        #expect(try OpenPGP.decrypt(message, with: [ours]).plaintext == plaintext)
    }

    @Test func weEncryptAndSignForSequoia() throws {
        let tools = try InteropTools()
        let ours = try OpenPGP.generateKey(userID: "Alice <alice@example.org>")
        let (sqKey, sqCert) = try tools.sqGenerateKey(userID: "Carol <carol@example.org>")
        let carol = try OpenPGPPublicKey(bytes: try [UInt8](Data(contentsOf: URL(fileURLWithPath: sqCert))))
        let ourCert = try tools.file(Array(ours.publicKey.armored.utf8), name: "alice.asc")

        let message = try OpenPGP.encrypt(plaintext, to: [carol], signedBy: ours, armored: true)
        // With --signer-cert, sq fails unless a signature by that certificate verifies.
        let decrypted = try tools.sq(["decrypt", "--recipient-key", sqKey, "--signer-cert", ourCert], input: message)
        #expect(decrypted.output == plaintext)
        #expect(decrypted.errors.contains("Good signature"))
    }

    @Test func protectedGnuPGKeyImportsWithItsPassphrase() throws {
        let tools = try InteropTools()
        let passphrase = "correct horse battery staple 7"
        let fingerprint = try tools.gpgGenerateKey(userID: "Dave <dave@example.org>", passphrase: passphrase)
        let exported = try tools.gpg(
            ["--passphrase", passphrase, "--armor", "--export-secret-keys", fingerprint]
        ).output
        let message = try tools.gpg(["--encrypt", "--recipient", fingerprint], input: plaintext).output

        // A wrong passphrase: a typed error that never repeats it.
        let wrong = "Tr0ub4dor&3 not it"
        var asked = 0
        let error = #expect(throws: OpenPGPError.self) {
            try OpenPGP.importKeys(from: exported) {
                asked += 1
                return SecretBytes(copying: Array(wrong.utf8))
            }
        }
        #expect(error == .wrongPassphrase(fingerprint: fingerprint))
        #expect(asked == 1)
        #expect(error.map { !"\($0)".contains(wrong) && !"\($0)".contains(passphrase) } == true)

        // No passphrase given.
        #expect(throws: OpenPGPError.passphraseRequired(fingerprint: fingerprint)) {
            try OpenPGP.importKeys(from: exported) { nil }
        }

        // The right one, asked once for the primary key and its subkey: the key comes out unprotected and works.
        asked = 0
        let imports = try OpenPGP.importKeys(from: exported) {
            asked += 1
            return SecretBytes(copying: Array(passphrase.utf8))
        }
        #expect(asked == 1)
        let imported = try #require(imports.first)
        #expect(imports.count == 1)
        #expect(imported.fingerprint == fingerprint)
        #expect(imported.userIDs == ["Dave <dave@example.org>"])
        #expect(imported.isSecret && imported.wasProtected)
        let secretKey = try #require(imported.secretKey)
        #expect(try OpenPGP.decrypt(message, with: [secretKey]).plaintext == plaintext)
        // The bytes Coffer keeps carry no passphrase protection: they read back as an unprotected key.
        #expect(try OpenPGPSecretKey(bytes: secretKey.bytes).fingerprint == fingerprint)
        let inspected = try tools.sq(["inspect"], input: secretKey.bytes.withUnsafeBytes { Array($0) }).text
        #expect(inspected.contains("Unencrypted") && !inspected.contains("Encrypted\n"))

        // The protected key itself is refused where an unprotected one is required.
        #expect(throws: OpenPGPError.protectedKey(fingerprint: fingerprint)) {
            try OpenPGPSecretKey(bytes: SecretBytes(copying: exported))
        }
    }

    /// `gpg --export-secret-subkeys` leaves a stub in place of the primary secret key: the subkey's secret is
    /// imported and decrypts, the stub counts as no secret.
    @Test func gnupgSubkeysOnlyExportImports() throws {
        let tools = try InteropTools()
        let fingerprint = try tools.gpgGenerateKey(userID: "Erin <erin@example.org>")
        let exported = try tools.gpg(["--export-secret-subkeys", fingerprint]).output
        let message = try tools.gpg(["--encrypt", "--recipient", fingerprint], input: plaintext).output
        let imported = try #require(try OpenPGP.importKeys(from: SecretBytes(copying: exported)).first)
        #expect(imported.fingerprint == fingerprint && imported.isSecret && !imported.wasProtected)
        let secretKey = try #require(imported.secretKey)
        #expect(try OpenPGP.decrypt(message, with: [secretKey]).plaintext == plaintext)
        #expect(try OpenPGPSecretKey(bytes: secretKey.bytes).fingerprint == fingerprint)
        // The stub cannot sign.
        #expect(throws: OpenPGPError.noSigningKey(fingerprint: fingerprint)) {
            try OpenPGP.signDetached(plaintext, with: secretKey)
        }
    }

    /// A certificate that expired (made in 2020, valid for a day) cannot be encrypted to.
    @Test func expiredEncryptionKeyIsRefused() throws {
        let tools = try InteropTools()
        try tools.gpg([
            "--faked-system-time", "20200101T000000!", "--passphrase", "", "--quick-gen-key",
            "Frank <frank@example.org>", "future-default", "default", "1d",
        ])
        let exported = try tools.gpg(["--export", "frank@example.org"]).output
        let frank = try OpenPGPPublicKey(bytes: exported)
        let fingerprint = frank.fingerprint
        #expect(throws: OpenPGPError.noEncryptionKey(fingerprint: fingerprint)) {
            try OpenPGP.encrypt(plaintext, to: [frank])
        }
    }

    /// A user id is listed only with a valid self-signature: Alice's user id and her signature over it, spliced into
    /// Mallory's certificate (with `sq packet split` and `join`), or Alice's user id with no signature at all, name
    /// only Mallory.
    @Test(arguments: [true, false])
    func forgedUserIDIsNotListed(withAlicesSignature: Bool) throws {
        let tools = try InteropTools()
        let alice = try OpenPGP.generateKey(userID: "Alice <alice@example.org>")
        let mallory = try OpenPGP.generateKey(userID: "Mallory <mallory@example.org>")
        let a = tools.newPath("alice-")
        let m = tools.newPath("mallory-")
        try tools.sq(["packet", "split", "--prefix", a, try tools.file(alice.publicKey.bytes)])
        try tools.sq(["packet", "split", "--prefix", m, try tools.file(mallory.publicKey.bytes)])
        let spliced =
            ["\(m)0--PublicKey", "\(a)1--UserID"] + (withAlicesSignature ? ["\(a)2--Signature"] : [])
            + ["\(m)1--UserID", "\(m)2--Signature", "\(m)3--PublicSubkey", "\(m)4--Signature"]
        let forged = try tools.sq(["packet", "join", "--binary"] + spliced).output
        #expect(forged.count > mallory.publicKey.bytes.count)

        let certificate = try OpenPGPPublicKey(bytes: forged)
        #expect(certificate.fingerprint == mallory.fingerprint)
        #expect(certificate.userIDs == ["Mallory <mallory@example.org>"])
        #expect(try OpenPGP.importKeys(from: forged).map(\.userIDs) == [["Mallory <mallory@example.org>"]])
    }

    /// Mallory's encryption subkey with its binding signature, spliced into Alice's certificate, is never encrypted
    /// to: with Alice's own subkey gone there is no encryption key; with it there, only Alice can read the message.
    @Test func splicedSubkeyIsNeverEncryptedTo() throws {
        let tools = try InteropTools()
        let alice = try OpenPGP.generateKey(userID: "Alice <alice@example.org>")
        let mallory = try OpenPGP.generateKey(userID: "Mallory <mallory@example.org>")
        let a = tools.newPath("alice-")
        let m = tools.newPath("mallory-")
        try tools.sq(["packet", "split", "--prefix", a, try tools.file(alice.publicKey.bytes)])
        try tools.sq(["packet", "split", "--prefix", m, try tools.file(mallory.publicKey.bytes)])
        let head = ["\(a)0--PublicKey", "\(a)1--UserID", "\(a)2--Signature"]
        let mallorys = ["\(m)3--PublicSubkey", "\(m)4--Signature"]
        let only = try OpenPGPPublicKey(bytes: try tools.sq(["packet", "join", "--binary"] + head + mallorys).output)
        #expect(only.fingerprint == alice.fingerprint)
        #expect(throws: OpenPGPError.noEncryptionKey(fingerprint: alice.fingerprint)) {
            try OpenPGP.encrypt(plaintext, to: [only])
        }

        let both = try OpenPGPPublicKey(
            bytes: try tools.sq(
                ["packet", "join", "--binary"] + head + mallorys + ["\(a)3--PublicSubkey", "\(a)4--Signature"]
            ).output
        )
        let message = try OpenPGP.encrypt(plaintext, to: [both])
        #expect(try OpenPGP.decrypt(message, with: [alice]).plaintext == plaintext)
        #expect(throws: OpenPGPError.self) { try OpenPGP.decrypt(message, with: [mallory]) }
    }

    /// A signature by a key its owner has since revoked: with no reason given or the key compromised, no signature
    /// it made is valid, even one it made before the revocation; a retired or superseded key's signatures made
    /// before are still good, those made after are not. The key is made on 1 January 2020, signs on the 2nd (and
    /// the 4th), and `sq` revokes it with the reason on the 3rd; so the dates never depend on when the test runs.
    @Test(arguments: [
        ("unspecified", false), ("compromised", false), ("retired", true), ("superseded", true),
    ])
    func signatureByRevokedKey(reason: String, earlierSignatureStaysValid: Bool) throws {
        let tools = try InteropTools()
        // Alice's key is made on the same day, so that gpg will encrypt to it on the 2nd.
        for userID in ["Alice <alice@example.org>", "Bob <bob@example.org>"] {
            try tools.gpg([
                "--faked-system-time", "20200101T000000!", "--passphrase", "", "--quick-gen-key", userID,
                "future-default", "default", "never",
            ])
        }
        let ours = try OpenPGPSecretKey(
            bytes: SecretBytes(
                copying: try tools.gpg(["--passphrase", "", "--export-secret-keys", "alice@example.org"]).output
            )
        )
        func signed(on day: String) throws -> (message: [UInt8], detached: [UInt8]) {
            let time = ["--faked-system-time", "202001\(day)T000000!", "--local-user", "bob@example.org"]
            let message = try tools.gpg(
                time + ["--encrypt", "--sign", "--recipient", "alice@example.org"],
                input: plaintext
            )
            return (message.output, try tools.gpg(time + ["--detach-sign"], input: plaintext).output)
        }
        let before = try signed(on: "02")
        let after = try signed(on: "04")
        let secret = try tools.file(
            tools.gpg(["--passphrase", "", "--export-secret-keys", "bob@example.org"]).output
        )
        let revocation = try tools.sq([
            "revoke", "certificate", "--certificate", secret, "--time", "2020-01-03T00:00:00Z", reason, "a test",
        ])
        try tools.gpg(["--import"], input: revocation.output)
        let revoked = try OpenPGPPublicKey(bytes: try tools.gpg(["--export", "bob@example.org"]).output)

        for (signature, expected) in [
            (before, earlierSignatureStaysValid ? OpenPGPSignature.Status.valid : .revoked), (after, .revoked),
        ] {
            let opened = try OpenPGP.decrypt(signature.message, with: [ours], verifyingWith: [revoked])
            #expect(opened.plaintext == plaintext)
            #expect(opened.signatures.map(\.status) == [expected])
            #expect(opened.signatures.first?.signerFingerprint == revoked.fingerprint)
            #expect(opened.isSignedAndVerified == (expected == .valid))
            let detached = try OpenPGP.verifyDetached(plaintext, signature: signature.detached, publicKeys: [revoked])
            #expect(detached.map(\.status) == [expected])
        }
    }

    @Test func gnupgPublicKeyImportsAsCertificate() throws {
        let tools = try InteropTools()
        let fingerprint = try tools.gpgGenerateKey(userID: "Bob <bob@example.org>")
        let imports = try OpenPGP.importKeys(from: try tools.gpg(["--export", "--armor", fingerprint]).output)
        #expect(imports.map(\.fingerprint) == [fingerprint])
        #expect(imports.first?.isSecret == false && imports.first?.wasProtected == false)
        #expect(imports.first?.userIDs == ["Bob <bob@example.org>"])
    }

    @Test func detachedSignaturesInteroperate() throws {
        let tools = try InteropTools()
        let ours = try OpenPGP.generateKey(userID: "Alice <alice@example.org>")
        let gpgFingerprint = try tools.gpgGenerateKey(userID: "Bob <bob@example.org>")
        let bob = try OpenPGPPublicKey(bytes: try tools.gpg(["--export", gpgFingerprint]).output)
        try tools.gpg(["--import"], input: Array(ours.publicKey.armored.utf8))

        // Ours, checked by gpg and by sq.
        let signature = try OpenPGP.signDetached(plaintext, with: ours)
        #expect(signature.starts(with: Array("-----BEGIN PGP SIGNATURE-----".utf8)))
        let signatureFile = try tools.file(signature, name: "sig.asc")
        let dataFile = try tools.file(plaintext, name: "data.txt")
        let checked = try tools.gpg(["--status-fd", "2", "--verify", signatureFile, dataFile])
        #expect(checked.errors.contains("[GNUPG:] VALIDSIG \(ours.fingerprint)"))
        let ourCert = try tools.file(ours.publicKey.bytes, name: "alice.pgp")
        try tools.sq(["verify", "--signer-cert", ourCert, "--detached", signatureFile, dataFile])
        let changedFile = try tools.file(plaintext + [0x21], name: "changed.txt")
        #expect(try tools.gpg(["--verify", signatureFile, changedFile], expectSuccess: false).status != 0)

        // gpg's, checked by us.
        let theirs = try tools.gpg(["--detach-sign", "--local-user", gpgFingerprint], input: plaintext).output
        let verified = try OpenPGP.verifyDetached(plaintext, signature: theirs, publicKeys: [bob])
        #expect(verified.map(\.status) == [.valid])
        #expect(verified.first?.signerFingerprint == gpgFingerprint)
    }

    @Test func legacyMessageWithoutIntegrityProtectionGivesNoPlaintext() throws {
        let tools = try InteropTools()
        let ours = try OpenPGP.generateKey(userID: "Alice <alice@example.org>")
        try tools.gpg(["--import"], input: Array(ours.publicKey.armored.utf8))
        // --rfc2440 makes GnuPG write a symmetrically encrypted data packet without an MDC (the EFAIL malleable case).
        let legacy = try tools.gpg(
            ["--rfc2440", "--cipher-algo", "AES256", "--encrypt", "--recipient", ours.fingerprint],
            input: plaintext
        ).output
        let packets = try tools.gpg(["--list-packets"], input: legacy, expectSuccess: false).text
        try #require(
            packets.contains("encrypted data packet") && !packets.contains("mdc_method: 2"),
            "gpg did not write a message without MDC: \(packets)"
        )
        #expect(throws: OpenPGPError.integrityFailure) { try OpenPGP.decrypt(legacy, with: [ours]) }
    }

    /// A message encrypted to a password only (`gpg --symmetric`) names no key of ours: no passphrase is asked for it.
    @Test func passwordOnlyMessageIsNotForOurKeys() throws {
        let tools = try InteropTools()
        let ours = try OpenPGP.generateKey(userID: "Alice <alice@example.org>")
        let message = try tools.gpg(["--passphrase", "hunter2", "--symmetric"], input: plaintext).output
        #expect(throws: OpenPGPError.noMatchingSecretKey(keyIDs: [])) { try OpenPGP.decrypt(message, with: [ours]) }
    }

    @Test func signedOnlyMessageIsNotDecrypted() throws {
        let tools = try InteropTools()
        let ours = try OpenPGP.generateKey(userID: "Alice <alice@example.org>")
        let gpgFingerprint = try tools.gpgGenerateKey(userID: "Bob <bob@example.org>")
        let signedOnly = try tools.gpg(["--sign", "--local-user", gpgFingerprint], input: plaintext).output
        #expect(throws: OpenPGPError.notEncrypted) { try OpenPGP.decrypt(signedOnly, with: [ours]) }
    }

    @Test func compressedBombStopsAtTheLimit() throws {
        let tools = try InteropTools()
        let ours = try OpenPGP.generateKey(userID: "Alice <alice@example.org>")
        try tools.gpg(["--import"], input: Array(ours.publicKey.armored.utf8))
        let zeros = [UInt8](repeating: 0, count: 4 << 20)
        let bomb = try tools.gpg(
            ["--compress-algo", "zlib", "-z", "9", "--encrypt", "--recipient", ours.fingerprint],
            input: zeros
        ).output
        #expect(bomb.count < 64 << 10)
        #expect(throws: OpenPGPError.plaintextTooLarge(limit: 1 << 20)) {
            try OpenPGP.decrypt(bomb, with: [ours], maximumPlaintextSize: 1 << 20)
        }
        #expect(try OpenPGP.decrypt(bomb, with: [ours]).plaintext == zeros)
    }
}
