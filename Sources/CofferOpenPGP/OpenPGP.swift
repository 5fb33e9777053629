import CRNP
import CofferBlocking
import CofferCrypto

/// OpenPGP (RFC 4880) through RNP, the library Thunderbird uses: key generation and import, encryption and
/// decryption with verification, and detached signatures.
///
/// Keys live in memory only. Each call creates an empty RNP FFI object, gives it the keys it needs from memory,
/// runs one operation and destroys the object, so RNP never reads or writes a keyring file and holds no key after
/// the call returns. Secret keys come and go as ``OpenPGPSecretKey`` (locked, zeroed memory); buffers RNP allocates
/// for the caller are cleared before they are freed.
///
/// Every function is blocking CPU work (key generation, public-key operations, S2K): call it on `BlockingPool`
/// (docs/ARCHITECTURE.md, "Concurrency"), never on an event loop or the cooperative pool.
public enum OpenPGP {
    /// The armor line of a cleartext-signed message (RFC 4880, section 7).
    static let cleartextMarker = Array("-----BEGIN PGP SIGNED MESSAGE-----".utf8)

    /// The default bound on a decrypted message's size (a compressed message can expand without limit).
    public static let defaultMaximumPlaintextSize = 256 << 20

    // MARK: Keys

    /// Generates a key for `userID`: an Ed25519 primary key (sign, certify) and an X25519 encryption subkey, neither
    /// expiring, without a passphrase (Coffer seals the secret key under the MainKey instead).
    ///
    /// Blocking: call on `BlockingPool`.
    ///
    /// - Parameter userID: The user id, as `Name <address>`: not empty, at most 128 bytes of UTF-8, no control
    ///   characters.
    /// - Returns: The secret key; its ``OpenPGPSecretKey/publicKey`` is the certificate to publish.
    /// - Throws: ``OpenPGPError/invalidUserID(reason:)``; ``OpenPGPError/failed(operation:code:detail:)`` if RNP fails.
    public static func generateKey(userID: String) throws(OpenPGPError) -> OpenPGPSecretKey {
        try validate(userID: userID)
        return try RNPSession.with { session throws(OpenPGPError) in
            let primary = try generate(session, algorithm: "EDDSA", usages: ["sign", "certify"]) {
                op throws(OpenPGPError) in
                try RNP.check(rnp_op_generate_set_userid(op, userID), "key generation")
            }
            _ = try generate(session, subkeyOf: primary, algorithm: "ECDH", usages: ["encrypt"]) {
                op throws(OpenPGPError) in
                try RNP.check(rnp_op_generate_set_curve(op, "Curve25519"), "key generation")
            }
            let publicKey = try OpenPGPPublicKey.export(primary)
            let secret = try primary.export(flags: RNPCode.exportSecret)
            return OpenPGPSecretKey(bytes: secret.secretBytes, publicKey: publicKey)
        }
    }

    /// Reads every key in `data` (armored or binary, certificates or secret keys) and removes the passphrase from
    /// each protected secret key.
    ///
    /// Blocking (S2K of a protected key is deliberately slow): call on `BlockingPool`.
    ///
    /// - Parameters:
    ///   - data: The keys, as a file holds them. Use the ``SecretBytes`` overload when they may be unprotected
    ///     secret keys.
    ///   - passphrase: Asked at most once, only when a secret key is protected; the same passphrase is tried on every
    ///     protected key. Return `nil` when the user gives none. The value is not kept after this call.
    /// - Returns: One entry per primary key, in the input's order.
    /// - Throws: ``OpenPGPError/malformed(what:)``, ``OpenPGPError/wrongKeyCount(found:)`` when there is no key,
    ///   ``OpenPGPError/passphraseRequired(fingerprint:)``, ``OpenPGPError/wrongPassphrase(fingerprint:)``.
    public static func importKeys(
        from data: [UInt8],
        passphrase: () -> SecretBytes? = { nil }
    ) throws(OpenPGPError) -> [OpenPGPKeyImport] {
        try withRawBytes(data) { raw throws(OpenPGPError) in try importKeys(raw, passphrase: passphrase) }
    }

