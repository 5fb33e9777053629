import CofferAgentProtocol
import CofferBlocking
import CofferCrypto
import CofferMIME
import CofferOpenPGP
import CofferStore
import CofferSync
import Foundation
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// The user's own OpenPGP keys in the agent (or a command's own process): generated or imported through
/// `CofferOpenPGP` (RNP) and sealed in the store (migration `v7-openpgp-keys`), listed, and their certificates
/// exported.
///
/// Every RNP call is blocking CPU work and runs on ``BlockingPool`` with standard error silenced
/// (``RNPDiagnostics``): RNP prints parser diagnostics there, some quoting what the key file holds.
public struct OpenPGPKeyHandler: Sendable {
    /// What it uses.
    public typealias Dependencies = HasMailStore

    private let dependencies: any Dependencies

    /// A handler over one account's container.
    public init(dependencies: any Dependencies) { self.dependencies = dependencies }

    /// The largest key file `import` reads.
    public static let maximumKeyFileBytes = 1 << 20

    /// The user's keys, oldest first, then the correspondents' certificates (``OpenPGPKeyInfo/isCorrespondent``),
    /// oldest first.
    public func keys() async throws -> [OpenPGPKeyInfo] {
        let store = try dependencies.mailStore
        return try await store.openPGPKeys().map(Self.info) + store.contactKeys().map(Self.info)
    }

    /// Generates an Ed25519 key with an X25519 encryption subkey for `userID` (default: the sending address of the
    /// account's only submission server) and stores it sealed.
    ///
    /// - Throws: ``AgentFailure`` (`badRequest`) when no user id is given and the account has no sending address;
    ///   `OpenPGPError.invalidUserID(reason:)`; `StoreError.locked`.
    public func generate(userID requested: String?) async throws -> OpenPGPKeyInfo {
        let store = try dependencies.mailStore
        let userID: String
        if let requested { userID = requested } else { userID = try await Self.defaultUserID(in: store) }
        // The store is checked before the key is made, so a locked account costs no key generation.
        _ = try await store.openPGPKeys()
        let key = try await RNPDiagnostics.run { () throws(OpenPGPError) in try OpenPGP.generateKey(userID: userID) }
        let entry = try await store.addOpenPGPKey(
            fingerprint: key.fingerprint,
            userIDs: key.publicKey.userIDs,
            certificate: key.publicKey.bytes,
            secretKey: key.bytes
        )
        return Self.info(entry)
    }

