import CofferBlocking
import CofferCrypto
import CofferKeychain
import Crypto

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Holds one account's MainKey: creates it at login, keeps it wrapped at rest by one or more protection strategies,
/// puts it in memory on unlock, removes (and zeroes) it on lock, autolock or logout, and destroys it after too many
/// wrong PINs.
///
/// Its machines: the ``AttemptGuard`` (PIN attempts, counted under a lock shared by every process), the
/// ``Autolock`` state machine, and the protection change, whose ``ProtectionStep``s write the new wrap before they
/// remove the old one and commit through one protection record, so a crash at any step leaves a state from which
/// ``recover()`` (run automatically before the first operation) reaches a consistent one without losing the key.
///
/// Changing or lowering protection, and logging out, take a fresh proof (``UnlockMethod``) by a current strategy,
/// even while the key is in memory: whoever sits at an unlocked session still needs the PIN to change protection.
///
/// Its isolated code runs on its own ``BlockingSerialExecutor``, one job at a time on a thread of ``BlockingPool``:
/// the keychain calls it makes (`flock`, `fsync`) and a TPM's socket block that thread, never an event loop or the
/// cooperative pool, and its code stays synchronous between suspension points. A PIN attempt (the cross-process
/// lock and the KDF) runs on another pool thread, off the actor.
public actor Keymaker {
    /// Tunables.
    public struct Configuration: Sendable {
        /// scrypt cost for new PINs.
        public var scrypt: ScryptParameters
        /// Accept scrypt parameters below the minimum (tests and benchmarks only; never settable outside the package).
        package var allowInsecureKDF: Bool
        /// Failed PIN attempts that destroy the MainKey.
        public var maxFailedAttempts: Int
        /// Shortest accepted PIN or passphrase, in characters (``PINPolicy``).
        public var minimumPINLength: Int
        /// The autolock policy of a new account.
        public var defaultAutolock: AutolockPolicy
        /// Runs with the account name after the account's MainKey was destroyed (logout, too many wrong PINs, a
        /// tampered attempt record): the app deletes the account's store and caches here, which nothing can read
        /// any more. The Keymaker knows nothing of them.
        public var onDestroy: (@Sendable (_ account: String) -> Void)?

        /// The production configuration: ``ScryptParameters/standard``, 10 attempts, PINs of 6 or more characters,
        /// autolock after 5 minutes.
        public init(
            scrypt: ScryptParameters = .standard,
            maxFailedAttempts: Int = 10,
            minimumPINLength: Int = PINPolicy.minimumLength,
            defaultAutolock: AutolockPolicy = .after(seconds: 300),
            onDestroy: (@Sendable (_ account: String) -> Void)? = nil
        ) {
            self.scrypt = scrypt
            self.allowInsecureKDF = false
            self.maxFailedAttempts = maxFailedAttempts
            self.minimumPINLength = minimumPINLength
            self.defaultAutolock = defaultAutolock
            self.onDestroy = onDestroy
        }

        /// A configuration that accepts scrypt parameters below the minimum: tests and benchmarks only.
        package init(
            scrypt: ScryptParameters,
            allowInsecureKDF: Bool,
            maxFailedAttempts: Int = 10,
            minimumPINLength: Int = PINPolicy.minimumLength,
            defaultAutolock: AutolockPolicy = .after(seconds: 300),
            onDestroy: (@Sendable (_ account: String) -> Void)? = nil
        ) {
            self.scrypt = scrypt
            self.allowInsecureKDF = allowInsecureKDF
            self.maxFailedAttempts = maxFailedAttempts
            self.minimumPINLength = minimumPINLength
            self.defaultAutolock = defaultAutolock
            self.onDestroy = onDestroy
        }
    }

    /// How to unlock, and the proof a protection change or a logout takes.
    public enum UnlockMethod: Sendable {
        /// The `none` strategy: the key is read from the keychain.
        case none
        /// The PIN strategy.
        case pin(SecretBytes)
        /// The secure element strategy; `reason` is shown when presence is asked for.
        case secureElement(reason: String)
    }

    /// Wall-clock seconds a PIN attempt must wait after `failures` failures; see ``AttemptGuard/delay(afterFailures:)``.
    public static func delay(afterFailures failures: Int) -> Int { AttemptGuard.delay(afterFailures: failures) }

    /// The executor the actor's code runs on (see the type's documentation).
    private nonisolated let executor = BlockingSerialExecutor()

    /// The actor's executor: a serial executor over ``BlockingPool``.
    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    /// The account this Keymaker serves.
    public nonisolated let account: String
    /// Events: key obtained, key removed (with reason), unlock failed (attempts left), setting fallback.
    public nonisolated let events: AsyncStream<KeymakerEvent>

    private let vault: ProtectionVault
    private let pinPepper: SecretBytes
    private let secureElement: (any SecureElement)?
    private let pinBinder: (any PINBinder)?
    private let counterPepper: SecretBytes
    private let clock: any KeymakerClock
    private let configuration: Configuration

    /// How many wrong PINs in a row destroy the MainKey.
    public nonisolated var failedAttemptLimit: Int { configuration.maxFailedAttempts }
    private let eventSink: AsyncStream<KeymakerEvent>.Continuation
    private var mainKey: MainKey?
    private var autolock: Autolock
    private var timer: Task<Void, Never>?
    private var timerWake: UInt64?
    private var recovered = false
    private var stepHook: (@Sendable (ProtectionStep) throws -> Void)?
    private var autolockFallback: AutolockFallback?

    /// Creates the Keymaker for `account`.
    ///
    /// - Parameters:
    ///   - account: The account name or id.
    ///   - keychain: Where wraps and records live. A ``KeychainLocking`` keychain (``FileKeychain``) makes PIN
    ///     attempts count across processes.
    ///   - device: The device identity; its pepper goes into the PIN KDF.
    ///   - secureElement: The secure element, if this device has one.
    ///   - pinBinder: The hardware a PIN can be bound to, which the composition root hands in (this machine's TPM,
    ///     `TPMPINBinder` in CofferKeymakerTPM); `nil` (the default) has no TPM: a TPM-bound PIN is refused with
    ///     ``KeymakerError/tpmUnavailable``. Nothing reaches it unless a PIN is bound
    ///     (``activatePIN(_:authorizedBy:element:)``).
    ///   - clock: The clock autolock and the attempt guard use.
    ///   - configuration: Tunables.
    public init(
        account: String,
        keychain: any Keychain,
        device: DeviceIdentity,
        secureElement: (any SecureElement)? = nil,
        pinBinder: (any PINBinder)? = nil,
        clock: any KeymakerClock = SystemClock(),
        configuration: Configuration = Configuration()
    ) {
        self.account = account
        self.vault = ProtectionVault(keychain: keychain, account: account)
        self.pinPepper = device.pepper(label: "pin-kdf")
        self.secureElement = secureElement
        self.pinBinder = pinBinder
        self.counterPepper = device.pepper(label: "pin-tpm-counter")
        self.clock = clock
        self.configuration = configuration
        self.autolock = Autolock(policy: configuration.defaultAutolock)
        (events, eventSink) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(64))
    }

    deinit {
        timer?.cancel()
        mainKey?.wipe()
        eventSink.finish()
    }

    // MARK: - State

    /// Whether the MainKey is out of memory.
    public var isLocked: Bool { mainKey == nil }

    /// Whether this account has a MainKey on this device.
    public func isSetUp() throws(KeymakerError) -> Bool {
        try prepare()
        return try vault.readProtection() != nil
    }

    /// The active protection strategies.
    public func strategies() throws(KeymakerError) -> Set<ProtectionStrategy> {
        try prepare()
        guard let strategies = try vault.readProtection() else { throw .notSetUp }
        return strategies
    }

    /// Consecutive failed PIN attempts so far.
    ///
    /// - Throws: ``KeymakerError/mainKeyDestroyed`` after destroying the key when a PIN is active and its attempt
    ///   record cannot be trusted (missing, edited, from another device): such a record counts as exhausted.
    public func failedAttempts() throws(KeymakerError) -> Int {
        try prepare()
        guard let strategies = try vault.readProtection(), strategies.contains(.pin) else { return 0 }
        guard let record = try vault.readAttemptsOrExhausted() else {
            try destroy(reason: .tooManyAttempts)
            throw .mainKeyDestroyed
        }
        return record.failures
    }

    /// What holds this account's secure element key (``SecureElement/holder(label:)``), or `nil` without a secure
    /// element.
    public func secureElementHolder() -> String? { secureElement?.holder(label: secureElementLabel) }

    /// Where the active PIN is checked (software, or a TPM), or `nil` when no PIN is active.
    public func pinElement() throws(KeymakerError) -> PINElement? {
        try prepare()
        guard let strategies = try vault.readProtection(), strategies.contains(.pin) else { return nil }
        return try storedPINWrap()?.element
    }

    /// The autolock policy in force.
    public var autolockPolicy: AutolockPolicy { autolock.policy }

    /// Why the policy in force is the most private fallback instead of the stored one, if it is (`nil` when the
    /// stored setting was read). Also reported as ``KeymakerEvent/autolockSettingFallback(_:)``.
    public var autolockSettingFallback: AutolockFallback? { autolockFallback }

    /// Seconds until autolock fires, if a deadline is set.
    public func secondsUntilAutolock() -> Int? {
        guard let deadline = autolock.deadline else { return nil }
        let now = clock.now().boot
        return deadline > now ? Int((deadline - now + 999_999_999) / 1_000_000_000) : 0
    }

    /// Installs a hook that runs after each step of a protection change (crash tests: throw to stop there).
    package func setStepHook(_ hook: (@Sendable (ProtectionStep) throws -> Void)?) { stepHook = hook }

    // MARK: - Login, logout

    /// Creates the account's MainKey (login), protected by `none`, and leaves it unlocked.
    ///
    /// - Throws: ``KeymakerError/alreadySetUp`` if a key exists.
    public func createMainKey() throws(KeymakerError) { try createMainKey(injected: nil) }

    /// Creates the account's MainKey from given bytes instead of random ones (tests that scan storage for them).
    package func createMainKey(injected: SecretBytes?) throws(KeymakerError) {
        try prepare()
        guard try vault.readProtection() == nil else { throw .alreadySetUp }
        let key = injected.map { MainKey(secret: $0) } ?? MainKey.generate()
        try vault.setSecret(key.secret, at: vault.address(.none))
        try step(.noneWritten)
        try vault.writeProtection([.none])
        try step(.recordWritten)
        install(key)
        try storeAutolock(configuration.defaultAutolock, with: key)
    }

    /// Logs out: after a fresh proof by a current strategy (a wrong PIN counts as a failed attempt), destroys the
    /// MainKey and every wrap and record of the account. Every byte sealed under the key becomes unreadable.
    /// `lastUse`, when given, gets the key once between the proof and the destruction.
    public func logout(
        authorizedBy proof: UnlockMethod,
        beforeDestroying lastUse: (@Sendable (MainKey) async -> Void)? = nil
    ) async throws(KeymakerError) {
        let key = try await authenticate(proof)
        // A last use of the key, such as opening a token to end a session elsewhere; it cannot stop the logout.
        await lastUse?(key)
        key.wipe()
        try destroy(reason: .logout)
    }

    /// The exit for a forgotten PIN: destroys the account's MainKey without a proof, when the caller passes the
    /// account's name as the person typed it after being warned that everything will be lost.
    ///
    /// - Throws: ``KeymakerError/confirmationMismatch`` if `typedName` is not the account's name.
    public func eraseForgotten(confirmingAccountName typedName: String) throws(KeymakerError) {
        guard typedName == account else { throw .confirmationMismatch }
        try destroy(reason: .logout)
    }

    /// Destroys the MainKey and every wrap and record of the account, then runs ``Configuration/onDestroy``.
    package func destroy(reason: LockReason = .logout) throws(KeymakerError) {
        removeKey(reason: reason)
        let binding = try? storedPINWrap()?.binding
        // Wraps go first: once they are gone the key cannot be recovered, whatever happens next.
        for strategy in ProtectionStrategy.allCases { try vault.delete(vault.address(strategy)) }
        try step(.wrapsDeleted)
        // The TPM's counter goes next; without its wrap it guards nothing (a missing TPM leaves it behind).
        if let binding { try? pinBinder?.delete(binding) }
        if let secureElement { try secureElement.deleteKey(label: secureElementLabel) }
        try step(.elementKeyDeleted)
        for address in [vault.attemptsAddress, vault.autolockAddress, vault.protectionAddress] {
            try vault.delete(address)
        }
        configuration.onDestroy?(account)
        eventSink.yield(.mainKeyDestroyed(reason))
    }

    // MARK: - Unlock and lock

    /// Puts the MainKey in memory (nothing to do if it is there).
    ///
    /// - Throws: ``KeymakerError/strategyNotActive(_:)``, ``KeymakerError/wrongPIN(attemptsLeft:)``,
    ///   ``KeymakerError/tooSoon(retryAfterSeconds:)``, ``KeymakerError/mainKeyDestroyed``,
    ///   ``KeymakerError/presenceNotConfirmed`` and storage errors.
    public func unlock(_ method: UnlockMethod) async throws(KeymakerError) {
        try prepare()
        guard try vault.readProtection() != nil else { throw .notSetUp }
        if mainKey != nil { return }
        let key = try await authenticate(method)
        // Another call may have unlocked while this one waited.
        if mainKey != nil {
            key.wipe()
            return
        }
        install(key)
        loadAutolock()
    }

    /// Removes the MainKey from memory and zeroes it.
    public func lock(reason: LockReason = .user) { removeKey(reason: reason) }

    /// The MainKey, while unlocked. A ``KeyUse/userRequest`` counts as activity for the autolock interval; a
    /// ``KeyUse/background`` use never does, so background work cannot hold the account unlocked.
    ///
    /// - Throws: ``KeymakerError/locked`` while locked.
    public func mainKey(for use: KeyUse) throws(KeymakerError) -> MainKey {
        guard mainKey != nil else { throw .locked }
        if use == .userRequest { perform(autolock.activity(clock.now())) }
        guard let current = self.mainKey else { throw .locked }
        return current
    }

    /// The app went to the background: locks at once under ``AutolockPolicy/onBackground``.
    public func enteredBackground() { perform(autolock.enteredBackground(clock.now())) }

    /// Re-checks the autolock deadline and the clocks now (the timer does this on its own too).
    public func checkAutolock() { perform(autolock.tick(clock.now())) }

    /// Changes the autolock policy; the policy is stored sealed under the MainKey.
    public func setAutolock(_ policy: AutolockPolicy) throws(KeymakerError) {
        let key = try mainKey(for: .userRequest)
        try storeAutolock(policy, with: key)
        autolockFallback = nil
        perform(autolock.policyChanged(to: policy, clock.now()))
    }

    // MARK: - Protection changes

    /// Protects the MainKey with `newPIN` (scrypt with the device pepper), after a fresh proof by a current
    /// strategy. Replaces `none`; keeps a secure element wrap if there is one; changes the PIN if one is set.
    ///
    /// With `element` ``PINElement/tpm`` the PIN KEK only unseals a share sealed by the TPM (the TPM counts every
    /// wrong PIN and locks out past its threshold), and the attempt record follows a TPM NV counter. A PIN already
    /// bound keeps its counter; a TPM-bound PIN replaced by a software one has its counter deleted.
    ///
    /// - Returns: What a thief with a copy of the disk would pay to try every PIN of this one's shape, using the
    ///   time this KDF run took.
    /// - Throws: ``KeymakerError/pinTooShort(minimumLength:)``, ``KeymakerError/pinTooLong(maximumBytes:)``, the
    ///   proof's errors (a wrong PIN is counted), ``KeymakerError/tpmUnavailable`` (before the proof: nothing is
    ///   changed or counted) and other TPM errors, storage errors.
    @discardableResult
    public func activatePIN(
        _ newPIN: SecretBytes,
        authorizedBy proof: UnlockMethod,
        element: PINElement = .software
    ) async throws(KeymakerError) -> PINCostEstimate {
        try PINPolicy.validate(newPIN, minimumLength: configuration.minimumPINLength)
        if element == .tpm, pinBinder == nil { throw .tpmUnavailable }
        let key = try await authenticateForChange(proof)
        var salt = [UInt8](repeating: 0, count: 16)
        var generator = SystemRandomNumberGenerator()
        for index in salt.indices { salt[index] = generator.next() }
        let started = ContinuousClock.now
        let kek = try derivePINKey(newPIN, salt: salt, parameters: configuration.scrypt)
        let elapsed = ContinuousClock.now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let previous = try strategies().contains(.pin) ? try storedPINWrap()?.binding : nil
        var wrapKEK = kek
        var binding: [UInt8]?
        // The attempt record keeps following the counter of a bound wrap until the new wrap replaces it.
        var counter = previous == nil ? nil : try vault.readAttemptsOrExhausted()?.counter
        if element == .tpm, let pinBinder {
            let made = try pinBinder.bind(pinKEK: kek, counterPepper: counterPepper, keepingCounterOf: previous)
            (wrapKEK, binding, counter) = (made.boundKEK, made.record, made.counter)
        }
        let envelope: [UInt8]
        do {
            envelope = try key.secret.withUnsafeBytes { raw throws(CofferCryptoError) in
                try Envelope.seal(raw, with: EnvelopeKey(wrapKEK), context: pinContext)
            }
        } catch {
            throw .crypto(error)
        }
        let wrap = ProtectionRecords.PINWrap(
            parameters: configuration.scrypt,
            salt: salt,
            binding: binding,
            envelope: envelope
        )
        let vault = self.vault
        try vault.exclusively { [counter] in
            Result<Void, KeymakerError> { () throws(KeymakerError) in
                try vault.writeAttempts(.init(failures: 0, lastFailure: 0, counter: counter))
            }
        }.get()
        try step(.attemptsWritten)
        try vault.set(wrap.encoded(), at: vault.address(.pin))
        try step(.wrapWritten)
        try commit(adding: .pin)
        if let previous, binding == nil { try? pinBinder?.delete(previous) }
        return PINCostEstimate(pin: newPIN, secondsPerGuess: seconds)
    }

    /// Protects the MainKey with the secure element (HPKE to its key), after a fresh proof by a current strategy.
    /// Replaces `none`; keeps a PIN.
    public func activateSecureElement(authorizedBy proof: UnlockMethod) async throws(KeymakerError) {
        guard let secureElement else { throw .secureElementUnavailable }
        let key = try await authenticateForChange(proof)
        let publicKeyBytes = try secureElement.createKey(label: secureElementLabel)
        try step(.elementKeyCreated)
        let box: SecureElementSealedBox
        do {
            let publicKey = try P256.KeyAgreement.PublicKey(x963Representation: publicKeyBytes)
            var sender = try HPKE.Sender(
                recipientKey: publicKey,
                ciphersuite: .P256_SHA256_AES_GCM_256,
                info: Data(secureElementInfo)
            )
            let ciphertext = try key.secret.withUnsafeBytes { try sender.seal($0, authenticating: secureElementAAD) }
            box = SecureElementSealedBox(encapsulatedKey: Array(sender.encapsulatedKey), ciphertext: Array(ciphertext))
        } catch {
            throw .secureElementFailed("sealing to its public key failed")
        }
        try vault.set(ProtectionRecords.encodeSecureElementWrap(box), at: vault.address(.secureElement))
        try step(.wrapWritten)
        try commit(adding: .secureElement)
    }

    /// Removes strategies after a fresh proof by a current strategy. Removing the last one returns to `none`;
    /// `nil` removes every strategy (`protect none`).
    public func deactivate(
        _ strategy: ProtectionStrategy?,
        authorizedBy proof: UnlockMethod
    ) async throws(KeymakerError) {
        try prepare()
        if let strategy {
            guard strategy != .none, try strategies().contains(strategy) else { throw .strategyNotActive(strategy) }
        }
        let key = try await authenticateForChange(proof)
        var strategies = try self.strategies()
        if let strategy {
            guard strategies.contains(strategy) else { throw .strategyNotActive(strategy) }
            strategies.remove(strategy)
        } else {
            strategies.removeAll()
        }
        if strategies.isEmpty || strategies == [.none] {
            try vault.setSecret(key.secret, at: vault.address(.none))
            try step(.noneWritten)
            strategies = [.none]
        }
        try vault.writeProtection(strategies)
        try step(.recordWritten)
        try removeLeftovers(keeping: strategies)
    }

    // MARK: - Internals

    private var pinContext: EnvelopeContext { ["coffer.mainkey.pin.v1", account] }
    private var secureElementLabel: String { "coffer.mainkey.\(account)" }
    private var secureElementInfo: [UInt8] { Array("coffer.mainkey.se.v1".utf8) }
    private var secureElementAAD: [UInt8] { EnvelopeContext(["coffer.mainkey.se.v1", account]).encoded }

    private func step(_ step: ProtectionStep) throws(KeymakerError) {
        guard let stepHook else { return }
        do { try stepHook(step) } catch { throw .interrupted(step: step) }
    }

    /// Runs ``recover()`` once before the first operation.
    private func prepare() throws(KeymakerError) {
        guard !recovered else { return }
        try recover()
        recovered = true
    }

    /// Brings the stored state to a consistent one after a crash: removes wraps the protection record does not
    /// list, finishes an interrupted logout, and treats a missing or unreadable attempt record as exhausted.
    public func recover() throws(KeymakerError) {
        guard let strategies = try vault.readProtection() else {
            // No commit point: leftovers of an interrupted login or logout.
            try removeLeftovers(keeping: [])
            return
        }
        for strategy in strategies where try vault.read(vault.address(strategy)) == nil {
            // A listed wrap is gone: a logout was interrupted after deleting wraps. Finish it.
            try destroy(reason: .logout)
            return
        }
        try removeLeftovers(keeping: strategies)
        if strategies.contains(.pin), try vault.readAttemptsOrExhausted() == nil {
            try destroy(reason: .tooManyAttempts)
        }
    }

    /// A fresh MainKey from `method`, whether or not one is in memory. A PIN is a counted attempt; reaching the
    /// limit destroys the key.
    func authenticate(_ method: UnlockMethod) async throws(KeymakerError) -> MainKey {
        try prepare()
        guard let strategies = try vault.readProtection() else { throw .notSetUp }
        switch method {
        case .none:
            guard strategies.contains(.none) else { throw .strategyNotActive(.none) }
            let secret = try vault.readSecret(vault.address(.none))
            guard secret.count == MainKey.byteCount else { throw .corrupt("stored MainKey") }
            return MainKey(secret: secret)
        case .pin(let pin):
            guard strategies.contains(.pin) else { throw .strategyNotActive(.pin) }
            return try await attemptPIN(pin)
        case .secureElement(let reason):
            guard strategies.contains(.secureElement) else { throw .strategyNotActive(.secureElement) }
            guard let secureElement else { throw .secureElementUnavailable }
            let wrap = try vault.readSecret(vault.address(.secureElement))
            let box = try ProtectionRecords.decodeSecureElementWrap(wrap.withUnsafeBytes { Array($0) })
            let secret: SecretBytes
            do {
                secret = try await secureElement.open(
                    box,
                    label: secureElementLabel,
                    info: secureElementInfo,
                    authenticating: secureElementAAD,
                    reason: reason
                )
            } catch {
                eventSink.yield(.unlockFailed(attemptsLeft: nil))
                throw error
            }
            guard secret.count == MainKey.byteCount else { throw .corrupt("secure element wrap") }
            return MainKey(secret: secret)
        }
    }

    /// ``authenticate(_:)`` for a protection change: the protection may have changed while the proof was checked,
    /// so the caller re-reads it afterwards (everything after this call runs without suspension).
    private func authenticateForChange(_ proof: UnlockMethod) async throws(KeymakerError) -> MainKey {
        try await authenticate(proof)
    }

    /// Runs one PIN attempt off the actor (waiting for the cross-process attempt lock and the KDF), then acts on it.
    private func attemptPIN(_ pin: SecretBytes) async throws(KeymakerError) -> MainKey {
        let attempt = PINAttempt(
            vault: vault,
            pepper: pinPepper,
            context: pinContext,
            limit: configuration.maxFailedAttempts,
            allowInsecureKDF: configuration.allowInsecureKDF,
            clock: clock,
            binder: pinBinder,
            counterPepper: counterPepper
        )
        let result = await BlockingPool.run { attempt.run(pin) }
        switch result {
        case .success(.opened(let secret)):
            return MainKey(secret: secret)
        case .success(.wrong(let left)):
            eventSink.yield(.unlockFailed(attemptsLeft: left))
            throw .wrongPIN(attemptsLeft: left)
        case .success(.exhausted(let counted)):
            if counted { eventSink.yield(.unlockFailed(attemptsLeft: 0)) }
            try destroy(reason: .tooManyAttempts)
            throw .mainKeyDestroyed
        case .failure(let error):
            throw error
        }
    }

    private func commit(adding strategy: ProtectionStrategy) throws(KeymakerError) {
        var strategies = try vault.readProtection() ?? []
        strategies.remove(.none)
        strategies.insert(strategy)
        try vault.writeProtection(strategies)
        try step(.recordWritten)
        try removeLeftovers(keeping: strategies)
    }

    /// Deletes wraps (and their attempt record or element key) of strategies not in `strategies`.
    private func removeLeftovers(keeping strategies: Set<ProtectionStrategy>) throws(KeymakerError) {
        let binding = strategies.contains(.pin) ? nil : try? storedPINWrap()?.binding
        for strategy in ProtectionStrategy.allCases where !strategies.contains(strategy) {
            try vault.delete(vault.address(strategy))
        }
        if !strategies.contains(.pin) { try vault.delete(vault.attemptsAddress) }
        if let binding { try? pinBinder?.delete(binding) }
        if !strategies.contains(.secureElement), let secureElement {
            try secureElement.deleteKey(label: secureElementLabel)
        }
        if strategies.isEmpty { try vault.delete(vault.autolockAddress) }
        try step(.leftoversRemoved)
    }

    /// The stored PIN wrap, if there is one.
    private func storedPINWrap() throws(KeymakerError) -> ProtectionRecords.PINWrap? {
        guard let bytes = try vault.read(vault.address(.pin)) else { return nil }
        return try ProtectionRecords.PINWrap(decoding: bytes)
    }

    private func derivePINKey(
        _ pin: SecretBytes,
        salt: [UInt8],
        parameters: ScryptParameters
    )
        throws(KeymakerError) -> SymmetricKey
    {
        do {
            return try PINKeyDerivation.deriveKey(
                pin: pin,
                salt: salt,
                parameters: parameters,
                devicePepper: pinPepper,
                allowInsecureParameters: configuration.allowInsecureKDF
            )
        } catch {
            throw .crypto(error)
        }
    }

    private func install(_ key: MainKey) {
        mainKey?.wipe()
        mainKey = key
        eventSink.yield(.mainKeyObtained)
        perform(autolock.unlocked(clock.now()))
    }

    private func removeKey(reason: LockReason) {
        cancelTimer()
        autolock.locked()
        guard let key = mainKey else { return }
        key.wipe()
        mainKey = nil
        eventSink.yield(.mainKeyRemoved(reason))
    }

    private func perform(_ action: Autolock.Action) {
        switch action {
        case .none:
            cancelTimer()
        case .lockNow(let reason):
            removeKey(reason: reason)
        case .wake(let deadline):
            // A timer that wakes no later is kept: on waking it asks the state machine again, which then moves the
            // wake-up to the current deadline. So frequent key use does not start a task per use.
            if timer != nil, let timerWake, timerWake <= deadline { return }
            cancelTimer()
            timerWake = deadline
            let clock = self.clock
            timer = Task { [weak self] in
                do { try await clock.sleep(untilBoot: deadline) } catch { return }
                await self?.timerFired()
            }
        }
    }

    private func timerFired() {
        timer = nil
        timerWake = nil
        checkAutolock()
    }

    private func cancelTimer() {
        timer?.cancel()
        timer = nil
        timerWake = nil
    }

    private func storeAutolock(_ policy: AutolockPolicy, with key: MainKey) throws(KeymakerError) {
        let locked = try Locked(clearValue: policy, with: key, label: "settings.autolock")
        try vault.set(locked.encrypted, at: vault.autolockAddress)
    }

    /// Reads the stored policy; a missing or unreadable one falls back to the most private policy, and says so
    /// (``autolockSettingFallback`` and an event).
    private func loadAutolock() {
        guard let key = mainKey else { return }
        var policy = AutolockPolicy.mostPrivate
        var fallback: AutolockFallback?
        do {
            if let bytes = try vault.read(vault.autolockAddress) {
                policy = try Locked<AutolockPolicy>(encrypted: bytes, label: "settings.autolock").unlock(with: key)
            } else {
                fallback = .missing
            }
        } catch {
            fallback = .unreadable
        }
        autolockFallback = fallback
        if let fallback { eventSink.yield(.autolockSettingFallback(fallback)) }
        perform(autolock.policyChanged(to: policy, clock.now()))
    }
}
