import CofferCrypto

extension MainKey {
    /// Seals this MainKey's bytes under `key` for `context` (FastSync: a key-encryption key that exists only in
    /// memory and in the notification service's escrow). Package-only: no other module sees a MainKey's bytes.
    ///
    /// - Throws: ``KeymakerError/locked`` when the key was wiped, ``KeymakerError/crypto(_:)`` when sealing fails.
    package func sealed(under key: EnvelopeKey, context: EnvelopeContext) throws(KeymakerError) -> [UInt8] {
        guard !secret.isWiped else { throw .locked }
        do {
            return try secret.withUnsafeBytes { raw throws(CofferCryptoError) in
                try Envelope.seal(raw, with: key, context: context)
            }
        } catch {
            throw .crypto(error)
        }
    }
}
