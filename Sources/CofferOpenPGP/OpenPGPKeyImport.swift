/// One key read by ``OpenPGP/importKeys(from:passphrase:)``: its certificate and, when the input held its
/// secret, the secret key without its passphrase.
public struct OpenPGPKeyImport: Sendable, CustomStringConvertible {
    /// The certificate (public key).
    public let publicKey: OpenPGPPublicKey
    /// The secret key, unprotected, when the input held secret key material; `nil` for a certificate.
    public let secretKey: OpenPGPSecretKey?
    /// Whether the input's secret key was protected by a passphrase (now removed from ``secretKey``).
    public let wasProtected: Bool
    /// Whether the input held this key as a secret key without usable secret material (a GnuPG stub: kept on a
    /// smartcard, or exported with `--export-secret-subkeys`): neither a usable secret key nor a mere certificate.
    public let hasSecretStub: Bool

    init(publicKey: OpenPGPPublicKey, secretKey: OpenPGPSecretKey?, wasProtected: Bool, hasSecretStub: Bool = false) {
        self.publicKey = publicKey
        self.secretKey = secretKey
        self.wasProtected = wasProtected
        self.hasSecretStub = hasSecretStub
    }

    /// The primary key's fingerprint.
    public var fingerprint: String { publicKey.fingerprint }
    /// The key's user ids.
    public var userIDs: [String] { publicKey.userIDs }
    /// Whether the input held secret key material for this key.
    public var isSecret: Bool { secretKey != nil }

    /// The fingerprint and what was imported; never key material.
    public var description: String {
        "OpenPGPKeyImport(\(fingerprint), \(isSecret ? "secret" : "public")\(wasProtected ? ", was protected" : ""))"
    }
}
