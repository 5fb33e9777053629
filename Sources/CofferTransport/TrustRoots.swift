import Foundation
import SwiftASN1
import X509

/// The certificate authorities a connection trusts before its pins are checked.
public enum TrustRoots: Sendable, Hashable {
    /// The system trust store (/etc/ssl/certs/ca-certificates.crt on Debian).
    case system
    /// Only the CA certificates of a PEM bundle file given with the account (for a private CA).
    case caBundle(path: String)
    /// Only these CA certificates (for tests and callers that already hold them).
    case certificates([Certificate])

    /// The store the verifier builds chains to.
    ///
    /// - Throws: `TransportError.unreadableCABundle` if the bundle cannot be read or holds no certificate.
    func store() throws(TransportError) -> CertificateStore {
        switch self {
        case .system:
            return CertificateStore.systemTrustRoots
        case .certificates(let certificates):
            return CertificateStore(certificates)
        case .caBundle(let path):
            let text: String
            do {
                text = try String(contentsOfFile: path, encoding: .utf8)
            } catch {
                throw TransportError.unreadableCABundle(path: path, reason: "the file cannot be read as text")
            }
            let certificates: [Certificate]
            do {
                certificates = try PEMDocument.parseMultiple(pemString: text)
                    .filter { $0.discriminator == "CERTIFICATE" }
                    .map { try Certificate(pemDocument: $0) }
            } catch {
                throw TransportError.unreadableCABundle(path: path, reason: "it is not a PEM certificate bundle")
            }
            guard !certificates.isEmpty else {
                throw TransportError.unreadableCABundle(path: path, reason: "it holds no certificate")
            }
            return CertificateStore(certificates)
        }
    }
}
