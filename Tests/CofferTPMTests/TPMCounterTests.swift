import CofferCrypto
import CofferTPM
import CofferTesting
import Testing

@Suite("TPM NV counters against swtpm", .timeLimit(.minutes(2)))
struct TPMCounterTests {
    let counterAuth = SecretBytes(randomCount: 32)

    @Test func counterIncrementsMonotonicallyAcrossARestart() throws {
        let fixture = try TPMFixture()
        let counter = try fixture.context.defineCounter(authValue: counterAuth)
        #expect(TPMNVCounter.ownerRange.contains(counter.index))
        let first = try fixture.context.read(counter, authValue: counterAuth)
        let second = try fixture.context.increment(counter, authValue: counterAuth)
        #expect(second == first + 1)
        try fixture.reboot()
        let rebooted = fixture.context!
        #expect(try rebooted.read(counter, authValue: counterAuth) >= second)
        let third = try rebooted.increment(counter, authValue: counterAuth)
        #expect(third > second)
        // A record that carries an older value (a restored backup) no longer matches the TPM.
        let recorded = second
        #expect(try rebooted.read(counter, authValue: counterAuth) != recorded)
    }

    @Test func deletedCounterIsMissingAndDeletingTwiceSucceeds() throws {
        let fixture = try TPMFixture()
        let counter = try fixture.context.defineCounter(authValue: counterAuth)
        try fixture.context.deleteCounter(counter)
        #expect(throws: TPMError.nvIndexMissing(index: counter.index)) {
            _ = try fixture.context.read(counter, authValue: counterAuth)
        }
        try fixture.context.deleteCounter(counter)
    }

    @Test func definingAnIndexTwiceIsRefused() throws {
        let fixture = try TPMFixture()
        let counter = try fixture.context.defineCounter(authValue: counterAuth)
        #expect(throws: TPMError.nvIndexInUse(index: counter.index)) {
            try fixture.context.defineCounter(counter, authValue: counterAuth)
        }
    }

    @Test func anotherTPMHasNoSuchCounter() throws {
        let fixture = try TPMFixture()
        let counter = try fixture.context.defineCounter(authValue: counterAuth)
        let other = try TPMFixture(name: "other-machine")
        #expect(throws: TPMError.nvIndexMissing(index: counter.index)) {
            _ = try other.context.read(counter, authValue: counterAuth)
        }
    }

    @Test func wrongCounterAuthIsRefused() throws {
        let fixture = try TPMFixture()
        let counter = try fixture.context.defineCounter(authValue: counterAuth)
        #expect(throws: TPMError.authorizationFailed) {
            _ = try fixture.context.increment(counter, authValue: SecretBytes(randomCount: 32))
        }
    }

    @Test(arguments: [UInt32(0), 0x00FF_FFFF, 0x0140_0000, 0x81_000001])
    func indicesOutsideTheOwnerRangeAreRefused(index: UInt32) {
        #expect {
            _ = try TPMNVCounter(index: index)
        } throws: { error in
            guard case .invalidArgument = error as? TPMError else { return false }
            return true
        }
    }
}
