/// A message decrypted with its integrity checked, and the signatures found inside it.
public struct OpenPGPDecryption: Sendable, CustomStringConvertible, CustomReflectable {
    /// How the message's integrity was protected (and checked: a message that fails its check gives no decryption).
    public enum Protection: Sendable, Hashable, CustomStringConvertible {
        /// Symmetrically encrypted and integrity protected data with a modification detection code (RFC 4880).
        case mdc
        /// AEAD (OCB or EAX): RNP's mode name.
        case aead(String)

        /// The protection's name.
        public var description: String {
            switch self {
            case .mdc: "MDC"
            case .aead(let mode): mode
            }
        }
    }

    /// The decrypted bytes.
    ///
    /// - Warning: Message text: seal it before it reaches a file, and never log it. This array is not zeroed.
    public let plaintext: [UInt8]
    /// Each signature inside the message, in order; empty for an unsigned message.
    public let signatures: [OpenPGPSignature]
    /// The integrity protection that was checked.
    public let protection: Protection
    /// The symmetric cipher (RNP's name, such as `AES256`).
    public let cipher: String

    /// Whether the message carries at least one signature and every signature is valid.
    public var isSignedAndVerified: Bool { !signatures.isEmpty && signatures.allSatisfy(\.isValid) }

    /// The protection and signatures; never the plaintext.
    public var description: String {
        "OpenPGPDecryption(\(plaintext.count) bytes, \(cipher) with \(protection), signatures: \(signatures))"
    }

    /// An empty mirror, so `dump` shows no message text.
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}
