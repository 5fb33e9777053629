import CofferCrypto
import Crypto

/// The per-account root key: 256 random bits created at login and destroyed at logout. Every sealed byte of the
/// account is under a subkey of it.
///
/// Only the ``Keymaker`` hands it out, and only while unlocked. Locking wipes its bytes, so a reference kept past
/// the lock stops working (``subkey(_:)`` throws ``KeymakerError/locked``).
public final class MainKey: Sendable {
    /// Bytes in a MainKey.
    public static let byteCount = 32
    let secret: SecretBytes

    init(secret: SecretBytes) { self.secret = secret }

    /// A fresh random MainKey.
    static func generate() -> MainKey { MainKey(secret: SecretBytes(randomCount: byteCount)) }

    /// The envelope key for one purpose, `HKDF-SHA256(MainKey, info: "coffer.mainkey.subkey.v1." + label)`.
    ///
    /// Labels in use: `locked.<label>` for ``Locked`` values; later modules add their own (store columns, search,
    /// attachments, settings).
    public func subkey(_ label: String) throws(KeymakerError) -> EnvelopeKey {
        guard !secret.isWiped else { throw .locked }
        let derived = secret.withUnsafeBytes { raw in
            HKDF<SHA256>.deriveKey(
                inputKeyMaterial: SymmetricKey(data: raw),
                salt: Array("coffer.mainkey.v1".utf8),
                info: Array("coffer.mainkey.subkey.v1.\(label)".utf8),
                outputByteCount: 32
            )
        }
        do { return try EnvelopeKey(derived) } catch { throw .crypto(error) }
    }

    /// A key for keyed hashes (HMAC) for one purpose,
    /// `HKDF-SHA256(MainKey, salt: "coffer.mainkey.v1", info: "coffer.mainkey.hmac.v1." + label)`: a separate
    /// derivation from ``subkey(_:)``, so no hash key equals an envelope key. Used by the store's blind index and
    /// duplicate detection.
    public func hashKey(_ label: String) throws(KeymakerError) -> SymmetricKey {
        guard !secret.isWiped else { throw .locked }
        return secret.withUnsafeBytes { raw in
            HKDF<SHA256>.deriveKey(
                inputKeyMaterial: SymmetricKey(data: raw),
                salt: Array("coffer.mainkey.v1".utf8),
                info: Array("coffer.mainkey.hmac.v1.\(label)".utf8),
                outputByteCount: 32
            )
        }
    }

    /// Raw access to the key bytes, for tests that scan storage for them.
    ///
    /// - Warning: Never copy these bytes out of the closure in production code.
    package func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try secret.withUnsafeBytes(body)
    }

    /// Zeroes the key now.
    func wipe() { secret.wipe() }

    /// Whether the key was wiped by a lock.
    public var isWiped: Bool { secret.isWiped }
}

extension MainKey: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Always redacted.
    public var description: String { "MainKey(<redacted>)" }
    /// Always redacted.
    public var debugDescription: String { description }
    /// Empty.
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}
