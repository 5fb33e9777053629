import Crypto

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A 256-bit key prepared for sealing envelopes and streams: it carries the subkeys derived from the root key and
/// the public key id written into every ciphertext.
///
/// The root key is never used directly: AEAD, context-tag and key-id keys are separate HKDF-SHA256 outputs (see
/// `docs/FORMAT.md`).
public struct EnvelopeKey: Sendable {
    /// The number of bytes in a root key.
    public static let byteCount = 32

    let aeadKey: SymmetricKey
    /// HMAC-SHA256 keyed with the context-tag key, prepared once; each tag copies it.
    let contextHMAC: HMAC<SHA256>
    let streamKey: SymmetricKey
    /// Eight bytes that identify the key without revealing it; written into every envelope and stream header.
    public let id: [UInt8]

    /// Prepares `secret` (exactly 32 bytes) for use.
    ///
    /// - Throws: ``CofferCryptoError/invalidKeyLength(expected:actual:)`` or ``CofferCryptoError/keyWiped``.
    public init(_ secret: SecretBytes) throws(CofferCryptoError) {
        guard !secret.isWiped else { throw .keyWiped }
        guard secret.count == Self.byteCount else {
            throw .invalidKeyLength(expected: Self.byteCount, actual: secret.count)
        }
        let root = secret.withUnsafeBytes { SymmetricKey(data: $0) }
        self.init(root: root)
    }

    /// Prepares a swift-crypto key (exactly 32 bytes) for use.
    public init(_ key: SymmetricKey) throws(CofferCryptoError) {
        guard key.bitCount == Self.byteCount * 8 else {
            throw .invalidKeyLength(expected: Self.byteCount, actual: key.bitCount / 8)
        }
        self.init(root: key)
    }

    private init(root: SymmetricKey) {
        func derive(_ label: String, _ count: Int) -> SymmetricKey {
            HKDF<SHA256>.deriveKey(
                inputKeyMaterial: root,
                salt: Array("coffer.envelope-key.v1".utf8),
                info: Array(label.utf8),
                outputByteCount: count
            )
        }
        aeadKey = derive("aead", 32)
        contextHMAC = HMAC<SHA256>(key: derive("context-tag", 32))
        streamKey = derive("stream", 32)
        id = derive("key-id", 8).withUnsafeBytes { Array($0) }
    }

    /// Calls `body` with the 8-byte tag that binds `context` under this key (truncated HMAC-SHA256), in place in the
    /// MAC's own storage, so no array is built per envelope.
    package func withContextTag<T>(_ context: EnvelopeContext, _ body: (UnsafeRawBufferPointer) -> T) -> T {
        var hmac = contextHMAC
        hmac.update(data: context.encoded)
        return hmac.finalize().withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0.prefix(8))) }
    }
}

extension EnvelopeKey: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Only the public key id.
    public var description: String { "EnvelopeKey(id: \(id.hexString))" }
    /// Only the public key id.
    public var debugDescription: String { description }
    /// Empty: keys never reach mirrors.
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}
