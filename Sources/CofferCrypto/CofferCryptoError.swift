/// Everything that can go wrong in CofferCrypto, written for the person who reads it.
///
/// No case carries key material, plaintext or a context's contents.
public enum CofferCryptoError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The bytes are too short to be an envelope or stream of this format.
    case truncated
    /// The bytes do not start with the expected magic: they are not a Coffer envelope or stream.
    case notCofferFormat
    /// The format version is one this build cannot read.
    case unsupportedVersion(UInt8)
    /// The algorithm byte names no algorithm this build knows.
    case unsupportedAlgorithm(UInt8)
    /// The ciphertext was sealed under another key.
    case wrongKey
    /// The ciphertext belongs to another place (table, column, row, file or item) than the one it was opened for.
    case wrongContext
    /// Authentication failed: the bytes were changed, cut short, reordered or extended.
    case authenticationFailed
    /// A stream's chunk size or layout is invalid.
    case malformedStream(String)
    /// The key has been wiped (for example by autolock) and can no longer be used.
    case keyWiped
    /// Key derivation parameters are outside the accepted range.
    case invalidKDFParameters(String)
    /// A key has the wrong length.
    case invalidKeyLength(expected: Int, actual: Int)
    /// The underlying cryptographic library reported a failure.
    case primitiveFailure(String)
    /// Reading or writing a file failed.
    case io(operation: String, errno: Int32)
    /// A file or folder that must be private is not: it belongs to another user or others may access it. Coffer
    /// refuses to use it rather than repair it, since someone may already have read or replaced it.
    case notPrivate(String, reason: String)

    /// A sentence for people; never contains secret or message data.
    public var description: String {
        switch self {
        case .truncated: "The encrypted data is too short; it was cut off or is not Coffer data."
        case .notCofferFormat: "The data is not in a Coffer encrypted format."
        case .unsupportedVersion(let version):
            "The encrypted data uses format version \(version), which this build cannot read."
        case .unsupportedAlgorithm(let id): "The encrypted data names an unknown algorithm (\(id))."
        case .wrongKey: "The encrypted data was sealed with a different key."
        case .wrongContext: "The encrypted data belongs to a different place and was not opened."
        case .authenticationFailed: "The encrypted data failed its integrity check; it was changed or damaged."
        case .malformedStream(let why): "The encrypted stream is malformed: \(why)."
        case .keyWiped: "The key was already erased from memory (the store locked); unlock again."
        case .invalidKDFParameters(let why): "The key derivation parameters are not acceptable: \(why)."
        case .invalidKeyLength(let expected, let actual): "A key must be \(expected) bytes long, not \(actual)."
        case .primitiveFailure(let what): "A cryptographic operation failed (\(what))."
        case .io(let operation, let code): "Could not \(operation): \(SystemError.message(for: code))."
        case .notPrivate(let path, let reason):
            "Coffer refuses to use \(path) because \(reason). If nobody else can have read or replaced it, make it "
                + "private again (owned by you, mode 700 for a folder or 600 for a file)."
        }
    }
}
