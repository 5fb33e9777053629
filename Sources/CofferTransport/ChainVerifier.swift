import Foundation
import NIOCore
import SwiftASN1
@_spi(FixedExpiryValidationTime) import X509

/// Chain, hostname and pin checks of a presented chain, in that order. Pure apart from the async chain building;
/// the TLS callback runs it and tests call it directly.
struct ChainVerifier: Sendable {
    var serverName: String
    var port: Int
    var roots: CertificateStore
    var policy: PinPolicy?

    struct Verified: Sendable {
        var chainDER: [[UInt8]]
        var chainPins: [SPKIPin]
        var evaluation: PinEvaluation
    }

    func verify(presented: [[UInt8]], now: Date) async throws(TransportError) -> Verified {
        guard !presented.isEmpty else { throw .noCertificate(host: serverName) }
        let certificates: [Certificate]
        do {
            certificates = try presented.map { try Certificate(derEncoded: $0) }
        } catch {
            throw .untrustedChain(host: serverName, reason: "a certificate in the chain cannot be parsed")
        }
        let leaf = certificates[0]
        let intermediates = CertificateStore(certificates.dropFirst())

        // 1. The chain alone (RFC 5280: signatures, validity at `now`, CA constraints) to a trusted root.
        var chainOnly = Verifier(rootCertificates: roots) { RFC5280Policy(fixedExpiryValidationTime: now) }
        guard case .validCertificate = await chainOnly.validate(leaf: leaf, intermediates: intermediates) else {
            if now > leaf.notValidAfter {
                throw .certificateExpired(host: serverName, notValidAfter: leaf.notValidAfter)
            }
            if now < leaf.notValidBefore {
                throw .certificateNotYetValid(host: serverName, notValidBefore: leaf.notValidBefore)
            }
            throw .untrustedChain(host: serverName, reason: "no path from the presented chain to a trusted root")
        }

        // 2. The same with the server identity (RFC 6125: subjectAltName DNS or IP) added.
        let isIP = (try? SocketAddress(ipAddress: serverName, port: 0)) != nil
        var withIdentity = Verifier(rootCertificates: roots) {
            RFC5280Policy(fixedExpiryValidationTime: now)
            ServerIdentityPolicy(serverHostname: isIP ? nil : serverName, serverIP: isIP ? serverName : nil)
        }
        guard case .validCertificate(let chain) = await withIdentity.validate(leaf: leaf, intermediates: intermediates)
        else {
            throw .hostnameMismatch(host: serverName)
        }

        // 3. The pins, over the validated chain (leaf to trusted root), as TrustKit does.
        let validated = Array(chain)
        var pins: [SPKIPin] = []
        var ders: [[UInt8]] = []
        for certificate in validated {
            pins.append(try SPKIPin(certificate: certificate))
            var serializer = DER.Serializer()
            do {
                try serializer.serialize(certificate)
            } catch {
                throw .untrustedChain(host: serverName, reason: "a certificate in the chain cannot be encoded")
            }
            ders.append(serializer.serializedBytes)
        }
        let evaluation = policy?.evaluate(hostname: serverName, chainPins: pins, now: now) ?? .notPinned
        if case .refused(_, let failure) = evaluation { throw failure }
        return Verified(chainDER: ders, chainPins: pins, evaluation: evaluation)
    }
}