    /// Reads every key in `data`, which may hold unprotected secret keys; see
    /// ``importKeys(from:passphrase:)``.
    public static func importKeys(
        from data: SecretBytes,
        passphrase: () -> SecretBytes? = { nil }
    ) throws(OpenPGPError) -> [OpenPGPKeyImport] {
        try data.withUnsafeBytes { raw throws(OpenPGPError) in try importKeys(raw, passphrase: passphrase) }
    }

    // MARK: Messages

    /// Encrypts `plaintext` to every key in `recipients`, and signs it inside the encryption when `signer` is given.
    ///
    /// The message is AES-256 encrypted with a modification detection code (SEIPD v1, which GnuPG 2.2 and Sequoia
    /// both read), its session key wrapped to each recipient's encryption subkey.
    ///
    /// Blocking: call on `BlockingPool`.
    ///
    /// - Parameters:
    ///   - recipients: The certificates to encrypt to; include the user's own to read the message later.
    ///   - signer: The secret key to sign with, or `nil` for an unsigned message.
    ///   - armored: ASCII armor (`-----BEGIN PGP MESSAGE-----`, as PGP/MIME carries it) instead of binary packets.
    /// - Throws: ``OpenPGPError/invalidArgument(reason:)`` with no recipient, ``OpenPGPError/noEncryptionKey(fingerprint:)``,
    ///   ``OpenPGPError/noSigningKey(fingerprint:)``.
    public static func encrypt(
        _ plaintext: [UInt8],
        to recipients: [OpenPGPPublicKey],
        signedBy signer: OpenPGPSecretKey? = nil,
        armored: Bool = false
    ) throws(OpenPGPError) -> [UInt8] {
        guard !recipients.isEmpty else { throw .invalidArgument(reason: "a message needs at least one recipient") }
        return try RNPSession.with { session throws(OpenPGPError) in
            for recipient in recipients { try load(recipient, into: session) }
            if let signer { try load(signer, into: session) }
            let output = ZeroingBuffer(limit: Int.max)
            try withRawBytes(plaintext) { raw throws(OpenPGPError) in
                try RNPInput.with(raw, what: "message", isData: true) { input throws(OpenPGPError) in
                    try RNPOutput.with(output, operation: "encryption") { out throws(OpenPGPError) in
                        var op: rnp_op_encrypt_t?
                        try RNP.check(rnp_op_encrypt_create(&op, session.ffi, input, out), "encryption")
                        guard let op else { throw .failed("encryption", RNPCode.badState) }
                        defer { rnp_op_encrypt_destroy(op) }
                        for recipient in recipients {
                            let key = try session.locate(fingerprint: recipient.fingerprint)
                            guard key.hasValidKey(for: "encrypt"),
                                rnp_op_encrypt_add_recipient(op, key.handle) == RNPCode.success
                            else {
                                throw .noEncryptionKey(fingerprint: recipient.fingerprint)
                            }
                        }
                        if let signer {
                            let key = try session.locate(fingerprint: signer.fingerprint)
                            var signature: rnp_op_sign_signature_t?
                            guard key.hasValidKey(for: "sign", secret: true),
                                rnp_op_encrypt_add_signature(op, key.handle, &signature) == RNPCode.success
                            else {
                                throw .noSigningKey(fingerprint: signer.fingerprint)
                            }
                        }
                        try RNP.check(rnp_op_encrypt_set_cipher(op, "AES256"), "encryption")
                        try RNP.check(rnp_op_encrypt_set_armor(op, armored), "encryption")
                        try RNP.check(rnp_op_encrypt_execute(op), "encryption")
                    }
                }
            }
            return output.bytes
        }
    }

