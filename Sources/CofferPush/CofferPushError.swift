/// Everything that can go wrong in CofferPush, written for the person who reads it.
///
/// No case carries plaintext, key material, an auth secret or a token's contents.
public enum CofferPushError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The body is shorter than its header says, or it ends before its last record (the 0x02 delimiter).
    case truncated
    /// The header's record size is below the minimum of 18 octets or above what this build accepts.
    case invalidRecordSize(UInt32)
    /// The header's key id has the wrong length for this use (Web Push needs a 65-octet P-256 public key).
    case invalidKeyID(expected: Int, actual: Int)
    /// A record is laid out wrongly: too short to hold a tag and a delimiter, or longer than the record size.
    case malformedRecord(String)
    /// A record's padding is not zeros after a 0x01 (more records follow) or 0x02 (last record) delimiter.
    case invalidPadding
    /// Authentication failed: wrong key or auth secret, or the bytes were changed.
    case authenticationFailed
    /// A public key is not a valid uncompressed P-256 point.
    case invalidPublicKey
    /// A key, salt or auth secret has the wrong length.
    case invalidLength(what: String, expected: Int, actual: Int)
    /// The plaintext does not fit: more than `maximum` octets for this padding or record size.
    case plaintextTooLarge(maximum: Int, actual: Int)
    /// A parameter given to the encoder is out of range.
    case invalidParameter(String)
    /// A VAPID token or `Authorization` header is not well formed.
    case malformedToken(String)
    /// A VAPID token's signature does not verify under the given public key.
    case invalidSignature
    /// A VAPID token has expired.
    case tokenExpired
    /// A VAPID token's expiry lies further in the future than the allowed lifetime (RFC 8292: at most 24 hours).
    case tokenLifetimeTooLong
    /// A VAPID token was made for another push service.
    case wrongAudience
    /// A VAPID subject is neither a `mailto:` nor an `https:` URI.
    case invalidSubject

    /// A sentence for people; never contains secret or message data.
    public var description: String {
        switch self {
        case .truncated: "The encrypted push message is cut short: it ends before its last record."
        case .invalidRecordSize(let size): "The encrypted message declares an invalid record size (\(size) octets)."
        case .invalidKeyID(let expected, let actual):
            "The encrypted message's key id is \(actual) octets long; \(expected) are required."
        case .malformedRecord(let why): "The encrypted message has a malformed record: \(why)."
        case .invalidPadding: "The encrypted message's padding is invalid."
        case .authenticationFailed:
            "The encrypted message failed its integrity check: wrong key or auth secret, or it was changed."
        case .invalidPublicKey: "The public key is not a valid uncompressed P-256 point."
        case .invalidLength(let what, let expected, let actual):
            "The \(what) must be \(expected) octets long, not \(actual)."
        case .plaintextTooLarge(let maximum, let actual):
            "The message is \(actual) octets long; at most \(maximum) fit."
        case .invalidParameter(let why): "Invalid encryption parameter: \(why)."
        case .malformedToken(let why): "The VAPID token is malformed: \(why)."
        case .invalidSignature: "The VAPID token's signature does not verify."
        case .tokenExpired: "The VAPID token has expired."
        case .tokenLifetimeTooLong: "The VAPID token expires too far in the future (at most 24 hours are allowed)."
        case .wrongAudience: "The VAPID token was made for another push service."
        case .invalidSubject: "The VAPID subject must be a mailto: or https: URI."
        }
    }
}
