import CRNP
import CofferBlocking
import CofferCrypto

/// An unprotected OpenPGP secret key (a transferable secret key with its subkeys), held in locked memory that is
/// zeroed when released, and never printed.
///
/// Coffer keeps secret keys without an OpenPGP passphrase: the store seals ``bytes`` under the MainKey. RNP sees the
/// bytes only during one operation, in an FFI object destroyed at its end.
public struct OpenPGPSecretKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The key in binary OpenPGP form (secret key packets, user ids, subkeys), unprotected.
    ///
    /// - Warning: This is the secret key itself. Seal it before it reaches a file; copies out of
    ///   ``SecretBytes/withUnsafeBytes(_:)`` are not zeroed.
    public let bytes: SecretBytes
    /// The matching certificate (public key).
    public let publicKey: OpenPGPPublicKey

    /// The primary key's fingerprint.
    public var fingerprint: String { publicKey.fingerprint }

    init(bytes: SecretBytes, publicKey: OpenPGPPublicKey) {
        self.bytes = bytes
        self.publicKey = publicKey
    }

    /// Reads one unprotected secret key in binary or armored form (as ``bytes`` holds it, for example after the store
    /// opened it).
    ///
    /// Blocking (RNP parses and checks the key): call on `BlockingPool`.
    ///
    /// - Throws: ``OpenPGPError/malformed(what:)``, ``OpenPGPError/wrongKeyCount(found:)`` unless it holds exactly one
    ///   primary key, ``OpenPGPError/notSecretKey(fingerprint:)`` for a public key, ``OpenPGPError/protectedKey(fingerprint:)``
    ///   for a key under a passphrase (import that with ``OpenPGP/importKeys(from:passphrase:)``).
    public init(bytes: SecretBytes) throws(OpenPGPError) {
        let publicKey = try RNPSession.with { session throws(OpenPGPError) in
            try bytes.withUnsafeBytes { raw throws(OpenPGPError) in
                try session.importKeys(raw, secret: true, what: "key")
            }
            let fingerprints = try session.primaryFingerprints()
            guard fingerprints.count == 1 else { throw .wrongKeyCount(found: fingerprints.count) }
            let primary = try session.locate(fingerprint: fingerprints[0])
            let keys = [primary] + (try primary.subkeys())
            var anySecret = false
            for key in keys {
                switch try key.secret() {
                case .plain: anySecret = true
                case .protected: throw .protectedKey(fingerprint: fingerprints[0])
                case .none, .unavailable: continue
                }
            }
            guard anySecret else { throw .notSecretKey(fingerprint: fingerprints[0]) }
            return try OpenPGPPublicKey.export(primary)
        }
        self.init(bytes: bytes, publicKey: publicKey)
    }

    /// The fingerprint only: never the key.
    public var description: String { "OpenPGPSecretKey(\(fingerprint), <redacted>)" }
    /// Same as ``description``.
    public var debugDescription: String { description }
    /// An empty mirror, so `dump` and debuggers that use mirrors show nothing.
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}
