import CofferBlocking
/// An OpenPGP certificate (a transferable public key: the primary key, its user ids and subkeys), checked by RNP.
///
/// Made by ``init(bytes:)`` from stored or received bytes, or by ``OpenPGP/generateKey(userID:)`` and
/// ``OpenPGP/importKeys(from:passphrase:)``. Holds no secret.
public struct OpenPGPPublicKey: Sendable, Hashable, CustomStringConvertible {
    /// The primary key's fingerprint: upper-case hex, 40 digits for a v4 key.
    public let fingerprint: String
    /// The key's user ids (`Name <address>`) that carry a valid self-signature and are not revoked, in the key's
    /// order.
    ///
    /// - Warning: ``bytes`` holds the certificate as it came, which may carry more user ids (forged, revoked or
    ///   expired ones); name a key only by this list.
    public let userIDs: [String]
    /// The certificate in binary OpenPGP form, as RNP exports it (the form to store).
    public let bytes: [UInt8]
    /// The certificate ASCII-armored (`-----BEGIN PGP PUBLIC KEY BLOCK-----`), the form to give to people.
    public let armored: String
    /// Whether a message can be encrypted to it: the primary key or a subkey is a valid encryption key when it was
    /// read (false for an expired, revoked or signing-only key).
    public let canEncrypt: Bool

    init(fingerprint: String, userIDs: [String], bytes: [UInt8], armored: String, canEncrypt: Bool) {
        self.fingerprint = fingerprint
        self.userIDs = userIDs
        self.bytes = bytes
        self.armored = armored
        self.canEncrypt = canEncrypt
    }

    /// Reads one certificate, armored or binary. Secret key material in the input is ignored.
    ///
    /// Blocking (RNP parses and checks the self-signatures): call on `BlockingPool`.
    ///
    /// - Throws: ``OpenPGPError/malformed(what:)`` for input that is not an OpenPGP key,
    ///   ``OpenPGPError/wrongKeyCount(found:)`` unless it holds exactly one primary key.
    public init(bytes: some Collection<UInt8>) throws(OpenPGPError) {
        let input = Array(bytes)
        self = try RNPSession.with { session throws(OpenPGPError) in
            try withRawBytes(input) { raw throws(OpenPGPError) in
                try session.importKeys(raw, secret: false, what: "key")
            }
            let fingerprints = try session.primaryFingerprints()
            guard fingerprints.count == 1 else { throw .wrongKeyCount(found: fingerprints.count) }
            return try Self.export(try session.locate(fingerprint: fingerprints[0]))
        }
    }

    /// The certificate of `key` as RNP exports it, binary and armored.
    static func export(_ key: RNPKey) throws(OpenPGPError) -> OpenPGPPublicKey {
        let binary = try key.export(flags: RNPCode.exportPublic).bytes
        let armored = try key.export(flags: RNPCode.exportPublic | RNPCode.exportArmored).bytes
        return OpenPGPPublicKey(
            fingerprint: try key.fingerprint(),
            userIDs: try key.userIDs(),
            bytes: binary,
            armored: String(decoding: armored, as: UTF8.self),
            canEncrypt: key.hasValidKey(for: "encrypt")
        )
    }

    /// The fingerprint and user ids.
    public var description: String { "OpenPGPPublicKey(\(fingerprint), \(userIDs))" }
}
