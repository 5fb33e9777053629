import CRNP

/// Why an OpenPGP operation failed, written for the person who reads it.
///
/// No case carries a passphrase, key material or message text: only what kind of input was wrong, fingerprints and
/// key ids (which are public), and RNP's result code.
public enum OpenPGPError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The input is empty, cut short or not OpenPGP data of the expected kind; `what` names the input ("key",
    /// "message", "signature").
    case malformed(what: String)
    /// The input held no key, or (where one key is expected) more than one; `found` is how many primary keys it held.
    case wrongKeyCount(found: Int)
    /// A secret key is required and the key has no secret material (a public key, or a secret key whose secret parts
    /// were removed).
    case notSecretKey(fingerprint: String)
    /// A secret key is protected by a passphrase where an unprotected one is required: import it with its passphrase.
    case protectedKey(fingerprint: String)
    /// The key is protected by a passphrase and none was given.
    case passphraseRequired(fingerprint: String)
    /// The passphrase does not unlock the key.
    case wrongPassphrase(fingerprint: String)
    /// The user id cannot be used; `reason` says why.
    case invalidUserID(reason: String)
    /// An argument is out of range; `reason` says which and why.
    case invalidArgument(reason: String)
    /// The recipient's key has no valid key for encryption (expired, revoked, or a signing-only key).
    case noEncryptionKey(fingerprint: String)
    /// The key has no valid key for signing.
    case noSigningKey(fingerprint: String)
    /// The message is not encrypted to any of the given secret keys; `keyIDs` are the recipients it names (none for a
    /// message encrypted to a password only).
    case noMatchingSecretKey(keyIDs: [String])
    /// The message is not encrypted (a signed-only or literal message) where an encrypted one was expected.
    case notEncrypted
    /// The message's integrity check (MDC or AEAD) failed or is missing: it was changed, cut short or crafted.
    /// No plaintext is given out.
    case integrityFailure
    /// The plaintext would exceed `limit` bytes (for example a compressed message that expands without bound).
    case plaintextTooLarge(limit: Int)
    /// Any other failure: the operation, RNP's result code and its text for that code.
    case failed(operation: String, code: UInt32, detail: String)

    /// A sentence for people; never contains a passphrase, key material or message text.
    public var description: String {
        switch self {
        case .malformed(let what): "The OpenPGP \(what) is empty, cut short or not OpenPGP data."
        case .wrongKeyCount(let found):
            found == 0
                ? "The data holds no OpenPGP key." : "The data holds \(found) OpenPGP keys where one is expected."
        case .notSecretKey(let fingerprint): "The key \(fingerprint) has no secret key material."
        case .protectedKey(let fingerprint):
            "The secret key \(fingerprint) is protected by a passphrase; import it with its passphrase."
        case .passphraseRequired(let fingerprint):
            "The secret key \(fingerprint) is protected by a passphrase and none was given."
        case .wrongPassphrase(let fingerprint): "The passphrase does not unlock the secret key \(fingerprint)."
        case .invalidUserID(let reason): "The user id cannot be used: \(reason)."
        case .invalidArgument(let reason): "Invalid OpenPGP argument: \(reason)."
        case .noEncryptionKey(let fingerprint):
            "The key \(fingerprint) has no valid encryption key (expired, revoked or signing only)."
        case .noSigningKey(let fingerprint): "The key \(fingerprint) has no valid signing key."
        case .noMatchingSecretKey(let keyIDs):
            keyIDs.isEmpty
                ? "The message is not encrypted to any of your keys."
                : "The message is not encrypted to any of your keys (it names \(keyIDs.joined(separator: ", ")))."
        case .notEncrypted: "The message is not encrypted."
        case .integrityFailure:
            "The encrypted message failed its integrity check (it was changed, cut short or crafted); nothing of it is shown."
        case .plaintextTooLarge(let limit): "The decrypted message would be larger than \(limit) bytes."
        case .failed(let operation, let code, let detail):
            "OpenPGP \(operation) failed: \(detail) (RNP 0x\(String(code, radix: 16)))."
        }
    }

    /// RNP's own text for `code` (a static string naming the code, never data).
    static func failed(_ operation: String, _ code: rnp_result_t) -> OpenPGPError {
        let detail = rnp_result_to_string(code).map { String(cString: $0) } ?? "unknown result"
        return .failed(operation: operation, code: code, detail: detail)
    }
}
