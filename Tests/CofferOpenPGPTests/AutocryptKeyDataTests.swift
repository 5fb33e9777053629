import CofferCrypto
import Foundation
import Testing

@testable import CofferOpenPGP

/// The minimal certificate of the `Autocrypt` header (RNP's `rnp_key_export_autocrypt`): GnuPG imports it and finds
/// the primary key, the one user id asked for and the encryption subkey, nothing else; a user id not the key's is
/// refused.
@Suite struct AutocryptKeyDataTests {
    @Test func gnuPGImportsTheMinimalKeyWithOneUserIDAndTheEncryptionSubkey() throws {
        let tools = try InteropTools()
        // A key with two user ids: the keydata carries only the one of the sending address.
        let fingerprint = try tools.gpgGenerateKey(userID: "Bob <bob@example.org>")
        try tools.gpg(["--quick-add-uid", fingerprint, "Bob at home <bob@home.example>"])
        let certificate = try OpenPGPPublicKey(bytes: try tools.gpg(["--export", fingerprint]).output)
        #expect(certificate.userIDs.count == 2)
        let keyData = try certificate.autocryptKeyData(userID: "Bob at home <bob@home.example>")
        #expect(keyData.count < certificate.bytes.count)

        let other = try InteropTools()
        try other.gpg(["--import"], input: keyData)
        let listing = try other.gpg(["--with-colons", "--list-keys", fingerprint]).text
        let uids = listing.split(separator: "\n").filter { $0.hasPrefix("uid:") }
        #expect(uids.count == 1 && uids[0].contains("bob@home.example"))
        let subkeys = listing.split(separator: "\n").filter { $0.hasPrefix("sub:") }
        #expect(subkeys.count == 1 && subkeys[0].split(separator: ":", omittingEmptySubsequences: false)[11] == "e")
        // Read back by RNP: one key, encryptable, the same fingerprint.
        let reread = try OpenPGPPublicKey(bytes: keyData)
        #expect(
            reread.fingerprint == fingerprint && reread.canEncrypt
                && reread.userIDs == ["Bob at home <bob@home.example>"]
        )

        #expect(throws: OpenPGPError.self) { _ = try certificate.autocryptKeyData(userID: "Eve <eve@example.org>") }
    }
}
