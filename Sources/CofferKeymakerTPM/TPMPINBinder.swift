import CofferCrypto
import CofferKeymaker
import CofferTPM
import Crypto

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
