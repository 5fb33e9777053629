import CofferCrypto
import CofferKeychain
import Crypto
import NIOConcurrencyHelpers

/// The Keymaker's keychain records for one account: wraps, the protection record, the attempt record and the sealed
/// autolock setting. Synchronous and `Sendable`, so the slow part of a PIN attempt (waiting for the attempt lock and
/// the KDF) runs off the Keymaker's actor.
struct ProtectionVault: Sendable {
    enum Services {
        static let protection = "coffer.protection"
        static let attempts = "coffer.attempts"
        static let autolock = "coffer.autolock"
        static func wrap(_ strategy: ProtectionStrategy) -> String { "coffer.mainkey.\(strategy.rawValue)" }
    }

    /// Serialises attempts in this process when the keychain cannot lock across processes (the in-memory one).
    private static let processLock = NIOLock()

    let keychain: any Keychain
    let account: String

    func address(_ strategy: ProtectionStrategy) -> KeychainAddress {
        KeychainAddress(service: Services.wrap(strategy), account: account)
    }

    var protectionAddress: KeychainAddress { KeychainAddress(service: Services.protection, account: account) }
    var attemptsAddress: KeychainAddress { KeychainAddress(service: Services.attempts, account: account) }
    var autolockAddress: KeychainAddress { KeychainAddress(service: Services.autolock, account: account) }

    /// Runs `body` holding the account's attempt lock: a `flock` shared by every process using the same keychain
    /// folder (``KeychainLocking``), else a lock for this process.
    func exclusively<R>(_ body: () -> R) throws(KeymakerError) -> R {
        if let locking = keychain as? any KeychainLocking {
            do {
                return try locking.withExclusiveLock(named: "coffer.attempts.\(account)", body)
            } catch {
                throw .keychain(error)
            }
        }
        return Self.processLock.withLock { body() }
    }

    // MARK: Items

    func read(_ address: KeychainAddress) throws(KeymakerError) -> [UInt8]? {
        try call { () throws(KeychainError) in try keychain.readIfPresent(address) }?.withUnsafeBytes { Array($0) }
    }

    func readSecret(_ address: KeychainAddress) throws(KeymakerError) -> SecretBytes {
        try call { () throws(KeychainError) in try keychain.read(address) }
    }

    func set(_ bytes: [UInt8], at address: KeychainAddress) throws(KeymakerError) {
        try setSecret(SecretBytes(copying: bytes), at: address)
    }

    func setSecret(_ value: SecretBytes, at address: KeychainAddress) throws(KeymakerError) {
        try call { () throws(KeychainError) in
            try keychain.set(value, at: address, accessibility: .afterFirstUnlockThisDeviceOnly)
        }
    }

    func delete(_ address: KeychainAddress) throws(KeymakerError) {
        try call { () throws(KeychainError) in try keychain.delete(address) }
    }

    // MARK: Records

    func readProtection() throws(KeymakerError) -> Set<ProtectionStrategy>? {
        guard let bytes = try read(protectionAddress) else { return nil }
        return try ProtectionRecords.decodeProtection(bytes)
    }

    func writeProtection(_ strategies: Set<ProtectionStrategy>) throws(KeymakerError) {
        try set(ProtectionRecords.encodeProtection(strategies), at: protectionAddress)
    }

    func readAttempts() throws(KeymakerError) -> ProtectionRecords.Attempts? {
        guard let bytes = try read(attemptsAddress) else { return nil }
        return try ProtectionRecords.Attempts(decoding: bytes)
    }

    /// The attempt record, or `nil` when it is missing, edited or from another device: a record that cannot be
    /// trusted counts as exhausted, never as a reset. Storage failures (permissions, I/O) are thrown instead.
    func readAttemptsOrExhausted() throws(KeymakerError) -> ProtectionRecords.Attempts? {
        do {
            return try readAttempts()
        } catch .corrupt, .keychain(.corruptItem), .keychain(.deviceMismatch) {
            return nil
        }
    }

    func writeAttempts(_ attempts: ProtectionRecords.Attempts) throws(KeymakerError) {
        try set(attempts.encoded(), at: attemptsAddress)
    }

    private func call<R>(_ body: () throws(KeychainError) -> R) throws(KeymakerError) -> R {
        do { return try body() } catch { throw .keychain(error) }
    }
}

/// One PIN attempt, whole: under the account's attempt lock it reads the record, asks the ``AttemptGuard``, makes
/// the counted attempt durable, runs the KDF, opens the wrap and (on success) resets the count. Parallel attempts
/// in any number of processes are therefore counted one by one, and a killed process has already paid its guess.
struct PINAttempt: Sendable {
    enum Outcome: Sendable {
        /// The PIN opened the wrap.
        case opened(SecretBytes)
        /// Wrong PIN, counted.
        case wrong(attemptsLeft: Int)
        /// The limit is reached: the caller destroys the key. `counted` when this very attempt reached it.
        case exhausted(counted: Bool)
    }