    /// Imports the keys of the file at `path` (armored or binary): each secret key is the user's, stored sealed
    /// without its passphrase, after which the messages stored encrypted that the new keys open are decrypted
    /// (`MailStore.openStoredEncryptedMail()`); each certificate alone is a correspondent's, stored with the contacts
    /// of its user ids' addresses (`MailStore.addContactKey`). The passphrase is wiped when the import ends.
    ///
    /// - Parameters:
    ///   - path: An absolute path.
    ///   - passphrase: The keys' OpenPGP passphrase, when the person gave one.
    /// - Throws: ``AgentFailure`` with ``AgentFailure/Code/passphraseRequired`` when a secret key is protected and
    ///   no passphrase came; `OpenPGPError` (`malformed`, `wrongKeyCount`, `wrongPassphrase`); ``AgentFailure``
    ///   (`failed`) for a secret key stub, or a certificate with no email address, expired, revoked or one of the
    ///   user's own (nothing is stored then); `StoreError.openPGPKeyExists` when a secret key is stored already.
    public func importKeys(at path: String, passphrase: SecretBytes?) async throws -> [OpenPGPKeyInfo] {
        defer { passphrase?.wipe() }
        guard path.hasPrefix("/") else { throw AgentFailure(.badRequest, "The path of the key file must be absolute.") }
        let store = try dependencies.mailStore
        let stored = Set(try await store.openPGPKeys().map(\.fingerprint))
        let imported: [OpenPGPKeyImport]
        do {
            imported = try await RNPDiagnostics.run { () throws -> [OpenPGPKeyImport] in
                let data = try Self.readKeyFile(path)
                return try OpenPGP.importKeys(from: data) { passphrase }
            }
        } catch OpenPGPError.passphraseRequired(let fingerprint) {
            throw AgentFailure(
                .passphraseRequired,
                OpenPGPError.passphraseRequired(fingerprint: fingerprint).description
            )
        }
        let secrets = imported.compactMap(\.secretKey)
        guard !imported.contains(where: \.hasSecretStub) else {
            throw AgentFailure(
                .failed,
                "The file holds a secret key without usable secret parts (kept on a smartcard, or exported without "
                    + "them): import your own secret key, or a correspondent's public key."
            )
        }
        // A certificate without its secret key is a correspondent's, kept with the address book: checked whole
        // before anything is stored.
        let certificates = try imported.filter { !$0.isSecret }.map { key in
            try Self.correspondentKey(key.publicKey, own: stored)
        }
        guard secrets.allSatisfy({ !stored.contains($0.fingerprint) }) else { throw StoreError.openPGPKeyExists }
        var added: [OpenPGPKeyInfo] = []
        for (certificate, addresses) in certificates {
            let entry = try await store.addContactKey(
                fingerprint: certificate.fingerprint,
                userIDs: certificate.userIDs,
                addresses: addresses,
                certificate: certificate.bytes
            )
            added.append(Self.info(entry))
        }
        guard !secrets.isEmpty else { return added }
        return added + (try await Self.storeSecretKeys(secrets, in: store))
    }

    /// Stores `secrets` as the user's keys (sealed, without a passphrase), then decrypts the mail stored encrypted
    /// before them (docs/STORE.md, v8-openpgp-mail; the keys are stored whatever that finds).
    static func storeSecretKeys(_ secrets: [OpenPGPSecretKey], in store: MailStore) async throws -> [OpenPGPKeyInfo] {
        var added: [OpenPGPKeyInfo] = []
        for secret in secrets {
            let entry = try await store.addOpenPGPKey(
                fingerprint: secret.fingerprint,
                userIDs: secret.publicKey.userIDs,
                certificate: secret.publicKey.bytes,
                secretKey: secret.bytes
            )
            added.append(Self.info(entry))
        }
        _ = try? await store.openStoredEncryptedMail()
        return added
    }

    /// The certificate of the key with `fingerprint` (any case, spaces allowed), or of the default key,
    /// ASCII-armored.
    ///
    /// - Throws: `StoreError.openPGPKeyNotFound`.
    public func export(fingerprint: String?) async throws -> String {
        let entries = try await dependencies.mailStore.openPGPKeys()
        let entry: OpenPGPKeyEntry?
        if let fingerprint {
            let canonical = MailStore.canonicalFingerprint(fingerprint)
            entry = entries.first { $0.fingerprint == canonical }
        } else {
            entry = entries.first(where: \.isDefault)
        }
        guard let certificate = entry?.certificate else { throw StoreError.openPGPKeyNotFound }
        return try await RNPDiagnostics.run { () throws(OpenPGPError) in
            try OpenPGPPublicKey(bytes: certificate).armored
        }
    }

    /// The account's Autocrypt `prefer-encrypt`, `mutual` or `nopreference`, after setting it to `preferEncrypt`
    /// when given (`coffer key autocrypt --prefer-encrypt`).
    ///
    /// - Throws: ``AgentFailure`` (`badRequest`) for another value; `StoreError.locked`.
    public func autocrypt(preferEncrypt: String?) async throws -> String {
        let store = try dependencies.mailStore
        if let preferEncrypt {
            guard preferEncrypt == "mutual" || preferEncrypt == "nopreference" else {
                throw AgentFailure(.badRequest, "prefer-encrypt is mutual or nopreference.")
            }
            try await store.setAutocryptPreferEncrypt(mutual: preferEncrypt == "mutual")
        }
        return try await store.autocryptPreferEncryptMutual() ? "mutual" : "nopreference"
    }