    /// Decrypts `message` with one of `secretKeys` and checks the signatures inside it against `publicKeys` (and the
    /// secret keys' own certificates).
    ///
    /// The plaintext is given out only when decryption succeeded and the message's integrity protection (MDC or
    /// AEAD) checked out; otherwise nothing of it leaves this call, and what RNP wrote of it is zeroed. A bad or
    /// unknown signature does not stop decryption: each signature's status is in the result.
    ///
    /// Blocking: call on `BlockingPool`.
    ///
    /// - Parameters:
    ///   - message: The message, armored or binary.
    ///   - maximumPlaintextSize: The largest plaintext accepted, against compression bombs.
    /// - Throws: ``OpenPGPError/malformed(what:)`` for input that is not an OpenPGP message,
    ///   ``OpenPGPError/noMatchingSecretKey(keyIDs:)``, ``OpenPGPError/notEncrypted``,
    ///   ``OpenPGPError/integrityFailure``, ``OpenPGPError/plaintextTooLarge(limit:)``.
    public static func decrypt(
        _ message: [UInt8],
        with secretKeys: [OpenPGPSecretKey],
        verifyingWith publicKeys: [OpenPGPPublicKey] = [],
        maximumPlaintextSize: Int = defaultMaximumPlaintextSize
    ) throws(OpenPGPError) -> OpenPGPDecryption {
        guard maximumPlaintextSize >= 0 else { throw .invalidArgument(reason: "the size limit is negative") }
        // A cleartext-signed message is not encrypted; and RNP 0.16 prints its unknown armor headers, which the sender
        // chose (terminal escapes included), to standard error: it is refused before RNP reads it.
        if ByteSearch.contains(cleartextMarker, in: message) { throw .notEncrypted }
        return try RNPSession.with { session throws(OpenPGPError) in
            for key in publicKeys { try load(key, into: session) }
            for key in secretKeys { try load(key, into: session) }
            let output = ZeroingBuffer(limit: maximumPlaintextSize)
            defer { output.wipeAndFree() }
            let result: ([OpenPGPSignature], OpenPGPDecryption.Protection, String)
            do throws(OpenPGPError) {
                result = try withRawBytes(message) { raw throws(OpenPGPError) in
                    try RNPInput.with(raw, what: "message") { input throws(OpenPGPError) in
                        try verify(session, input: input, output: output)
                    }
                }
            } catch {
                // The limit may be hit while RNP flushes its last bytes, after the operation itself succeeded.
                throw output.exceededLimit ? .plaintextTooLarge(limit: maximumPlaintextSize) : error
            }
            let (signatures, protection, cipher) = result
            return OpenPGPDecryption(
                plaintext: output.bytes,
                signatures: signatures,
                protection: protection,
                cipher: cipher
            )
        }
    }

    // MARK: Detached signatures

    /// Makes a detached signature over `data` with `key` (SHA-256), as PGP/MIME's `application/pgp-signature` part
    /// carries it.
    ///
    /// Blocking: call on `BlockingPool`.
    ///
    /// - Parameter armored: ASCII armor (`-----BEGIN PGP SIGNATURE-----`) instead of a binary packet.
    /// - Throws: ``OpenPGPError/noSigningKey(fingerprint:)``.
    public static func signDetached(
        _ data: [UInt8],
        with key: OpenPGPSecretKey,
        armored: Bool = true
    ) throws(OpenPGPError) -> [UInt8] {
        try RNPSession.with { session throws(OpenPGPError) in
            try load(key, into: session)
            let output = ZeroingBuffer(limit: Int.max)
            try withRawBytes(data) { raw throws(OpenPGPError) in
                try RNPInput.with(raw, what: "data", isData: true) { input throws(OpenPGPError) in
                    try RNPOutput.with(output, operation: "signing") { out throws(OpenPGPError) in
                        var op: rnp_op_sign_t?
                        try RNP.check(rnp_op_sign_detached_create(&op, session.ffi, input, out), "signing")
                        guard let op else { throw .failed("signing", RNPCode.badState) }
                        defer { rnp_op_sign_destroy(op) }
                        let handle = try session.locate(fingerprint: key.fingerprint)
                        var signature: rnp_op_sign_signature_t?
                        guard handle.hasValidKey(for: "sign", secret: true),
                            rnp_op_sign_add_signature(op, handle.handle, &signature) == RNPCode.success
                        else {
                            throw .noSigningKey(fingerprint: key.fingerprint)
                        }
                        try RNP.check(rnp_op_sign_set_hash(op, "SHA256"), "signing")
                        try RNP.check(rnp_op_sign_set_armor(op, armored), "signing")
                        try RNP.check(rnp_op_sign_execute(op), "signing")
                    }
                }
            }
            return output.bytes
        }
    }

