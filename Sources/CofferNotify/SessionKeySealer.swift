import CofferCrypto
import Crypto
import Foundation

/// Seals a session's push keys (the 65-byte P-256 public key and the 16-byte RFC 8291 auth secret) under keys
/// derived from the service's master key, so a stolen database cannot forge pushes to a device.
///
/// Record v1 (FORMAT.md "Sealed push keys v1"): `0x01` ‖ AES-256-GCM combined (12-byte nonce ‖ ciphertext ‖
/// 16-byte tag) of `public key ‖ auth secret`, with the associated data `coffer-notify push keys v1` ‖ 0x00 ‖ the
/// session id, so a record moved to another row does not open. The reuse check ("a push key is never registered
/// twice") compares `HMAC-SHA256(idKey, public key)` instead of the key itself. Both keys come from HKDF-SHA256 over
/// the master key with distinct `info` strings.
///
/// Its description, debug description and mirror show no key (`SessionKeySealer(<redacted>)`).
public struct SessionKeySealer: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The record version this code writes.
    public static let version: UInt8 = 1
    private static let aadLabel = Array("coffer-notify push keys v1".utf8)
    private let sealKey: SymmetricKey
    private let idKey: SymmetricKey

    /// Derives the sealing and id keys from the 32-byte master key.
    ///
    /// - Throws: `NotifyError.configuration` when the master key is not 32 bytes.
    public init(masterKey: SecretBytes) throws(NotifyError) {
        guard masterKey.count == 32, !masterKey.isWiped else {
            throw .configuration("the master key must be 32 bytes")
        }
        let master = masterKey.withUnsafeBytes { SymmetricKey(data: $0) }
        sealKey = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: master,
            info: Array("coffer-notify push keys seal v1".utf8),
            outputByteCount: 32
        )
        idKey = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: master,
            info: Array("coffer-notify push key id v1".utf8),
            outputByteCount: 32
        )
    }

    /// The keyed id of a push public key: equal keys give equal ids, and the id does not reveal the key.
    public func keyID(_ publicKey: [UInt8]) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: publicKey, using: idKey))
    }

    /// Seals the session's public key and auth secret, bound to `sessionID`.
    public func seal(publicKey: [UInt8], authSecret: [UInt8], sessionID: String) throws(NotifyError) -> [UInt8] {
        guard publicKey.count == 65, authSecret.count == 16 else {
            throw .invalidRequest("the push keys are not a P-256 public key and a 16-byte auth secret")
        }
        do {
            let box = try AES.GCM.seal(
                publicKey + authSecret,
                using: sealKey,
                authenticating: Self.aad(sessionID)
            )
            guard let combined = box.combined else { throw NotifyError.storage("push keys could not be sealed") }
            return [Self.version] + Array(combined)
        } catch let error as NotifyError {
            throw error
        } catch {
            throw .storage("push keys could not be sealed")
        }
    }

    /// Opens a record made by ``seal(publicKey:authSecret:sessionID:)`` for the same session.
    ///
    /// - Throws: `NotifyError.storage` when the version is unknown, the record was changed or moved, or the master
    ///   key is another one.
    public func open(
        _ record: [UInt8],
        sessionID: String
    ) throws(NotifyError) -> (publicKey: [UInt8], authSecret: [UInt8]) {
        guard record.first == Self.version, record.count == 1 + 12 + 81 + 16 else {
            throw .storage("a session's sealed push keys have an unknown version or length")
        }
        do {
            let box = try AES.GCM.SealedBox(combined: record.dropFirst())
            let plain = Array(try AES.GCM.open(box, using: sealKey, authenticating: Self.aad(sessionID)))
            return (Array(plain[0..<65]), Array(plain[65..<81]))
        } catch {
            throw .storage("a session's sealed push keys do not open with this master key")
        }
    }

    private static func aad(_ sessionID: String) -> [UInt8] { aadLabel + [0] + Array(sessionID.utf8) }

    /// `SessionKeySealer(<redacted>)`.
    public var description: String { "SessionKeySealer(<redacted>)" }
    /// `SessionKeySealer(<redacted>)`.
    public var debugDescription: String { description }
    /// No children: the keys are not reflected.
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}
