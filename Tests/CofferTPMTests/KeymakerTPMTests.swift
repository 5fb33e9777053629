import CofferCrypto
import CofferKeychain
import CofferKeymaker
import CofferKeymakerTPM
import CofferTPM
import CofferTesting
import Crypto
import Foundation
import NIOConcurrencyHelpers
import Testing

/// A Keymaker over a file keychain in its own folder, its PIN bound to a private swtpm (or to none).
final class BoundWorld {
    let root = TemporaryDirectory(prefix: "coffer-tpm-keymaker")
    let device = Fixtures.device()
    let clock = TestClock()
    let fixture: TPMFixture
    let keychain: FileKeychain

    /// A swtpm with `maxTries` dictionary-attack tries, not connected (the Keymaker's binder connects per call).
    init(maxTries: UInt32 = 32) throws {
        fixture = try TPMFixture()
        try fixture.context.setDictionaryAttackParameters(maxTries: maxTries, recoveryTime: 3600, lockoutRecovery: 3600)
        fixture.disconnect()
        keychain = try FileKeychain(folder: "\(root.path)/keychain", device: device)
    }

    var binder: TPMPINBinder { TPMPINBinder(configuration: fixture.tpm.configuration) }

    func keymaker(binder: (any PINBinder)?? = nil) -> Keymaker {
        Keymaker(
            account: "alice",
            keychain: keychain,
            device: device,
            pinBinder: binder ?? self.binder,
            clock: clock,
            configuration: Fixtures.keymakerConfiguration
        )
    }

    /// A Keymaker with a MainKey protected by a TPM-bound PIN, locked; returns the MainKey's bytes.
    func bound(pin: String = "135790") async throws -> (Keymaker, [UInt8]) {
        let keymaker = keymaker()
        try await keymaker.createMainKey()
        let bytes = try await keymaker.mainKey(for: .userRequest).withUnsafeBytes { Array($0) }
        try await keymaker.activatePIN(Fixtures.pin(pin), authorizedBy: .none, element: .tpm)
        await keymaker.lock()
        return (keymaker, bytes)
    }

    static let attempts = KeychainAddress(service: "coffer.attempts", account: "alice")
    static let pinWrap = KeychainAddress(service: "coffer.mainkey.pin", account: "alice")

    func item(_ address: KeychainAddress) throws -> [UInt8] { try keychain.read(address).withUnsafeBytes { Array($0) } }

    /// The TPM PIN binding inside the stored PIN wrap v2, and the PIN KEK of `pin`: what a thief who skips the
    /// Keymaker's checks would hand the TPM.
    func bindingAndKEK(pin: String) throws -> ([UInt8], SymmetricKey) {
        let wrap = try item(Self.pinWrap)
        #expect(wrap[4] == 2)
        let length = Int(wrap[30]) << 8 | Int(wrap[31])
        let kek = try PINKeyDerivation.deriveKey(
            pin: Fixtures.pin(pin),
            salt: Array(wrap[14..<30]),
            parameters: .insecureForTestingOnly,
            devicePepper: device.pepper(label: "pin-kdf"),
            allowInsecureParameters: true
        )
        return (Array(wrap[32..<32 + length]), kek)
    }
}

