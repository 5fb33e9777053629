import CofferBlocking
import CofferCrypto
import CofferKeychain
import Crypto

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A secure element in software: a P-256 private key in its own 0600 file, in a 0700 folder outside the keychain
/// folder, and every open gated by a ``PresenceAuthenticator``.
///
/// The key file is `"CFSE" | 0x01 | envelope(raw private key)`, sealed under a device-bound key, so copying the
/// folder to another machine opens nothing.
///
/// - Warning: Unlike a hardware element, the private key is in this process's memory while it opens a box, and a
///   process running as the same user with the device secret can read the key file. It adds a separate file, a
///   separate folder and a presence check. Given a ``HardwareSealer`` (this machine's TPM), a new key file holds the
///   private key sealed by it, which adds hardware binding.
public struct SoftwareSecureElement: SecureElement {
    static let magic: [UInt8] = [0x43, 0x46, 0x53, 0x45]
    private let folder: String
    private let fileKey: EnvelopeKey
    private let presence: any PresenceAuthenticator
    private let sealer: (any HardwareSealer)?
    private let tpmAuth: SecretBytes

    /// Uses the keys in `folder`, creating it with mode 0700.
    ///
    /// - Parameter sealer: This machine's TPM, which the composition root hands in (`TPMKeySealer` in
    ///   CofferKeymakerTPM); `nil` (the default) keeps keys in software. Where it answers, a new key file holds the
    ///   private key sealed by it (key file v2), so the file alone, even with the device secret, opens nothing.
    public init(
        folder: String,
        device: DeviceIdentity,
        presence: any PresenceAuthenticator,
        sealer: (any HardwareSealer)? = nil
    ) throws(KeymakerError) {
        self.folder = folder
        self.presence = presence
        self.sealer = sealer
        tpmAuth = device.pepper(label: "secure-element-tpm")
        do {
            fileKey = try EnvelopeKey(device.pepper(label: "software-secure-element"))
            try SecureFile.makePrivateDirectory(folder)
            try SecureFile.removeTemporaryLeftovers(in: folder)
        } catch {
            throw .crypto(error)
        }
    }

    /// See ``SecureElement/createKey(label:)``.
    public func createKey(label: String) throws(KeymakerError) -> [UInt8] {
        let key = P256.KeyAgreement.PrivateKey()
        var raw = Array(key.rawRepresentation)
        defer { for index in raw.indices { raw[index] = 0 } }
        if let sealed = try sealedByTPM(raw) {
            do { try SecureFile.writeAtomically(Self.magic + [2] + sealed, to: path(label)) } catch {
                throw .crypto(error)
            }
            return Array(key.publicKey.x963Representation)
        }
        do {
            let envelope = try Envelope.seal(raw, with: fileKey, context: context(label))
            try SecureFile.writeAtomically(Self.magic + [1] + envelope, to: path(label))
        } catch {
            throw .crypto(error)
        }
        return Array(key.publicKey.x963Representation)
    }

    /// See ``SecureElement/publicKey(label:)``.
    public func publicKey(label: String) throws(KeymakerError) -> [UInt8]? {
        guard let key = try privateKey(label) else { return nil }
        return Array(key.publicKey.x963Representation)
    }

    /// See ``SecureElement/open(_:label:info:authenticating:reason:)``.
    public func open(
        _ box: SecureElementSealedBox,
        label: String,
        info: [UInt8],
        authenticating aad: [UInt8],
        reason: String
    ) async throws(KeymakerError) -> SecretBytes {
        // The key file and the TPM are blocking I/O: read on the blocking pool, not on the caller's executor.
        let stored = try await BlockingPool.run { () throws(KeymakerError) in try privateKey(label) }
        guard let key = stored else { throw .secureElementFailed("its key is missing") }
        guard await presence.confirmPresence(reason: reason) else { throw .presenceNotConfirmed }
        do {
            var recipient = try HPKE.Recipient(
                privateKey: key,
                ciphersuite: .P256_SHA256_AES_GCM_256,
                info: Data(info),
                encapsulatedKey: Data(box.encapsulatedKey)
            )
            var plaintext = try recipient.open(box.ciphertext, authenticating: aad)
            defer { plaintext.resetBytes(in: 0..<plaintext.count) }
            return SecretBytes(copying: plaintext)
        } catch {
            throw .crypto(.authenticationFailed)
        }
    }

    /// See ``SecureElement/deleteKey(label:)``.
    public func deleteKey(label: String) throws(KeymakerError) {
        do { try SecureFile.remove(path(label)) } catch { throw .crypto(error) }
    }

    private func privateKey(_ label: String) throws(KeymakerError) -> P256.KeyAgreement.PrivateKey? {
        let file: [UInt8]?
        do { file = try SecureFile.read(path(label), maxBytes: 4096) } catch { throw .crypto(error) }
        guard let file else { return nil }
        guard file.count > 5, Array(file[0..<4]) == Self.magic, file[4] == 1 || file[4] == 2 else {
            throw .corrupt("secure element key file")
        }
        if file[4] == 2 { return try unsealedByTPM(Array(file[5...])) }
        do {
            let raw = try Envelope.openSecret(Array(file[5...]), with: fileKey, context: context(label))
            return try raw.withUnsafeBytes { try P256.KeyAgreement.PrivateKey(rawRepresentation: $0) }
        } catch CofferCryptoError.wrongKey {
            throw .keychain(.deviceMismatch)
        } catch {
            throw .corrupt("secure element key file")
        }
    }

    /// `TPM` when the key named `label` is sealed by the TPM (key file v2), else `software`.
    public func holder(label: String) -> String {
        guard let file = try? SecureFile.read(path(label), maxBytes: 4096), file.count > 5 else { return "software" }
        return file[4] == 2 ? "TPM" : "software"
    }

    /// The private key sealed by the TPM (noDA: its auth value is device-bound, not guessable), or `nil` when no
    /// TPM is configured or none answers (the key file is then v1).
    private func sealedByTPM(_ raw: [UInt8]) throws(KeymakerError) -> [UInt8]? {
        guard let sealer else { return nil }
        return try sealer.seal(SecretBytes(copying: raw), authValue: tpmAuth)
    }

    private func unsealedByTPM(_ bytes: [UInt8]) throws(KeymakerError) -> P256.KeyAgreement.PrivateKey {
        guard let sealer else { throw .tpmUnavailable }
        let raw = try sealer.unseal(bytes, authValue: tpmAuth)
        do {
            return try raw.withUnsafeBytes { try P256.KeyAgreement.PrivateKey(rawRepresentation: $0) }
        } catch {
            throw .corrupt("secure element key file")
        }
    }

    private func path(_ label: String) -> String {
        "\(folder)/\(Array(SHA256.hash(data: Array(label.utf8))).hexString).key"
    }

    private func context(_ label: String) -> EnvelopeContext { ["coffer.secure-element.key.v1", label] }
}