    /// Checks the detached `signature` (armored or binary, one or more signature packets) over `data` against
    /// `publicKeys`.
    ///
    /// Blocking: call on `BlockingPool`.
    ///
    /// - Returns: Each signature with its status: ``OpenPGPSignature/Status/valid`` only when a given key made it over
    ///   exactly `data`.
    /// - Throws: ``OpenPGPError/malformed(what:)`` when `signature` holds no signature.
    public static func verifyDetached(
        _ data: [UInt8],
        signature: [UInt8],
        publicKeys: [OpenPGPPublicKey]
    ) throws(OpenPGPError) -> [OpenPGPSignature] {
        try RNPSession.with { session throws(OpenPGPError) in
            for key in publicKeys { try load(key, into: session) }
            return try withRawBytes(data) { dataBytes throws(OpenPGPError) in
                try withRawBytes(signature) { signatureBytes throws(OpenPGPError) in
                    try RNPInput.with(dataBytes, what: "data", isData: true) { dataInput throws(OpenPGPError) in
                        try RNPInput.with(signatureBytes, what: "signature") { signatureInput throws(OpenPGPError) in
                            var op: rnp_op_verify_t?
                            let created = rnp_op_verify_detached_create(&op, session.ffi, dataInput, signatureInput)
                            try RNP.check(created, "signature check")
                            guard let op else { throw .failed("signature check", RNPCode.badState) }
                            defer { rnp_op_verify_destroy(op) }
                            let code = rnp_op_verify_execute(op)
                            let signatures = try OpenPGPSignature.all(of: op, in: session)
                            guard signatures.isEmpty else { return signatures }
                            if code == RNPCode.success || RNPCode.parseFailures.contains(code)
                                || code == RNPCode.noSignaturesFound
                            {
                                throw .malformed(what: "signature")
                            }
                            throw .failed("signature check", code)
                        }
                    }
                }
            }
        }
    }
}

extension OpenPGP {
    /// The longest user id RNP generates a key for, in UTF-8 bytes (RNP 0.16 refuses longer ones).
    static let maximumUserIDLength = 128