@Suite("Keymaker with a TPM-bound PIN against swtpm", .timeLimit(.minutes(3)))
struct KeymakerTPMTests {
    @Test func theRightPINUnlocksAndAWrongOneIsCountedByTheAttemptGuard() async throws {
        let world = try BoundWorld()
        let (keymaker, bytes) = try await world.bound()
        #expect(try await keymaker.pinElement() == .tpm)
        #expect(try world.item(BoundWorld.pinWrap)[4] == 2)
        await #expect(throws: KeymakerError.wrongPIN(attemptsLeft: 9)) {
            try await keymaker.unlock(.pin(Fixtures.pin("000000")))
        }
        let fresh = world.keymaker()
        try await fresh.unlock(.pin(Fixtures.pin("135790")))
        #expect(try await fresh.mainKey(for: .userRequest).withUnsafeBytes { Array($0) } == bytes)
        #expect(try await fresh.failedAttempts() == 0)
    }

    @Test func pastTheTPMsThresholdTheRightPINIsRefusedWhateverTheFilesSay() async throws {
        let world = try BoundWorld(maxTries: 3)
        let (keymaker, _) = try await world.bound()
        let snapshot = try world.item(BoundWorld.attempts)
        for left in [9, 8, 7] {
            await #expect(throws: KeymakerError.wrongPIN(attemptsLeft: left)) {
                try await keymaker.unlock(.pin(Fixtures.pin("000000")))
            }
        }
        // The TPM is locked out: the right PIN is refused, and the refused attempt is given back.
        await #expect(throws: KeymakerError.tpmLockedOut) { try await keymaker.unlock(.pin(Fixtures.pin("135790"))) }
        #expect(try await keymaker.failedAttempts() == 3)
        // A thief who skips the attempt guard (or deletes its record) and hands the TPM the right PIN's KEK directly.
        let (binding, kek) = try world.bindingAndKEK(pin: "135790")
        #expect(throws: KeymakerError.tpmLockedOut) { _ = try world.binder.boundKEK(binding, pinKEK: kek) }
        // The attempt record from before the failures, put back: older than the TPM's counter, so exhausted.
        try world.keychain.update(SecretBytes(copying: snapshot), at: BoundWorld.attempts)
        await #expect(throws: KeymakerError.mainKeyDestroyed) {
            try await world.keymaker().unlock(.pin(Fixtures.pin("135790")))
        }
    }

    @Test func restoringAnOlderAttemptRecordIsDetectedByTheCounterAndErasesTheBinding() async throws {
        let world = try BoundWorld()
        let (keymaker, _) = try await world.bound()
        let snapshot = try world.item(BoundWorld.attempts)
        #expect(snapshot[4] == 2)
        let (binding, _) = try world.bindingAndKEK(pin: "135790")
        await #expect(throws: KeymakerError.wrongPIN(attemptsLeft: 9)) {
            try await keymaker.unlock(.pin(Fixtures.pin("000000")))
        }
        try world.keychain.update(SecretBytes(copying: snapshot), at: BoundWorld.attempts)
        let fresh = world.keymaker()
        await #expect(throws: KeymakerError.mainKeyDestroyed) { try await fresh.unlock(.pin(Fixtures.pin("135790"))) }
        #expect(try await fresh.isSetUp() == false)
        #expect(throws: KeymakerError.tpmMismatch) {
            _ = try world.binder.counterValue(binding, counterPepper: .init(randomCount: 32))
        }
    }

    @Test func aRecordOneAheadOfTheCounterIsALostIncrementNotARollback() async throws {
        let world = try BoundWorld()
        let (keymaker, _) = try await world.bound()
        var record = try world.item(BoundWorld.attempts)
        record[21] &+= 1  // the counter's low byte: the record was written, the TPM's increment was lost
        try world.keychain.update(SecretBytes(copying: record), at: BoundWorld.attempts)
        try await keymaker.unlock(.pin(Fixtures.pin("135790")))
        #expect(await keymaker.isLocked == false)
    }

    @Test func anotherTPMWithTheSameFilesCannotUnlock() async throws {
        let world = try BoundWorld()
        _ = try await world.bound()
        let other = try TPMFixture(name: "other-machine")
        other.disconnect()
        let thief = world.keymaker(binder: TPMPINBinder(configuration: other.tpm.configuration))
        await #expect(throws: KeymakerError.tpmMismatch) { try await thief.unlock(.pin(Fixtures.pin("135790"))) }
        // Nor by handing the other TPM the right PIN's KEK directly.
        let (binding, kek) = try world.bindingAndKEK(pin: "135790")
        #expect(throws: KeymakerError.tpmMismatch) {
            _ = try TPMPINBinder(configuration: other.tpm.configuration).boundKEK(binding, pinKEK: kek)
        }
        // Without any TPM the bound PIN cannot be tried at all.
        await #expect(throws: KeymakerError.tpmUnavailable) {
            try await world.keymaker(binder: .some(nil)).unlock(.pin(Fixtures.pin("135790")))
        }
    }

    @Test func theBoundPINSurvivesARestartOfTheTPMWithItsState() async throws {
        let world = try BoundWorld()
        let (_, bytes) = try await world.bound()
        try world.fixture.tpm.restart()
        let keymaker = world.keymaker()
        try await keymaker.unlock(.pin(Fixtures.pin("135790")))
        #expect(try await keymaker.mainKey(for: .userRequest).withUnsafeBytes { Array($0) } == bytes)
    }

    @Test func changingTheBoundPINKeepsItsCounterAndRemovingOrLoggingOutDeletesIt() async throws {
        let world = try BoundWorld()
        let (keymaker, bytes) = try await world.bound()
        let (first, _) = try world.bindingAndKEK(pin: "135790")
        try await keymaker.activatePIN(
            Fixtures.pin("246802"),
            authorizedBy: .pin(Fixtures.pin("135790")),
            element: .tpm
        )
        let (second, _) = try world.bindingAndKEK(pin: "246802")
        #expect(first[5..<9] == second[5..<9])  // the NV index
        #expect(first != second)  // a new sealed share
        await #expect(throws: KeymakerError.wrongPIN(attemptsLeft: 9)) {
            try await world.keymaker().unlock(.pin(Fixtures.pin("135790")))
        }
        // Back to a software PIN: the counter goes, the PIN still opens the same key.
        try await keymaker.activatePIN(Fixtures.pin("975310"), authorizedBy: .pin(Fixtures.pin("246802")))
        #expect(try await keymaker.pinElement() == .software)
        let pepper = world.device.pepper(label: "pin-tpm-counter")
        #expect(throws: KeymakerError.tpmMismatch) { _ = try world.binder.counterValue(second, counterPepper: pepper) }
        let fresh = world.keymaker()
        try await fresh.unlock(.pin(Fixtures.pin("975310")))
        #expect(try await fresh.mainKey(for: .userRequest).withUnsafeBytes { Array($0) } == bytes)
        // Bound again, then logged out: the new counter goes too.
        try await fresh.activatePIN(Fixtures.pin("135790"), authorizedBy: .pin(Fixtures.pin("975310")), element: .tpm)
        let (third, _) = try world.bindingAndKEK(pin: "135790")
        #expect(try world.binder.counterValue(third, counterPepper: pepper) > 0)
        try await fresh.logout(authorizedBy: .pin(Fixtures.pin("135790")))
        #expect(throws: KeymakerError.tpmMismatch) { _ = try world.binder.counterValue(third, counterPepper: pepper) }
    }

    @Test func withoutATPMABoundPINIsRefusedBeforeAnythingChanges() async throws {
        let world = try BoundWorld()
        let keymaker = world.keymaker(binder: .some(nil))
        try await keymaker.createMainKey()
        await #expect(throws: KeymakerError.tpmUnavailable) {
            try await keymaker.activatePIN(Fixtures.pin("135790"), authorizedBy: .none, element: .tpm)
        }
        #expect(try await keymaker.strategies() == [.none])
        try await keymaker.activatePIN(Fixtures.pin("135790"), authorizedBy: .none)
        #expect(try await keymaker.pinElement() == .software)
    }

    /// Stops the activation of a bound PIN after each step, as a crash would; a new process recovers a state that
    /// still unlocks the same key (by `none` before the commit, by the PIN after it).
    @Test func aCrashAfterAnyStepOfABoundActivationRecovers() async throws {
        for stopAt in 1...4 {
            let world = try BoundWorld()
            let keymaker = world.keymaker()
            try await keymaker.createMainKey()
            let bytes = try await keymaker.mainKey(for: .userRequest).withUnsafeBytes { Array($0) }
            let seen = StepCounter(stopAt: stopAt)
            await keymaker.setStepHook { try seen.hook($0) }
            _ = try? await keymaker.activatePIN(Fixtures.pin("135790"), authorizedBy: .none, element: .tpm)
            let restarted = world.keymaker()
            let strategies = try await restarted.strategies()
            if strategies == [.none] {
                try await restarted.unlock(.none)
            } else {
                #expect(strategies == [.pin])
                try await restarted.unlock(.pin(Fixtures.pin("135790")))
            }
            #expect(try await restarted.mainKey(for: .userRequest).withUnsafeBytes { Array($0) } == bytes)
        }
    }
}

/// Throws at the `stopAt`-th protection step.
final class StepCounter: Sendable {
    let count = NIOLockedValueBox(0)
    let stopAt: Int
    init(stopAt: Int) { self.stopAt = stopAt }
    func hook(_ step: ProtectionStep) throws {
        let reached = count.withLockedValue { value in
            value += 1
            return value
        }
        if reached == stopAt { throw CancellationError() }
    }
}
