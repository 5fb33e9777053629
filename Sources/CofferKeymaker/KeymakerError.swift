import CofferCrypto
import CofferKeychain

/// Everything that can go wrong in the Keymaker, written for the person who reads it. No case carries a PIN, a
/// key or message data.
public enum KeymakerError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The MainKey is not in memory; unlock first.
    case locked
    /// This account has no MainKey on this device (not logged in, or logged out).
    case notSetUp
    /// This account already has a MainKey.
    case alreadySetUp
    /// The PIN was wrong; `attemptsLeft` more failures destroy the MainKey.
    case wrongPIN(attemptsLeft: Int)
    /// Too many recent failures: the next PIN attempt is allowed after this many seconds.
    case tooSoon(retryAfterSeconds: Int)
    /// The MainKey was destroyed (too many wrong PINs, or the attempt record was tampered with); log in again.
    case mainKeyDestroyed
    /// The protection strategy is not active for this account.
    case strategyNotActive(ProtectionStrategy)
    /// A new PIN is shorter than the minimum (``PINPolicy``: 6 digits, or a passphrase of 6 characters).
    case pinTooShort(minimumLength: Int)
    /// A new PIN is longer than the maximum, in bytes of UTF-8.
    case pinTooLong(maximumBytes: Int)
    /// The typed confirmation (the account's name) did not match; nothing was erased.
    case confirmationMismatch
    /// No secure element is available on this device.
    case secureElementUnavailable
    /// The secure element refused: user presence was not confirmed.
    case presenceNotConfirmed
    /// The secure element failed.
    case secureElementFailed(String)
    /// A protection record is damaged.
    case corrupt(String)
    /// The keychain failed.
    case keychain(KeychainError)
    /// A cryptographic operation failed.
    case crypto(CofferCryptoError)
    /// A test hook stopped an operation between two steps (crash tests only).
    case interrupted(step: ProtectionStep)
    /// The PIN is bound to a TPM, or a TPM-bound PIN was asked for, and no TPM answers on this device.
    case tpmUnavailable
    /// The TPM is in dictionary-attack lockout after too many wrong PINs: it checks no PIN, right or wrong, until
    /// its recovery time has passed. This attempt was not counted.
    case tpmLockedOut
    /// The TPM does not hold this account's binding (another machine, a cleared TPM, or altered files).
    case tpmMismatch
    /// The TPM failed otherwise; the text names the operation and the TPM's answer, never a secret.
    case tpmFailed(String)

    /// A sentence for people.
    public var description: String {
        switch self {
        case .locked: "Coffer is locked; unlock it first."
        case .notSetUp: "This account has no key on this device."
        case .alreadySetUp: "This account already has a key on this device."
        case .wrongPIN(let left):
            left == 1 ? "Wrong PIN. One more wrong PIN erases this account's key." : "Wrong PIN. \(left) attempts left."
        case .tooSoon(let seconds): "Too many wrong PINs; try again in \(seconds) seconds."
        case .mainKeyDestroyed:
            "This account's key was erased after too many wrong PINs (or a tampered attempt record); log in again."
        case .strategyNotActive(let strategy): "\(strategy) protection is not active for this account."
        case .pinTooShort(let minimum):
            "That PIN is too short: use at least \(minimum) digits, or a passphrase of at least \(minimum) characters."
        case .pinTooLong(let maximum): "That PIN is too long: at most \(maximum) bytes."
        case .confirmationMismatch: "The typed name does not match the account; nothing was erased."
        case .secureElementUnavailable: "No secure element is available on this device."
        case .presenceNotConfirmed: "User presence was not confirmed, so the secure element did not open the key."
        case .secureElementFailed(let why): "The secure element failed: \(why)."
        case .corrupt(let what): "The \(what) is damaged."
        case .keychain(let error): error.description
        case .crypto(let error): error.description
        case .interrupted(let step): "The operation was interrupted after step \(step)."
        case .tpmUnavailable:
            "No TPM is available on this device (no /dev/tpmrm0, and COFFER_TPM_TCTI is not set or does not answer)."
        case .tpmLockedOut:
            "The TPM refuses PINs for now after too many wrong ones; try again after its lockout time has passed."
        case .tpmMismatch:
            "This device's TPM does not hold this account's PIN binding (another machine, a cleared TPM, or altered files)."
        case .tpmFailed(let why): "The TPM failed: \(why)"
        }
    }
}

/// The ways a MainKey can rest on the device.
public enum ProtectionStrategy: String, Sendable, CaseIterable, Codable, CustomStringConvertible {
    /// Stored in the keychain without a further wrap (the weakest; the seeds' "no protection").
    case none
    /// Wrapped with a key derived from a PIN (scrypt + device pepper).
    case pin
    /// Sealed to a secure element key that opens only with user presence.
    case secureElement = "secure-element"

    /// `none`, `pin` or `secure-element`.
    public var description: String { rawValue }

    var bit: UInt8 {
        switch self {
        case .none: 1
        case .pin: 2
        case .secureElement: 4
        }
    }
}

/// Why the MainKey left memory.
public enum LockReason: String, Sendable, Codable, CustomStringConvertible {
    /// The user (or a client) asked to lock.
    case user
    /// The autolock interval passed.
    case timeout
    /// The app went to the background under the `onBackground` policy.
    case background
    /// The wall clock jumped against the boot clock (clock tampering).
    case clockTampered = "clock-tampered"
    /// The account logged out and its key was destroyed.
    case logout
    /// Too many wrong PINs destroyed the key.
    case tooManyAttempts = "too-many-attempts"
    /// The process is shutting down.
    case shutdown

    /// The raw name.
    public var description: String { rawValue }
}

/// What the Keymaker reports on its ``Keymaker/events`` stream.
public enum KeymakerEvent: Sendable, Equatable {
    /// The MainKey is in memory.
    case mainKeyObtained
    /// The MainKey left memory (its bytes were zeroed).
    case mainKeyRemoved(LockReason)
    /// An unlock attempt failed; `attemptsLeft` is `nil` for methods without a limit.
    case unlockFailed(attemptsLeft: Int?)
    /// The MainKey and every wrap and record were destroyed (logout, too many wrong PINs, an untrusted attempt
    /// record), whether or not the key was in memory; ``Keymaker/Configuration/onDestroy`` has run.
    case mainKeyDestroyed(LockReason)
    /// The stored autolock setting could not be used, so the most private policy (``AutolockPolicy/mostPrivate``)
    /// is in force.
    case autolockSettingFallback(AutolockFallback)
}

/// Why the autolock setting fell back to the most private policy.
public enum AutolockFallback: String, Sendable, Equatable, Codable, CustomStringConvertible {
    /// No setting is stored for the account.
    case missing
    /// The stored setting could not be read or opened (damaged, tampered with, or a storage error).
    case unreadable

    /// A sentence for people.
    public var description: String {
        switch self {
        case .missing: "no autolock setting is stored, so the most private policy is in force"
        case .unreadable: "the autolock setting could not be read, so the most private policy is in force"
        }
    }
}