    /// The user id rule: not empty, at most ``maximumUserIDLength`` bytes, no control characters (a line break would
    /// forge lines in whatever prints it).
    static func validate(userID: String) throws(OpenPGPError) {
        guard !userID.isEmpty else { throw .invalidUserID(reason: "it is empty") }
        guard userID.utf8.count <= maximumUserIDLength else {
            throw .invalidUserID(reason: "it is longer than \(maximumUserIDLength) bytes")
        }
        guard !userID.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw .invalidUserID(reason: "it contains a control character")
        }
    }

    /// Generates a primary key (`subkeyOf` nil) or a subkey, no expiry, no protection.
    static func generate(
        _ session: borrowing RNPSession,
        subkeyOf primary: RNPKey? = nil,
        algorithm: String,
        usages: [String],
        configure: (rnp_op_generate_t) throws(OpenPGPError) -> Void
    ) throws(OpenPGPError) -> RNPKey {
        var op: rnp_op_generate_t?
        let created =
            if let primary {
                rnp_op_generate_subkey_create(&op, session.ffi, primary.handle, algorithm)
            } else {
                rnp_op_generate_create(&op, session.ffi, algorithm)
            }
        try RNP.check(created, "key generation")
        guard let op else { throw .failed("key generation", RNPCode.badState) }
        defer { rnp_op_generate_destroy(op) }
        try configure(op)
        try RNP.check(rnp_op_generate_clear_usage(op), "key generation")
        for usage in usages { try RNP.check(rnp_op_generate_add_usage(op, usage), "key generation") }
        try RNP.check(rnp_op_generate_set_expiration(op, 0), "key generation")
        try RNP.check(rnp_op_generate_execute(op), "key generation")
        var key: rnp_key_handle_t?
        try RNP.check(rnp_op_generate_get_key(op, &key), "key generation")
        guard let key else { throw .failed("key generation", RNPCode.badState) }
        return RNPKey(handle: key)
    }

    /// Puts a certificate into the session.
    static func load(_ key: OpenPGPPublicKey, into session: borrowing RNPSession) throws(OpenPGPError) {
        try withRawBytes(key.bytes) { raw throws(OpenPGPError) in
            try session.importKeys(raw, secret: false, what: "key")
        }
    }

    /// Puts a secret key into the session (read in place from its locked memory).
    static func load(_ key: OpenPGPSecretKey, into session: borrowing RNPSession) throws(OpenPGPError) {
        try key.bytes.withUnsafeBytes { raw throws(OpenPGPError) in
            try session.importKeys(raw, secret: true, what: "key")
        }
    }

    /// The import behind both public overloads.
    static func importKeys(
        _ raw: UnsafeRawBufferPointer,
        passphrase: () -> SecretBytes?
    ) throws(OpenPGPError) -> [OpenPGPKeyImport] {
        try RNPSession.with { session throws(OpenPGPError) in
            try session.importKeys(raw, secret: true, what: "key")
            let fingerprints = try session.primaryFingerprints()
            guard !fingerprints.isEmpty else { throw .wrongKeyCount(found: 0) }
            var asked = false
            var given: SecretBytes?
            defer { given?.wipe() }
            var imports: [OpenPGPKeyImport] = []
            for fingerprint in fingerprints {
                let primary = try session.locate(fingerprint: fingerprint)
                var hasSecret = false
                var wasProtected = false
                var hasStub = false
                for key in [primary] + (try primary.subkeys()) {
                    // A GnuPG stub ("secret key not here": on a card, or exported without it) has no secret to use.
                    let secret = try key.secret()
                    if secret == .unavailable { hasStub = true }
                    guard secret == .plain || secret == .protected else { continue }
                    hasSecret = true
                    guard secret == .protected else { continue }
                    wasProtected = true
                    if !asked {
                        asked = true
                        given = try passphrase().map { value throws(OpenPGPError) in try cString(value) }
                    }
                    guard let given else { throw .passphraseRequired(fingerprint: fingerprint) }
                    let code = given.withUnsafeBytes { bytes in
                        rnp_key_unprotect(key.handle, bytes.baseAddress!.assumingMemoryBound(to: CChar.self))
                    }
                    if code == RNPCode.badPassword { throw .wrongPassphrase(fingerprint: fingerprint) }
                    try RNP.check(code, "removing the passphrase")
                }
                let publicKey = try OpenPGPPublicKey.export(primary)
                let secretKey =
                    hasSecret
                    ? OpenPGPSecretKey(
                        bytes: try primary.export(flags: RNPCode.exportSecret).secretBytes,
                        publicKey: publicKey
                    )
                    : nil
                imports.append(
                    OpenPGPKeyImport(
                        publicKey: publicKey,
                        secretKey: secretKey,
                        wasProtected: wasProtected,
                        hasSecretStub: hasStub && !hasSecret
                    )
                )
            }
            return imports
        }
    }

    /// `passphrase` as a NUL-terminated C string, in locked memory.
    static func cString(_ passphrase: SecretBytes) throws(OpenPGPError) -> SecretBytes {
        try passphrase.withUnsafeBytes { raw throws(OpenPGPError) in
            guard !raw.contains(0) else { throw .invalidArgument(reason: "the passphrase contains a NUL character") }
            return SecretBytes(uninitializedCount: raw.count + 1) { buffer in
                _ = buffer.initialize(from: raw)
                buffer[raw.count] = 0
            }
        }
    }

    /// Runs a decrypt-and-verify operation into `output`, then decides whether its plaintext may be given out.
    static func verify(
        _ session: borrowing RNPSession,
        input: rnp_input_t,
        output: ZeroingBuffer
    ) throws(OpenPGPError) -> ([OpenPGPSignature], OpenPGPDecryption.Protection, String) {
        try RNPOutput.with(output, operation: "decryption") { out throws(OpenPGPError) in
            var op: rnp_op_verify_t?
            try RNP.check(rnp_op_verify_create(&op, session.ffi, input, out), "decryption")
            guard let op else { throw .failed("decryption", RNPCode.badState) }
            defer { rnp_op_verify_destroy(op) }
            try RNP.check(rnp_op_verify_set_flags(op, RNPCode.ignoreSignaturesOnDecrypt), "decryption")
            let code = rnp_op_verify_execute(op)
            if output.exceededLimit { throw .plaintextTooLarge(limit: output.limit) }
            var modePointer: UnsafeMutablePointer<CChar>?
            var cipherPointer: UnsafeMutablePointer<CChar>?
            var valid = false
            let info = rnp_op_verify_get_protection_info(op, &modePointer, &cipherPointer, &valid)
            let mode = modePointer.map(RNPBuffer.takeString) ?? "none"
            let cipher = cipherPointer.map(RNPBuffer.takeString) ?? "none"
            guard code == RNPCode.success else {
                output.wipeAndFree()
                throw decryptionError(code, op: op, mode: info == RNPCode.success ? mode : "none")
            }
            try RNP.check(info, "decryption")
            guard mode != "none" else { throw .notEncrypted }
            guard valid, mode != "cfb" else { throw .integrityFailure }
            let protection: OpenPGPDecryption.Protection = mode == "cfb-mdc" ? .mdc : .aead(mode)
            return (try OpenPGPSignature.all(of: op, in: session), protection, cipher)
        }
    }

    /// What a failed decrypt-and-verify operation means.
    static func decryptionError(_ code: rnp_result_t, op: rnp_op_verify_t, mode: String) -> OpenPGPError {
        var used: rnp_recipient_handle_t?
        var usedPassword: rnp_symenc_handle_t?
        var count = 0
        var passwords = 0
        // Encrypted to keys or passwords (Coffer gives RNP no password), and none of ours opened it.
        if rnp_op_verify_get_recipient_count(op, &count) == RNPCode.success,
            rnp_op_verify_get_symenc_count(op, &passwords) == RNPCode.success, count + passwords > 0,
            rnp_op_verify_get_used_recipient(op, &used) == RNPCode.success, used == nil,
            rnp_op_verify_get_used_symenc(op, &usedPassword) == RNPCode.success, usedPassword == nil
        {
            var keyIDs: [String] = []
            for index in 0..<count {
                var recipient: rnp_recipient_handle_t?
                var keyID: UnsafeMutablePointer<CChar>?
                if rnp_op_verify_get_recipient_at(op, index, &recipient) == RNPCode.success, let recipient,
                    rnp_recipient_get_keyid(recipient, &keyID) == RNPCode.success, let keyID
                {
                    keyIDs.append(RNPBuffer.takeString(keyID))
                }
            }
            return .noMatchingSecretKey(keyIDs: keyIDs)
        }
        if mode != "none" { return .integrityFailure }
        // A signed-only message whose signature could not be checked: RNP stops on the signature, not a decryption.
        if RNPCode.signatureFailures.contains(code) { return .notEncrypted }
        if RNPCode.parseFailures.contains(code) { return .malformed(what: "message") }
        return .failed("decryption", code)
    }
}