    // MARK: - Pieces

    /// A correspondent's certificate with the addresses (and names) of its user ids, or why it cannot be used:
    /// one of the user's own keys, a key no message can be encrypted to (expired, revoked, signing only), a key
    /// with no user id that holds an email address.
    static func correspondentKey(
        _ certificate: OpenPGPPublicKey,
        own: Set<String>
    ) throws -> (OpenPGPPublicKey, [(name: String?, address: String)]) {
        guard !own.contains(certificate.fingerprint) else {
            throw AgentFailure(
                .failed,
                "The key \(certificate.fingerprint) is one of your own keys; its public key adds nothing."
            )
        }
        guard certificate.canEncrypt else {
            throw AgentFailure(
                .failed,
                "The key \(certificate.fingerprint) cannot be used: it is expired or revoked, or it has no "
                    + "encryption key. Ask its owner for a current one."
            )
        }
        let addresses = addresses(of: certificate.userIDs)
        guard !addresses.isEmpty else {
            throw AgentFailure(
                .failed,
                "The key \(certificate.fingerprint) has no user id with an email address, so it belongs to no "
                    + "contact."
            )
        }
        return (certificate, addresses)
    }

    /// The email addresses of user ids (`Name <address>` or a bare address), each with its name, in order, once.
    static func addresses(of userIDs: [String]) -> [(name: String?, address: String)] {
        var result: [(name: String?, address: String)] = []
        for userID in userIDs {
            guard let parsed = MailAddress.parseList(userID).first,
                let canonical = MailStore.canonicalAddress(parsed.address),
                !result.contains(where: { $0.address == canonical })
            else { continue }
            result.append((parsed.name, canonical))
        }
        return result
    }

    static func info(_ entry: ContactKeyEntry) -> OpenPGPKeyInfo {
        OpenPGPKeyInfo(
            fingerprint: entry.fingerprint,
            userIDs: entry.userIDs,
            created: entry.created,
            isDefault: false,
            correspondent: true
        )
    }

    static func info(_ entry: OpenPGPKeyEntry) -> OpenPGPKeyInfo {
        OpenPGPKeyInfo(
            fingerprint: entry.fingerprint,
            userIDs: entry.userIDs,
            created: entry.created,
            isDefault: entry.isDefault
        )
    }

    /// `Name <address>` (or `<address>`) of the sending address of the account's only submission server.
    static func defaultUserID(in store: MailStore) async throws -> String {
        let address: String
        let name: String?
        do {
            let from = try await WritingHandler.sendingAddress(nil, in: store)
            (address, name) = (from.address, from.name)
        } catch let failure as AgentFailure where failure.code == .badRequest {
            throw Self.userIDNeeded(failure.message)
        } catch SyncError.noAccount {
            throw Self.userIDNeeded("no mail server account is set up.")
        }
        guard let name = name?.trimmingCharacters(in: .whitespaces), !name.isEmpty else { return "<\(address)>" }
        return "\(name) <\(address)>"
    }

    static func userIDNeeded(_ why: String) -> AgentFailure {
        AgentFailure(
            .badRequest,
            "The key needs a user id, given as \"Name <address>\": the account has no single sending address ("
                + why.trimmingCharacters(in: CharacterSet(charactersIn: ".")) + ")."
        )
    }

    /// The key file's bytes in locked memory (it may hold an unprotected secret key); the read buffer is zeroed.
    static func readKeyFile(_ path: String) throws -> SecretBytes {
        guard var bytes = try SecureFile.read(path, maxBytes: maximumKeyFileBytes) else {
            throw AgentFailure(.failed, "There is no key file at that path.")
        }
        defer { bytes.withUnsafeMutableBytes { if let base = $0.baseAddress { explicit_bzero(base, $0.count) } } }
        return SecretBytes(copying: bytes)
    }
}
