import CofferAgentProtocol
import CofferBlocking
import CofferCrypto
import CofferMIME
import CofferOpenPGP
import CofferStore

/// Outgoing mail signed and encrypted as PGP/MIME (RFC 3156) before it is queued (`--sign`, `--encrypt`): the
/// message's MIME entity, as the writer writes it, is signed with the user's default key (a detached SHA-256
/// signature, `multipart/signed`) or encrypted to every recipient's key and the user's own, signed inside when both
/// are asked (`multipart/encrypted`). RNP does the cryptography (`CofferOpenPGP`); this only chooses the keys and
/// wraps the result.
///
/// It runs in the person's request (`sendDraft`), so the secret key is read from the store while the account is
/// unlocked and never by the outbox, which sends the finished bytes as background work.
enum OpenPGPOutgoing {
    /// `message` signed (`sign`) and/or encrypted (`encrypt`), its content replaced by the PGP/MIME body.
    ///
    /// The keys are chosen before any work: with `encrypt`, every To, Cc and Bcc address needs a correspondent's key
    /// (`coffer key import`) or one of the user's own keys; the user's default key is added as a recipient, so the
    /// Sent copy reads back. RNP runs on ``BlockingPool`` with its diagnostics off stderr (``RNPDiagnostics``); the
    /// plaintext entity is zeroed after use.
    ///
    /// - Throws: ``AgentFailure`` (`badRequest`) naming each address without a key, or when the user has no key;
    ///   `OpenPGPError` (a key expired since it was imported: `noEncryptionKey`); `ComposeError` (`notSevenBit`);
    ///   `StoreError.locked`.
    static func protect(
        _ message: OutgoingMessage,
        sign: Bool,
        encrypt: Bool,
        in store: MailStore
    ) async throws -> OutgoingMessage {
        guard sign || encrypt else { return message }
        let own = try await store.openPGPKeys()
        guard let mine = own.first(where: \.isDefault) else {
            throw AgentFailure(
                .badRequest,
                "--sign and --encrypt need an OpenPGP key of yours: `coffer key generate` or `coffer key import FILE`."
                    + " Nothing was sent."
            )
        }
        var certificates: [String: [UInt8]] = [:]
        if encrypt {
            var missing: [String] = []
            var seen = Set<String>()
            for recipient in message.to + message.cc + message.bcc {
                guard let address = MailStore.canonicalAddress(recipient.address), seen.insert(address).inserted
                else { continue }
                var found = try await store.contactKeys(for: address).map { ($0.fingerprint, $0.certificate) }
                for key in own
                where OpenPGPKeyHandler.addresses(of: key.userIDs).contains(where: { $0.address == address }) {
                    found.append((key.fingerprint, key.certificate))
                }
                // A key from the address's Autocrypt header only when the user holds none for it: an imported key
                // wins over an unauthenticated one.
                if found.isEmpty, let peer = try await store.autocryptPeer(for: address),
                    let fingerprint = peer.fingerprint, !peer.certificate.isEmpty
                {
                    found.append((fingerprint, peer.certificate))
                }
                if found.isEmpty { missing.append(address) }
                for (fingerprint, certificate) in found { certificates[fingerprint] = certificate }
            }
            guard missing.isEmpty else {
                throw AgentFailure(
                    .badRequest,
                    "There is no OpenPGP key for \(missing.joined(separator: ", ")), so the message cannot be "
                        + "encrypted to \(missing.count == 1 ? "it" : "them"). Import "
                        + (missing.count == 1 ? "its" : "each one's")
                        + " public key (`coffer key import FILE`) or send without --encrypt. Nothing was sent."
                )
            }
            certificates[mine.fingerprint] = mine.certificate
        }
        let secret = sign ? try await store.openPGPSecretKey(fingerprint: mine.fingerprint) : nil
        let recipients = certificates.sorted { $0.key < $1.key }.map(\.value)
        let body = try await RNPDiagnostics.run { () throws -> PreparedBody in
            var entity = try PGPMIME.entity(of: message)
            defer { PGPMIME.zero(&entity) }
            let signer = try secret.map { try OpenPGPSecretKey(bytes: $0) }
            if encrypt {
                let keys = try recipients.map { try OpenPGPPublicKey(bytes: $0) }
                return PGPMIME.encrypted(try OpenPGP.encrypt(entity, to: keys, signedBy: signer, armored: true))
            }
            guard let signer else { throw AgentFailure(.failed, "No signing key was read.") }
            let signature = try OpenPGP.signDetached(entity, with: signer, armored: true)
            return PGPMIME.signed(entity: entity, signature: signature, micalg: "pgp-sha256")
        }
        var protected = message
        protected.text = ""
        protected.html = nil
        protected.attachments = []
        protected.preparedBody = body
        return protected
    }
}
