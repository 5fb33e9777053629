import CofferCrypto
import CofferKeychain
import CofferKeymaker
import CofferTesting
import Testing

/// The Keymaker knows no TPM of its own: CofferKeymaker does not link CofferTPM, and a Keymaker made without a PIN
/// binder (the default; the composition root hands in this machine's TPM) reaches none.
@Suite struct NoTPMTests {
    @Test func aKeymakerMadeWithoutABinderRefusesATPMBoundPINBeforeAnything() async throws {
        let keymaker = Keymaker(
            account: "alice",
            keychain: InMemoryKeychain(),
            device: Fixtures.device(),
            clock: TestClock(),
            configuration: Fixtures.keymakerConfiguration
        )
        try await keymaker.createMainKey()
        await #expect(throws: KeymakerError.tpmUnavailable) {
            try await keymaker.activatePIN(Fixtures.pin("135790"), authorizedBy: .none, element: .tpm)
        }
        // Nothing changed: still protected by `none`, no PIN element.
        #expect(try await keymaker.strategies() == [.none])
        #expect(try await keymaker.pinElement() == nil)
    }
}
