import CofferCrypto

/// A MainKey sealed to a secure element key with HPKE (P-256, HKDF-SHA256, AES-256-GCM).
public struct SecureElementSealedBox: Sendable, Equatable {
    /// The HPKE encapsulated key (65 bytes for P-256).
    public var encapsulatedKey: [UInt8]
    /// The HPKE ciphertext with its tag.
    public var ciphertext: [UInt8]

    /// Creates a box.
    public init(encapsulatedKey: [UInt8], ciphertext: [UInt8]) {
        self.encapsulatedKey = encapsulatedKey
        self.ciphertext = ciphertext
    }
}

/// A place where a private key lives that never leaves it and that opens only with user presence: the Secure
/// Enclave on Apple devices, a TPM 2.0 later, ``SoftwareSecureElement`` now.
///
/// Sealing is done by the caller with the public key (no presence needed); only opening needs the element.
public protocol SecureElement: Sendable {
    /// Creates (or replaces) the key named `label` and returns its public key (X9.63 uncompressed P-256).
    func createKey(label: String) throws(KeymakerError) -> [UInt8]
    /// The public key named `label`, or `nil` if there is none.
    func publicKey(label: String) throws(KeymakerError) -> [UInt8]?
    /// Opens `box` with the private key `label` after confirming user presence with `reason`.
    ///
    /// - Throws: ``KeymakerError/presenceNotConfirmed`` if presence is not confirmed.
    func open(
        _ box: SecureElementSealedBox,
        label: String,
        info: [UInt8],
        authenticating aad: [UInt8],
        reason: String
    )
        async throws(KeymakerError) -> SecretBytes
    /// Deletes the key named `label`; succeeds if it does not exist.
    func deleteKey(label: String) throws(KeymakerError)
    /// What holds the private key named `label`, as `coffer status` names it: `software`, `TPM`.
    func holder(label: String) -> String
}

extension SecureElement {
    /// `software`, unless the element says otherwise.
    public func holder(label: String) -> String { "software" }
}

/// Confirms that a person is present. It proves presence, not identity: anyone at the keyboard can confirm.
public protocol PresenceAuthenticator: Sendable {
    /// Asks for confirmation; `true` only if a person confirmed.
    func confirmPresence(reason: String) async -> Bool
}
