/// One key read by ``OpenPGP/importKeys(from:passphrase:)``: its certificate and, when the input held its
/// secret, the secret key without its passphrase.
public struct OpenPGPKeyImport: Sendable, CustomStringConvertible {
    /// The certificate (public key).
    public let publicKey: OpenPGPPublicKey
    /// The secret key, unprotected, when the input held secret key material; `nil` for a certificate.
    public let secretKey: OpenPGPSecretKey?
    /// Whether the input's secret key was protected by a passphrase (now removed from ``secretKey``).
    public let wasProtected: Bool

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
