import CofferBlocking
import CofferMIME
import CofferOpenPGP
import CofferStore

/// The `Autocrypt` header (Autocrypt Level 1) of the mail Coffer sends: the user's default OpenPGP key, reduced to
/// the primary key, the user id of the sending address and the encryption subkey, with the account's
/// `prefer-encrypt` (`coffer key autocrypt --prefer-encrypt`). No key of the user's, no header.
enum AutocryptOutgoing {
    /// The header for mail from `from`, or `nil` when the account has no default key (or it can no longer be
    /// encrypted to: expired, revoked).
    ///
    /// RNP runs on ``BlockingPool`` with its diagnostics off stderr (``RNPDiagnostics``); no secret key is read. A
    /// key record that cannot be read means no header: a message without `--sign` or `--encrypt` never failed on
    /// the keys, and does not now.
    ///
    /// - Throws: `StoreError.locked`.
    static func header(from: MailAddress, in store: MailStore) async throws -> OutgoingAutocrypt? {
        let keys: [OpenPGPKeyEntry]
        do { keys = try await store.openPGPKeys() } catch .locked { throw StoreError.locked } catch { return nil }
        guard let mine = keys.first(where: \.isDefault) else { return nil }
        let sender = MailStore.autocryptAddress(from.address)
        // The user id of the sending address; a key without one still gives its first (Level 1 does not require
        // the user id to match, and a recipient keys the state by the header's addr).
        let userID =
            mine.userIDs.first { userID in
                OpenPGPKeyHandler.addresses(of: [userID]).contains { MailStore.autocryptAddress($0.address) == sender }
            } ?? mine.userIDs.first
        guard let userID else { return nil }
        let mutual = try await store.autocryptPreferEncryptMutual()
        let certificate = mine.certificate
        let keyData = await RNPDiagnostics.run { () -> [UInt8]? in
            try? OpenPGPPublicKey(bytes: certificate).autocryptKeyData(userID: userID)
        }
        guard let keyData, !keyData.isEmpty, keyData.count <= AutocryptHeader.maximumKeyDataSize else { return nil }
        return OutgoingAutocrypt(keyData: keyData, preferEncryptMutual: mutual)
    }

    /// Autocrypt Level 1's "encrypt" recommendation for `message` (the user's own preference, mutual, is the
    /// caller's to check): every To, Cc and Bcc address has a peer state with a key that is not stale and prefers
    /// `mutual`. No recipient, or a peer record that cannot be read: `false`.
    static func recommendsEncryption(_ message: OutgoingMessage, in store: MailStore) async -> Bool {
        let recipients = message.to + message.cc + message.bcc
        guard !recipients.isEmpty else { return false }
        for recipient in recipients {
            guard let peer = (try? await store.autocryptPeer(for: recipient.address)) ?? nil, peer.preferEncryptMutual,
                !peer.certificate.isEmpty, !peer.isStale
            else { return false }
        }
        return true
    }
}