    let vault: ProtectionVault
    let pepper: SecretBytes
    let context: EnvelopeContext
    let limit: Int
    let allowInsecureKDF: Bool
    let clock: any KeymakerClock
    /// The TPM a bound wrap needs (``PINElement/tpm``).
    let binder: (any PINBinder)?
    let counterPepper: SecretBytes

    func run(_ pin: SecretBytes) -> Result<Outcome, KeymakerError> {
        do {
            return try vault.exclusively {
                Result<Outcome, KeymakerError> { () throws(KeymakerError) in try locked(pin) }
            }
        } catch {
            return .failure(error)
        }
    }

    private func locked(_ pin: SecretBytes) throws(KeymakerError) -> Outcome {
        guard let wrapBytes = try vault.read(vault.address(.pin)) else {
            // A listed wrap that is gone: a parallel attempt reached the limit and is destroying the key (wraps go
            // first, the protection record last), as ``Keymaker/recover()`` reads it too.
            guard let strategies = try vault.readProtection() else { throw .notSetUp }
            throw strategies.contains(.pin) ? .mainKeyDestroyed : .strategyNotActive(.pin)
        }
        let wrap = try ProtectionRecords.PINWrap(decoding: wrapBytes)
        let stored = try vault.readAttemptsOrExhausted()
        var guardian =
            stored.map { AttemptGuard(failures: $0.failures, lastFailure: $0.lastFailure, limit: limit) }
            ?? .exhausted(limit: limit)
        let now = clock.now().wallSeconds
        switch guardian.check(now: now) {
        case .destroy:
            return .exhausted(counted: false)
        case .tooSoon(let until):
            if guardian.lastFailure != stored?.lastFailure {
                try vault.writeAttempts(.init(failures: guardian.failures, lastFailure: guardian.lastFailure))
            }
            throw .tooSoon(retryAfterSeconds: Int(clamping: until.subtractingReportingOverflow(now).partialValue))
        case .allow:
            break
        }
        // A bound wrap: the record must follow the TPM's counter. The record is written ahead of the increment, so
        // it may be one ahead (a lost increment); an older record (restored from a copy) counts as exhausted.
        var counter: UInt64?
        if let binding = wrap.binding {
            guard let binder else { throw .tpmUnavailable }
            let current = try binder.counterValue(binding, counterPepper: counterPepper)
            guard current < UInt64.max, let recorded = stored?.counter, recorded == current || recorded == current + 1
            else {
                return .exhausted(counted: false)
            }
            counter = current + 1
        }
        let before = guardian
        // Count the attempt durably before trying it: killing the process mid-check cannot win a free guess.
        guardian.recordAttempt(now: now)
        try vault.writeAttempts(.init(failures: guardian.failures, lastFailure: guardian.lastFailure, counter: counter))
        if let binding = wrap.binding, let binder {
            _ = try binder.incrementCounter(binding, counterPepper: counterPepper)
        }
        let pinKEK: SymmetricKey
        do {
            pinKEK = try PINKeyDerivation.deriveKey(
                pin: pin,
                salt: wrap.salt,
                parameters: wrap.parameters,
                devicePepper: pepper,
                allowInsecureParameters: allowInsecureKDF
            )
        } catch {
            throw .crypto(error)
        }
        var kek = pinKEK
        if let binding = wrap.binding, let binder {
            do {
                // The TPM checks the PIN and counts a wrong one against its own lockout.
                guard let bound = try binder.boundKEK(binding, pinKEK: pinKEK) else {
                    return guardian.attemptsLeft > 0
                        ? .wrong(attemptsLeft: guardian.attemptsLeft) : .exhausted(counted: true)
                }
                kek = bound
            } catch .tpmLockedOut {
                // The TPM checked nothing: the attempt is given back (the counter stays advanced).
                try? vault.writeAttempts(
                    .init(failures: before.failures, lastFailure: before.lastFailure, counter: counter)
                )
                throw .tpmLockedOut
            }
        }
        let secret: SecretBytes
        do {
            secret = try Envelope.openSecret(wrap.envelope, with: EnvelopeKey(kek), context: context)
        } catch .wrongKey {
            // Another PIN derives another KEK, whose key id does not match the wrap's.
            return guardian.attemptsLeft > 0 ? .wrong(attemptsLeft: guardian.attemptsLeft) : .exhausted(counted: true)
        } catch {
            throw .corrupt("PIN wrap")
        }
        guard secret.count == MainKey.byteCount else { throw .corrupt("PIN wrap") }
        guardian.succeeded()
        // Still under the lock, so a parallel failure cannot be reset away. Losing this write leaves a higher count.
        try? vault.writeAttempts(.init(failures: 0, lastFailure: 0, counter: counter))
        return .opened(secret)
    }
}
