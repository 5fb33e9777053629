import CofferCrypto
import CofferTPM
import CofferTesting
import Crypto
import Testing

@Suite("PIN KEK bound to the TPM", .timeLimit(.minutes(2)))
struct TPMPINBindingTests {
    let pinKEK = SymmetricKey(size: .bits256)
    let pepper = SecretBytes(randomCount: 32)

    @Test func theRightPINKEKGivesTheSameBoundKEKAfterARebootAndItIsNotThePINKEK() throws {
        let fixture = try TPMFixture()
        let (binding, boundKEK) = try TPMPINBinding.create(in: fixture.context, pinKEK: pinKEK, devicePepper: pepper)
        #expect(boundKEK != pinKEK)
        try fixture.reboot()
        #expect(try binding.boundKEK(in: fixture.context, pinKEK: pinKEK) == boundKEK)
    }

    @Test func aWrongPINKEKIsCountedAndTheLockoutHoldsWithoutAnyFile() throws {
        let fixture = try TPMFixture()
        try fixture.context.setDictionaryAttackParameters(maxTries: 2, recoveryTime: 3600, lockoutRecovery: 3600)
        let (binding, _) = try TPMPINBinding.create(in: fixture.context, pinKEK: pinKEK, devicePepper: pepper)
        for _ in 0..<2 {
            #expect(throws: TPMError.authorizationFailed) {
                _ = try binding.boundKEK(in: fixture.context, pinKEK: SymmetricKey(size: .bits256))
            }
        }
        #expect(throws: TPMError.lockedOut) { _ = try binding.boundKEK(in: fixture.context, pinKEK: pinKEK) }
    }

    @Test func anotherMachineCannotOpenTheBindingOrFindItsCounter() throws {
        let fixture = try TPMFixture()
        let (binding, _) = try TPMPINBinding.create(in: fixture.context, pinKEK: pinKEK, devicePepper: pepper)
        let other = try TPMFixture(name: "other-machine")
        #expect(throws: TPMError.foreignObject) { _ = try binding.boundKEK(in: other.context, pinKEK: pinKEK) }
        #expect(throws: TPMError.nvIndexMissing(index: binding.counter.index)) {
            _ = try binding.attemptCounterValue(in: other.context, devicePepper: pepper)
        }
    }

    @Test func aRestoredAttemptRecordIsACounterMismatch() throws {
        let fixture = try TPMFixture()
        let (binding, _) = try TPMPINBinding.create(in: fixture.context, pinKEK: pinKEK, devicePepper: pepper)
        let initial = try binding.attemptCounterValue(in: fixture.context, devicePepper: pepper)
        let afterFirst = try binding.advanceAttemptCounter(in: fixture.context, recorded: initial, devicePepper: pepper)
        #expect(afterFirst == initial + 1)
        try fixture.reboot()
        let afterSecond = try binding.advanceAttemptCounter(
            in: fixture.context,
            recorded: afterFirst,
            devicePepper: pepper
        )
        #expect(afterSecond == afterFirst + 1)
        // The copy of the record taken after the first attempt, put back: older than the TPM.
        #expect(throws: TPMError.counterMismatch) {
            _ = try binding.advanceAttemptCounter(in: fixture.context, recorded: afterFirst, devicePepper: pepper)
        }
        // A refused check does not advance the counter, so the current record still works.
        #expect(
            try binding.advanceAttemptCounter(in: fixture.context, recorded: afterSecond, devicePepper: pepper)
                == afterSecond + 1
        )
    }

    @Test func deletingRemovesTheCounter() throws {
        let fixture = try TPMFixture()
        let (binding, _) = try TPMPINBinding.create(in: fixture.context, pinKEK: pinKEK, devicePepper: pepper)
        try binding.delete(in: fixture.context)
        #expect(throws: TPMError.nvIndexMissing(index: binding.counter.index)) {
            _ = try binding.attemptCounterValue(in: fixture.context, devicePepper: pepper)
        }
    }
}
