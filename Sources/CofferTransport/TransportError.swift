import Foundation

/// Every way a pinned TLS connection or its configuration can fail.
///
/// Descriptions are written for the person who set up the account: they name the host and, for a pin failure, the
/// pins expected and seen (public key hashes, not secrets). None of them carries a password, token or message text.
public enum TransportError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The pin policy cannot be enforced as written (fewer than two pins, a malformed pin, a bad host, …).
    case invalidPinPolicy(host: String, reason: String)
    /// The stored pin policy has a format version this build does not know.
    case unsupportedPinPolicyVersion(Int)
    /// The CA bundle given for the account could not be read or holds no certificate.
    case unreadableCABundle(path: String, reason: String)
    /// The server's certificate chain does not lead to a trusted root (unknown or rogue CA, bad signature).
    case untrustedChain(host: String, reason: String)
    /// The server's certificate is outside its validity period.
    case certificateExpired(host: String, notValidAfter: Date)
    /// The server's certificate is not yet valid.
    case certificateNotYetValid(host: String, notValidBefore: Date)
    /// The server's certificate does not name the host we connected to.
    case hostnameMismatch(host: String)
    /// No key of the validated chain matches the host's pins.
    case pinMismatch(host: String, expected: [String], seen: [String])
    /// Every pin of the policy is in the served chain, so there is no backup pin to move to.
    case noBackupPin(host: String, pins: [String])
    /// The server presented no certificate.
    case noCertificate(host: String)
    /// The TCP connection could not be made.
    case connectFailed(host: String, port: Int, reason: String)
    /// The connection or the TLS handshake took longer than allowed.
    case timedOut(host: String, port: Int)
    /// The TLS handshake failed for a reason other than certificate checks (protocol, cipher, closed early).
    case handshakeFailed(host: String, reason: String)
    /// An HTTP exchange over an established connection failed (the answer was cut short, too large, unreadable).
    case httpFailed(host: String, reason: String)

    /// A sentence for the person reading it.
    public var description: String {
        switch self {
        case .invalidPinPolicy(let host, let reason):
            "The pin policy for \(host) is not valid: \(reason)."
        case .unsupportedPinPolicyVersion(let version):
            "The pin policy has format version \(version), which this version of Coffer cannot read."
        case .unreadableCABundle(let path, let reason):
            "The CA bundle \(path) could not be used: \(reason)."
        case .untrustedChain(let host, let reason):
            "The certificate of \(host) is not trusted (\(reason)); the connection was refused."
        case .certificateExpired(let host, let date):
            "The certificate of \(host) expired on \(Self.format(date)); the connection was refused."
        case .certificateNotYetValid(let host, let date):
            "The certificate of \(host) is not valid before \(Self.format(date)); the connection was refused."
        case .hostnameMismatch(let host):
            "The certificate presented for \(host) is issued for another name; the connection was refused."
        case .pinMismatch(let host, let expected, let seen):
            "The connection to \(host) was refused because none of its pinned keys (expected "
                + "\(expected.joined(separator: ", "))) is in the chain it presented (seen \(seen.joined(separator: ", ")))."
        case .noBackupPin(let host, let pins):
            "The pin policy for \(host) has no backup pin: all its pins (\(pins.joined(separator: ", "))) are in the "
                + "chain the server presents; add the pin of a spare key kept elsewhere, then connect again."
        case .noCertificate(let host):
            "\(host) presented no certificate; the connection was refused."
        case .connectFailed(let host, let port, let reason):
            "Could not connect to \(host) port \(port): \(reason)."
        case .timedOut(let host, let port):
            "The connection to \(host) port \(port) timed out."
        case .handshakeFailed(let host, let reason):
            "The TLS handshake with \(host) failed: \(reason)."
        case .httpFailed(let host, let reason):
            "The HTTP exchange with \(host) failed: \(reason)."
        }
    }

    private static func format(_ date: Date) -> String {
        date.formatted(.iso8601)
    }
}
