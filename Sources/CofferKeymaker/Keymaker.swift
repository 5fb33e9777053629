import CofferCrypto
import CofferKeychain
import Crypto
import Dispatch

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Holds one account's MainKey: creates it at login, keeps it wrapped at rest by one or more protection strategies,
/// puts it in memory on unlock, removes (and zeroes) it on lock, autolock or logout, and destroys it after too many
/// wrong PINs.
///
/// Every change of protection writes the new wrap before it removes the old one and commits through one protection
/// record, so a crash at any step leaves a state from which ``recover()`` (run automatically before the first
/// operation) reaches a consistent one without losing the key.
public actor Keymaker {
    /// Tunables.
    public struct Configuration: Sendable {
        /// scrypt cost for new PINs.
        public var scrypt: ScryptParameters
        /// Accept scrypt parameters below the minimum (tests only).
        public var allowInsecureKDF: Bool
        /// Failed PIN attempts that destroy the MainKey.
        public var maxFailedAttempts: Int
        /// Shortest accepted PIN, in characters.
        public var minimumPINLength: Int
        /// The autolock policy of a new account.
        public var defaultAutolock: AutolockPolicy

        /// The production configuration: ``ScryptParameters/standard``, 10 attempts, PINs of 4 or more characters,
        /// autolock after 5 minutes.
        public init(
            scrypt: ScryptParameters = .standard,
            allowInsecureKDF: Bool = false,
            maxFailedAttempts: Int = 10,
            minimumPINLength: Int = 4,
            defaultAutolock: AutolockPolicy = .after(seconds: 300)
        ) {
            self.scrypt = scrypt
            self.allowInsecureKDF = allowInsecureKDF
            self.maxFailedAttempts = maxFailedAttempts
            self.minimumPINLength = minimumPINLength
            self.defaultAutolock = defaultAutolock
        }
    }

    /// How to unlock.
    public enum UnlockMethod: Sendable {
        /// The `none` strategy: the key is read from the keychain.
        case none
        /// The PIN strategy.
        case pin(SecretBytes)
        /// The secure element strategy; `reason` is shown when presence is asked for.
        case secureElement(reason: String)
    }

    /// Wall-clock seconds a PIN attempt must wait after `failures` failures: none for the first three, then
    /// 30 s, 1 min, 5 min, 15 min, 30 min and 1 h.
    public static func delay(afterFailures failures: Int) -> Int {
        switch failures {
        case ..<4: 0
        case 4: 30
        case 5: 60
        case 6: 300
        case 7: 900
        case 8: 1800
        default: 3600
        }
    }

    /// The account this Keymaker serves.
    public nonisolated let account: String
    /// Events: key obtained, key removed (with reason), unlock failed (attempts left).
    public nonisolated let events: AsyncStream<KeymakerEvent>

    private let keychain: any Keychain
    private let pinPepper: SecretBytes
    private let secureElement: (any SecureElement)?
    private let clock: any KeymakerClock
    private let configuration: Configuration
    private let eventSink: AsyncStream<KeymakerEvent>.Continuation
    private var mainKey: MainKey?
    private var autolock: Autolock
    private var timer: Task<Void, Never>?
    private var timerWake: UInt64?
    private var recovered = false
    private var stepHook: (@Sendable (String) throws -> Void)?
    private let attemptWrites = DispatchQueue(label: "coffer.keymaker.attempts")
    private var pinAttemptRunning = false
    private var pinAttemptQueue: [CheckedContinuation<Void, Never>] = []

    /// Creates the Keymaker for `account`.
    ///
    /// - Parameters:
    ///   - account: The account name or id.
    ///   - keychain: Where wraps and records live.
    ///   - device: The device identity; its pepper goes into the PIN KDF.
    ///   - secureElement: The secure element, if this device has one.
    ///   - clock: The clock autolock and the attempt guard use.
    ///   - configuration: Tunables.
    public init(
        account: String,
        keychain: any Keychain,
        device: DeviceIdentity,
        secureElement: (any SecureElement)? = nil,
        clock: any KeymakerClock = SystemClock(),
        configuration: Configuration = Configuration()
    ) {
        self.account = account
        self.keychain = keychain
        self.pinPepper = device.pepper(label: "pin-kdf")
        self.secureElement = secureElement
        self.clock = clock
        self.configuration = configuration
        self.autolock = Autolock(policy: configuration.defaultAutolock)
        (events, eventSink) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(64))
    }

    deinit {
        attemptWrites.sync {}
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
        return try readProtection() != nil
    }

    /// The active protection strategies.
    public func strategies() throws(KeymakerError) -> Set<ProtectionStrategy> {
        try prepare()
        guard let strategies = try readProtection() else { throw .notSetUp }
        return strategies
    }

    /// Consecutive failed PIN attempts so far.
    public func failedAttempts() throws(KeymakerError) -> Int {
        try prepare()
        return try readAttempts()?.failures ?? 0
    }

    /// The autolock policy in force.
    public var autolockPolicy: AutolockPolicy { autolock.policy }

    /// Seconds until autolock fires, if a deadline is set.
    public func secondsUntilAutolock() -> Int? {
        guard let deadline = autolock.deadline else { return nil }
        let now = clock.now().boot
        return deadline > now ? Int((deadline - now + 999_999_999) / 1_000_000_000) : 0
    }

    /// Installs a hook that runs after each step of a protection change (crash tests: throw to stop there).
    public func setStepHook(_ hook: (@Sendable (String) throws -> Void)?) { stepHook = hook }

    // MARK: - Login, logout

    /// Creates the account's MainKey (login), protected by `none`, and leaves it unlocked.
    ///
    /// - Parameter injected: A given key instead of a random one (tests that scan storage for the key bytes).
    /// - Throws: ``KeymakerError/alreadySetUp`` if a key exists.
    public func createMainKey(injected: SecretBytes? = nil) throws(KeymakerError) {
        try prepare()
        guard try readProtection() == nil else { throw .alreadySetUp }
        let key = injected.map { MainKey(secret: $0) } ?? MainKey.generate()
        try keychainCall { () throws(KeychainError) in
            try keychain.set(key.secret, at: address(.none), accessibility: .afterFirstUnlockThisDeviceOnly)
        }
        try step("none-written")
        try writeProtection([.none])
        try step("record-written")
        install(key)
        try storeAutolock(configuration.defaultAutolock, with: key)
    }

    /// Destroys the MainKey and every wrap and record of the account (logout). Every byte sealed under the key
    /// becomes unreadable.
    public func destroy(reason: LockReason = .logout) throws(KeymakerError) {
        flush()
        removeKey(reason: reason)
        // Wraps go first: once they are gone the key cannot be recovered, whatever happens next.
        for strategy in ProtectionStrategy.allCases { try deleteItem(address(strategy)) }
        try step("wraps-deleted")
        if let secureElement { try secureElement.deleteKey(label: secureElementLabel) }
        try step("element-key-deleted")
        for service in [Services.attempts, Services.autolock, Services.protection] {
            try deleteItem(KeychainAddress(service: service, account: account))
        }
    }

    // MARK: - Unlock and lock

    /// Puts the MainKey in memory.
    ///
    /// - Throws: ``KeymakerError/strategyNotActive(_:)``, ``KeymakerError/wrongPIN(attemptsLeft:)``,
    ///   ``KeymakerError/tooSoon(retryAfterSeconds:)``, ``KeymakerError/mainKeyDestroyed``,
    ///   ``KeymakerError/presenceNotConfirmed`` and storage errors.
    public func unlock(_ method: UnlockMethod) async throws(KeymakerError) {
        try prepare()
        guard let strategies = try readProtection() else { throw .notSetUp }
        if mainKey != nil { return }
        switch method {
        case .none:
            guard strategies.contains(.none) else { throw .strategyNotActive(.none) }
            let secret = try keychainCall { () throws(KeychainError) in try keychain.read(address(.none)) }
            guard secret.count == MainKey.byteCount else { throw .corrupt("stored MainKey") }
            install(MainKey(secret: secret))
        case .pin(let pin):
            guard strategies.contains(.pin) else { throw .strategyNotActive(.pin) }
            await beginPINAttempt()
            defer { endPINAttempt() }
            try await unlockWithPIN(pin)
        case .secureElement(let reason):
            guard strategies.contains(.secureElement) else { throw .strategyNotActive(.secureElement) }
            guard let secureElement else { throw .secureElementUnavailable }
            let wrap = try keychainCall { () throws(KeychainError) in try keychain.read(address(.secureElement)) }
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
            install(MainKey(secret: secret))
        }
        try loadAutolock()
    }

    /// Removes the MainKey from memory and zeroes it.
    public func lock(reason: LockReason = .user) { removeKey(reason: reason) }

    /// The MainKey, while unlocked. Each call counts as activity for the autolock interval.
    ///
    /// - Throws: ``KeymakerError/locked`` while locked.
    public func key() throws(KeymakerError) -> MainKey {
        guard let mainKey else { throw .locked }
        perform(autolock.activity(clock.now()))
        guard let current = self.mainKey else { throw .locked }
        return current
    }

    /// A subkey of the MainKey for `label`; see ``MainKey/subkey(_:)``.
    public func subkey(_ label: String) throws(KeymakerError) -> EnvelopeKey { try key().subkey(label) }

    /// The app went to the background: locks at once under ``AutolockPolicy/onBackground``.
    public func enteredBackground() { perform(autolock.enteredBackground(clock.now())) }

    /// Re-checks the autolock deadline and the clocks now (the timer does this on its own too).
    public func checkAutolock() { perform(autolock.tick(clock.now())) }

    /// Changes the autolock policy; the policy is stored sealed under the MainKey.
    public func setAutolock(_ policy: AutolockPolicy) throws(KeymakerError) {
        let key = try key()
        try storeAutolock(policy, with: key)
        perform(autolock.policyChanged(to: policy, clock.now()))
    }

    // MARK: - Protection changes

    /// Protects the MainKey with `pin` (scrypt with the device pepper). Replaces `none`; keeps a secure element
    /// wrap if there is one; changes the PIN if one is set.
    public func activatePIN(_ pin: SecretBytes) throws(KeymakerError) {
        let key = try key()
        try validate(pin)
        var salt = [UInt8](repeating: 0, count: 16)
        var generator = SystemRandomNumberGenerator()
        for index in salt.indices { salt[index] = generator.next() }
        let kek = try derivePINKey(pin, salt: salt, parameters: configuration.scrypt)
        let envelope: [UInt8]
        do {
            envelope = try key.secret.withUnsafeBytes { raw throws(CofferCryptoError) in
                try Envelope.seal(raw, with: EnvelopeKey(kek), context: pinContext)
            }
        } catch {
            throw .crypto(error)
        }
        let wrap = ProtectionRecords.PINWrap(parameters: configuration.scrypt, salt: salt, envelope: envelope)
        try writeAttempts(.init(failures: 0, lastFailure: 0))
        try step("attempts-written")
        try setItem(wrap.encoded(), at: address(.pin))
        try step("wrap-written")
        try commit(adding: .pin)
    }

    /// Protects the MainKey with the secure element (HPKE to its key). Replaces `none`; keeps a PIN.
    public func activateSecureElement() throws(KeymakerError) {
        let key = try key()
        guard let secureElement else { throw .secureElementUnavailable }
        let publicKeyBytes = try secureElement.createKey(label: secureElementLabel)
        try step("element-key-created")
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
        try setItem(ProtectionRecords.encodeSecureElementWrap(box), at: address(.secureElement))
        try step("wrap-written")
        try commit(adding: .secureElement)
    }

    /// Removes a strategy. Removing the last one returns to `none`. Needs the key unlocked (proof of access).
    public func deactivate(_ strategy: ProtectionStrategy) throws(KeymakerError) {
        let key = try key()
        var strategies = try self.strategies()
        guard strategy != .none, strategies.contains(strategy) else { throw .strategyNotActive(strategy) }
        strategies.remove(strategy)
        if strategies.isEmpty {
            try keychainCall { () throws(KeychainError) in
                try keychain.set(key.secret, at: address(.none), accessibility: .afterFirstUnlockThisDeviceOnly)
            }
            try step("none-written")
            strategies = [.none]
        }
        try writeProtection(strategies)
        try step("record-written")
        try removeLeftovers(keeping: strategies)
    }

    // MARK: - Internals

    private enum Services {
        static let protection = "coffer.protection"
        static let attempts = "coffer.attempts"
        static let autolock = "coffer.autolock"
        static func wrap(_ strategy: ProtectionStrategy) -> String { "coffer.mainkey.\(strategy.rawValue)" }
    }

    private func address(_ strategy: ProtectionStrategy) -> KeychainAddress {
        KeychainAddress(service: Services.wrap(strategy), account: account)
    }

    private var pinContext: EnvelopeContext { ["coffer.mainkey.pin.v1", account] }
    private var secureElementLabel: String { "coffer.mainkey.\(account)" }
    private var secureElementInfo: [UInt8] { Array("coffer.mainkey.se.v1".utf8) }
    private var secureElementAAD: [UInt8] { EnvelopeContext(["coffer.mainkey.se.v1", account]).encoded }

    private func step(_ name: String) throws(KeymakerError) {
        guard let stepHook else { return }
        do { try stepHook(name) } catch { throw .interrupted(step: name) }
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
        guard let strategies = try readProtection() else {
            // No commit point: leftovers of an interrupted login or logout.
            try removeLeftovers(keeping: [])
            return
        }
        for strategy in strategies where try readItem(address(strategy)) == nil {
            // A listed wrap is gone: a logout was interrupted after deleting wraps. Finish it.
            try destroy(reason: .logout)
            return
        }
        try removeLeftovers(keeping: strategies)
        if strategies.contains(.pin), try readAttemptsOrExhausted() == nil {
            try destroy(reason: .tooManyAttempts)
        }
    }

    private func commit(adding strategy: ProtectionStrategy) throws(KeymakerError) {
        var strategies = try readProtection() ?? []
        strategies.remove(.none)
        strategies.insert(strategy)
        try writeProtection(strategies)
        try step("record-written")
        try removeLeftovers(keeping: strategies)
    }

    /// Deletes wraps (and their attempt record or element key) of strategies not in `strategies`.
    private func removeLeftovers(keeping strategies: Set<ProtectionStrategy>) throws(KeymakerError) {
        flush()
        for strategy in ProtectionStrategy.allCases where !strategies.contains(strategy) {
            try deleteItem(address(strategy))
        }
        if !strategies.contains(.pin) {
            try deleteItem(KeychainAddress(service: Services.attempts, account: account))
        }
        if !strategies.contains(.secureElement), let secureElement {
            try secureElement.deleteKey(label: secureElementLabel)
        }
        if strategies.isEmpty {
            for service in [Services.autolock] { try deleteItem(KeychainAddress(service: service, account: account)) }
        }
        try step("leftovers-removed")
    }

    /// Serialises PIN attempts: two concurrent attempts must not both read the same failure count.
    private func beginPINAttempt() async {
        if pinAttemptRunning {
            await withCheckedContinuation { pinAttemptQueue.append($0) }
        }
        pinAttemptRunning = true
    }

    private func endPINAttempt() {
        if pinAttemptQueue.isEmpty {
            pinAttemptRunning = false
        } else {
            pinAttemptQueue.removeFirst().resume()
        }
    }

    private func unlockWithPIN(_ pin: SecretBytes) async throws(KeymakerError) {
        let wrapBytes = try keychainCall { () throws(KeychainError) in try keychain.read(address(.pin)) }
        let wrap = try ProtectionRecords.PINWrap(decoding: wrapBytes.withUnsafeBytes { Array($0) })
        guard let attempts = try readAttemptsOrExhausted(),
            attempts.failures < configuration.maxFailedAttempts
        else {
            try destroy(reason: .tooManyAttempts)
            throw .mainKeyDestroyed
        }
        let now = clock.now().wallSeconds
        let wait = Int64(Self.delay(afterFailures: attempts.failures))
        if wait > 0 {
            if now < attempts.lastFailure {
                // The wall clock went back: restart the wait from now rather than trusting the past.
                try writeAttempts(.init(failures: attempts.failures, lastFailure: now))
                throw .tooSoon(retryAfterSeconds: Int(wait))
            }
            if now < attempts.lastFailure + wait {
                throw .tooSoon(retryAfterSeconds: Int(attempts.lastFailure + wait - now))
            }
        }
        // Count the attempt before trying it, so killing the process mid-check cannot win a free guess.
        let counted = ProtectionRecords.Attempts(failures: attempts.failures + 1, lastFailure: now)
        // The KDF runs on another thread while the count is made durable; the result is used only after both.
        let pepper = pinPepper
        let allowInsecure = configuration.allowInsecureKDF
        let derivation = Task.detached { () throws(CofferCryptoError) -> SymmetricKey in
            try PINKeyDerivation.deriveKey(
                pin: pin,
                salt: wrap.salt,
                parameters: wrap.parameters,
                devicePepper: pepper,
                allowInsecureParameters: allowInsecure
            )
        }
        do {
            try writeAttempts(counted)
        } catch {
            _ = await derivation.result
            throw error
        }
        let kek: SymmetricKey
        switch await derivation.result {
        case .success(let derived): kek = derived
        case .failure(let error): throw .crypto(error as? CofferCryptoError ?? .primitiveFailure("scrypt"))
        }
        let secret: SecretBytes
        do {
            secret = try Envelope.openSecret(wrap.envelope, with: EnvelopeKey(kek), context: pinContext)
        } catch .wrongKey {
            // Another PIN derives another KEK, whose key id does not match the wrap's.
            let left = configuration.maxFailedAttempts - counted.failures
            eventSink.yield(.unlockFailed(attemptsLeft: left))
            if left <= 0 {
                try destroy(reason: .tooManyAttempts)
                throw .mainKeyDestroyed
            }
            throw .wrongPIN(attemptsLeft: left)
        } catch {
            throw .corrupt("PIN wrap")
        }
        guard secret.count == MainKey.byteCount else { throw .corrupt("PIN wrap") }
        // The reset after a success is written in the background (off the unlock's critical path) on the serial
        // attempts queue; every later read of the record waits for it, and `flush()` waits before the process ends.
        // Losing it to a crash leaves a higher count, never a lower one.
        resetAttemptsInBackground()
        install(MainKey(secret: secret))
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

    private func validate(_ pin: SecretBytes) throws(KeymakerError) {
        let characters = pin.withUnsafeBytes { raw in String(decoding: raw, as: UTF8.self).count }
        guard characters >= configuration.minimumPINLength else {
            throw .invalidPIN("it must have at least \(configuration.minimumPINLength) characters")
        }
        guard pin.count <= 256 else { throw .invalidPIN("it must be at most 256 bytes") }
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
        try setItem(locked.encrypted, at: KeychainAddress(service: Services.autolock, account: account))
    }

    /// Reads the stored policy; a missing or unreadable one falls back to the most private policy.
    private func loadAutolock() throws(KeymakerError) {
        guard let key = mainKey else { return }
        var policy = AutolockPolicy.mostPrivate
        if let bytes = try? readItem(KeychainAddress(service: Services.autolock, account: account)),
            let stored = try? Locked<AutolockPolicy>(encrypted: bytes, label: "settings.autolock").unlock(with: key)
        {
            policy = stored
        }
        perform(autolock.policyChanged(to: policy, clock.now()))
    }

    private func readProtection() throws(KeymakerError) -> Set<ProtectionStrategy>? {
        guard let bytes = try readItem(KeychainAddress(service: Services.protection, account: account)) else {
            return nil
        }
        return try ProtectionRecords.decodeProtection(bytes)
    }

    private func writeProtection(_ strategies: Set<ProtectionStrategy>) throws(KeymakerError) {
        try setItem(
            ProtectionRecords.encodeProtection(strategies),
            at: KeychainAddress(service: Services.protection, account: account)
        )
    }

    /// Waits until background writes of the attempt record are durable. Call before a short-lived process exits.
    public func flush() { attemptWrites.sync {} }

    private func resetAttemptsInBackground() {
        let keychain = self.keychain
        let address = KeychainAddress(service: Services.attempts, account: account)
        let bytes = ProtectionRecords.Attempts(failures: 0, lastFailure: 0).encoded()
        attemptWrites.async {
            try? keychain.set(SecretBytes(copying: bytes), at: address, accessibility: .afterFirstUnlockThisDeviceOnly)
        }
    }

    private func readAttempts() throws(KeymakerError) -> ProtectionRecords.Attempts? {
        flush()
        guard let bytes = try readItem(KeychainAddress(service: Services.attempts, account: account)) else {
            return nil
        }
        return try ProtectionRecords.Attempts(decoding: bytes)
    }

    /// The attempt record, or `nil` when it is missing, edited or from another device: a record that cannot be
    /// trusted counts as exhausted, never as a reset. Storage failures (permissions, I/O) are thrown instead.
    private func readAttemptsOrExhausted() throws(KeymakerError) -> ProtectionRecords.Attempts? {
        do {
            return try readAttempts()
        } catch .corrupt, .keychain(.corruptItem), .keychain(.deviceMismatch) {
            return nil
        }
    }

    private func writeAttempts(_ attempts: ProtectionRecords.Attempts) throws(KeymakerError) {
        flush()
        try setItem(attempts.encoded(), at: KeychainAddress(service: Services.attempts, account: account))
    }

    private func readItem(_ address: KeychainAddress) throws(KeymakerError) -> [UInt8]? {
        try keychainCall { () throws(KeychainError) in try keychain.readIfPresent(address) }?
            .withUnsafeBytes { Array($0) }
    }

    private func setItem(_ bytes: [UInt8], at address: KeychainAddress) throws(KeymakerError) {
        try keychainCall { () throws(KeychainError) in
            try keychain.set(SecretBytes(copying: bytes), at: address, accessibility: .afterFirstUnlockThisDeviceOnly)
        }
    }

    private func deleteItem(_ address: KeychainAddress) throws(KeymakerError) {
        try keychainCall { () throws(KeychainError) in try keychain.delete(address) }
    }

    private func keychainCall<R>(_ body: () throws(KeychainError) -> R) throws(KeymakerError) -> R {
        do { return try body() } catch { throw .keychain(error) }
    }
}
