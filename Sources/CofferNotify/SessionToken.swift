import CofferPush
import Crypto
import Foundation

/// A session's bearer token: 32 random bytes (256 bits), sent as `cnt1_` + base64url. Only SHA-256 of the 32 bytes
/// is stored, so a copy of the database does not hold a usable token.
public struct SessionToken: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The prefix that marks version 1 tokens (and makes them easy to find in a leaked log).
    public static let prefix = "cnt1_"
    /// The token's random bytes.
    let bytes: [UInt8]

    /// Makes a fresh random token.
    public init() {
        bytes = SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }
    }

    /// Parses the text a client sent; nil when it is not a version 1 token.
    public init?(text: some StringProtocol) {
        guard text.hasPrefix(Self.prefix), let bytes = Base64URL.decode(text.dropFirst(Self.prefix.count)),
            bytes.count == 32
        else { return nil }
        self.bytes = bytes
    }

    /// The text handed to the client once, at registration or refresh.
    public var text: String { Self.prefix + Base64URL.encode(bytes) }

    /// SHA-256 of the token bytes: what the database stores and looks up.
    public var hash: [UInt8] { Array(SHA256.hash(data: bytes)) }

    /// Never the token itself.
    public var description: String { "SessionToken(<redacted>)" }
    /// Same as `description`.
    public var debugDescription: String { description }
}

/// Compares two byte strings in time that depends only on their lengths.
func constantTimeEqual(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
    guard lhs.count == rhs.count else { return false }
    var difference: UInt8 = 0
    for index in lhs.indices { difference |= lhs[index] ^ rhs[index] }
    return difference == 0
}
