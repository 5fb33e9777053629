import CofferCrypto
import Crypto

/// Where a PIN's wrap is checked: in software only (scrypt with the device pepper, which a copy of the disk lets a
/// thief repeat offline), or behind a TPM whose dictionary-attack lockout counts every wrong PIN itself.
public enum PINElement: String, Sendable, Equatable, CaseIterable, CustomStringConvertible {
    /// The PIN KEK wraps the MainKey directly (PIN wrap v1).
    case software
    /// The PIN KEK only unseals a share sealed by this machine's TPM; the two together wrap the MainKey (PIN wrap
    /// v2), and an NV counter on the TPM makes the attempt record rollback-proof.
    case tpm

    /// `software` or `TPM`, as `coffer status` prints it.
    public var description: String { self == .tpm ? "TPM" : "software" }
}

/// A new hardware binding of a PIN KEK: the record to store beside the wrap, the KEK that wraps the MainKey and
/// the attempt counter's current value.
public struct PINBinding: Sendable {
    /// The stored binding (TPM PIN binding v1, docs/FORMAT.md).
    public var record: [UInt8]
    /// The key that wraps the MainKey.
    public var boundKEK: SymmetricKey
    /// The attempt counter's value now.
    public var counter: UInt64

    /// Wraps the parts.
    public init(record: [UInt8], boundKEK: SymmetricKey, counter: UInt64) {
        self.record = record
        self.boundKEK = boundKEK
        self.counter = counter
    }
}

/// The hardware a PIN can be bound to (a TPM 2.0 on Linux: `TPMPINBinder` in CofferKeymakerTPM, which the composition
/// root hands to each Keymaker). The Keymaker keeps the software attempt guard as the first line and asks the binder
/// for the counter and the bound KEK; the binder's own lockout is the floor.
public protocol PINBinder: Sendable {
    /// Binds `pinKEK`: a fresh sealed share, and a new attempt counter unless `previous` (the current binding's
    /// record) names one to keep.
    func bind(
        pinKEK: SymmetricKey,
        counterPepper: SecretBytes,
        keepingCounterOf previous: [UInt8]?
    )
        throws(KeymakerError) -> PINBinding
    /// The attempt counter's current value.
    func counterValue(_ record: [UInt8], counterPepper: SecretBytes) throws(KeymakerError) -> UInt64
    /// Advances the attempt counter and returns its new value.
    func incrementCounter(_ record: [UInt8], counterPepper: SecretBytes) throws(KeymakerError) -> UInt64
    /// The bound KEK, or `nil` when the hardware refused `pinKEK` (a wrong PIN, which it counted).
    ///
    /// - Throws: ``KeymakerError/tpmLockedOut`` past the hardware's lockout threshold.
    func boundKEK(_ record: [UInt8], pinKEK: SymmetricKey) throws(KeymakerError) -> SymmetricKey?
    /// Deletes the binding's counter (logout, or the PIN removed or rebound); succeeds if it is gone.
    func delete(_ record: [UInt8]) throws(KeymakerError)
}

/// Hardware that seals a small secret under an auth value so that only this machine opens it (a TPM 2.0 on Linux:
/// `TPMKeySealer` in CofferKeymakerTPM). ``SoftwareSecureElement`` seals its private key with one when it is given
/// one.
public protocol HardwareSealer: Sendable {
    /// `secret` sealed under `authValue`, or `nil` when the hardware does not answer (the caller then keeps the
    /// secret in software).
    func seal(_ secret: SecretBytes, authValue: SecretBytes) throws(KeymakerError) -> [UInt8]?
    /// The secret `sealed` holds.
    ///
    /// - Throws: ``KeymakerError/tpmUnavailable`` when the hardware does not answer, ``KeymakerError/tpmMismatch``
    ///   when it did not seal `sealed`.
    func unseal(_ sealed: [UInt8], authValue: SecretBytes) throws(KeymakerError) -> SecretBytes
}
