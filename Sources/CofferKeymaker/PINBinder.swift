import CofferCrypto
import CofferTPM
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

/// The hardware a PIN can be bound to (a TPM 2.0 on Linux). The Keymaker keeps the software attempt guard as the
/// first line and asks the binder for the counter and the bound KEK; the binder's own lockout is the floor.
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

/// The ``PINBinder`` on a TPM 2.0 reached through a tpm2-tss TCTI configuration. Each call opens its own connection
/// and closes it (a TPM resource manager or swtpm serves one client at a time).
public struct TPMPINBinder: PINBinder {
    /// The TCTI configuration (`device:/dev/tpmrm0`, `swtpm:host=127.0.0.1,port=P`).
    public let configuration: String

    /// A binder on the TPM reached through `configuration`.
    public init(configuration: String) { self.configuration = configuration }

    /// The binder of this machine: `COFFER_TPM_TCTI` if set, else `/dev/tpmrm0` when it exists, else `nil` (no
    /// TPM). Nothing is opened until a call needs the TPM.
    public static func fromEnvironment() -> TPMPINBinder? {
        TPMContext.defaultConfiguration().map(TPMPINBinder.init(configuration:))
    }

    /// Opens and closes a connection: whether a TPM answers at all.
    ///
    /// - Throws: ``KeymakerError/tpmUnavailable`` when none does.
    public func probe() throws(KeymakerError) { try withTPM { _ throws(TPMError) in } }

    /// See ``PINBinder/bind(pinKEK:counterPepper:keepingCounterOf:)``.
    public func bind(
        pinKEK: SymmetricKey,
        counterPepper: SecretBytes,
        keepingCounterOf previous: [UInt8]?
    )
        throws(KeymakerError) -> PINBinding
    {
        try withTPM { context throws(TPMError) in
            let made: (binding: TPMPINBinding, boundKEK: SymmetricKey)
            if let previous {
                let old = try TPMPINBinding(serialized: previous)
                made = try TPMPINBinding.create(in: context, pinKEK: pinKEK, keeping: old.counter)
            } else {
                made = try TPMPINBinding.create(in: context, pinKEK: pinKEK, devicePepper: counterPepper)
            }
            let value = try made.binding.attemptCounterValue(in: context, devicePepper: counterPepper)
            return PINBinding(record: made.binding.serialized, boundKEK: made.boundKEK, counter: value)
        }
    }

    /// See ``PINBinder/counterValue(_:counterPepper:)``.
    public func counterValue(_ record: [UInt8], counterPepper: SecretBytes) throws(KeymakerError) -> UInt64 {
        try withTPM { context throws(TPMError) in
            try TPMPINBinding(serialized: record).attemptCounterValue(in: context, devicePepper: counterPepper)
        }
    }

    /// See ``PINBinder/incrementCounter(_:counterPepper:)``.
    public func incrementCounter(_ record: [UInt8], counterPepper: SecretBytes) throws(KeymakerError) -> UInt64 {
        try withTPM { context throws(TPMError) in
            try TPMPINBinding(serialized: record).incrementAttemptCounter(in: context, devicePepper: counterPepper)
        }
    }

    /// See ``PINBinder/boundKEK(_:pinKEK:)``.
    public func boundKEK(_ record: [UInt8], pinKEK: SymmetricKey) throws(KeymakerError) -> SymmetricKey? {
        try withTPM { context throws(TPMError) in
            let binding = try TPMPINBinding(serialized: record)
            do throws(TPMError) {
                return try binding.boundKEK(in: context, pinKEK: pinKEK)
            } catch {
                guard error == .authorizationFailed else { throw error }
                return nil
            }
        }
    }

    /// See ``PINBinder/delete(_:)``.
    public func delete(_ record: [UInt8]) throws(KeymakerError) {
        try withTPM { context throws(TPMError) in try TPMPINBinding(serialized: record).delete(in: context) }
    }

    private func withTPM<R>(_ body: (TPMContext) throws(TPMError) -> R) throws(KeymakerError) -> R {
        do {
            return try body(try TPMContext(configuration: configuration))
        } catch {
            throw KeymakerError(error)
        }
    }
}

extension KeymakerError {
    /// The Keymaker's reading of a TPM failure.
    init(_ error: TPMError) {
        switch error {
        case .unavailable: self = .tpmUnavailable
        case .lockedOut: self = .tpmLockedOut
        case .foreignObject, .nvIndexMissing: self = .tpmMismatch
        case .malformed(let what): self = .corrupt(what)
        default: self = .tpmFailed(error.description)
        }
    }
}
