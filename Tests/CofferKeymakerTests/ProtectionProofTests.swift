import CofferCrypto
import CofferKeychain
import CofferKeymaker
import CofferTesting
import NIOConcurrencyHelpers
import Testing

/// Whoever sits at an unlocked session still needs a current strategy to change protection or log out.
@Suite struct ProtectionProofTests {
    /// An unlocked account protected by the PIN 135790.
    func unlockedWithPIN() async throws -> (World, Keymaker) {
        let world = try World()
        let keymaker = world.keymaker()
        try await keymaker.createMainKey()
        try await keymaker.activatePIN(Fixtures.pin("135790"), authorizedBy: .none)
        #expect(await keymaker.isLocked == false)
        return (world, keymaker)
    }

    enum Change: String, CaseIterable, Sendable {
        case removeAll, changePIN, removePIN, addElement, logout
    }

    func perform(_ change: Change, _ keymaker: Keymaker, proof: Keymaker.UnlockMethod) async throws {
        switch change {
        case .removeAll: try await keymaker.deactivate(nil, authorizedBy: proof)
        case .changePIN: try await keymaker.activatePIN(Fixtures.pin("246813"), authorizedBy: proof)
        case .removePIN: try await keymaker.deactivate(.pin, authorizedBy: proof)
        case .addElement: try await keymaker.activateSecureElement(authorizedBy: proof)
        case .logout: try await keymaker.logout(authorizedBy: proof)
        }
    }

    @Test(arguments: Change.allCases)
    func anUnlockedKeyIsNoProof(change: Change) async throws {
        let (world, keymaker) = try await unlockedWithPIN()
        await #expect(throws: KeymakerError.strategyNotActive(.none)) {
            try await perform(change, keymaker, proof: .none)
        }
        #expect(try await keymaker.strategies() == [.pin])
        withExtendedLifetime(world) {}
    }

    @Test(arguments: Change.allCases)
    func aWrongPINIsRefusedAndCounted(change: Change) async throws {
        let (world, keymaker) = try await unlockedWithPIN()
        await #expect(throws: KeymakerError.wrongPIN(attemptsLeft: 9)) {
            try await perform(change, keymaker, proof: .pin(Fixtures.pin("000000")))
        }
        #expect(try await keymaker.strategies() == [.pin])
        #expect(try await keymaker.failedAttempts() == 1)
        withExtendedLifetime(world) {}
    }

    @Test(arguments: Change.allCases)
    func theRightPINAllowsIt(change: Change) async throws {
        let (world, keymaker) = try await unlockedWithPIN()
        let original = try await keymaker.keyBytes()
        try await perform(change, keymaker, proof: .pin(Fixtures.pin("135790")))
        let restarted = world.keymaker()
        switch change {
        case .logout:
            #expect(try await restarted.isSetUp() == false)
            return
        case .removeAll, .removePIN: #expect(try await restarted.strategies() == [.none])
        case .changePIN: #expect(try await restarted.strategies() == [.pin])
        case .addElement: #expect(try await restarted.strategies() == [.pin, .secureElement])
        }
        let unlock: Keymaker.UnlockMethod =
            change == .changePIN
            ? .pin(Fixtures.pin("246813")) : change == .addElement ? .pin(Fixtures.pin("135790")) : .none
        try await restarted.unlock(unlock)
        #expect(try await restarted.keyBytes() == original)
    }

    @Test func presenceIsAProofWhenTheElementIsActive() async throws {
        let (world, keymaker) = try await unlockedWithPIN()
        try await keymaker.activateSecureElement(authorizedBy: .pin(Fixtures.pin("135790")))
        world.presence.setPresent(false)
        await #expect(throws: KeymakerError.presenceNotConfirmed) {
            try await keymaker.deactivate(nil, authorizedBy: .secureElement(reason: "test"))
        }
        world.presence.setPresent(true)
        try await keymaker.deactivate(nil, authorizedBy: .secureElement(reason: "test"))
        #expect(try await keymaker.strategies() == [.none])
    }

    @Test func theForgottenPINExitNeedsTheAccountName() async throws {
        let (world, keymaker) = try await unlockedWithPIN()
        await #expect(throws: KeymakerError.confirmationMismatch) {
            try await keymaker.eraseForgotten(confirmingAccountName: "alicE")
        }
        #expect(try await keymaker.isSetUp())
        try await keymaker.eraseForgotten(confirmingAccountName: "alice")
        #expect(try await keymaker.isSetUp() == false)
        withExtendedLifetime(world) {}
    }

    @Test func theTenthWrongPINRunsTheDestroyAction() async throws {
        let world = try World()
        let destroyed = NIOLockedValueBox<[String]>([])
        var configuration = Fixtures.keymakerConfiguration
        configuration.onDestroy = { account in destroyed.withLockedValue { $0.append(account) } }
        let make = {
            Keymaker(
                account: "alice",
                keychain: world.keychain,
                device: world.device,
                clock: world.clock,
                configuration: configuration
            )
        }
        let keymaker = make()
        try await keymaker.createMainKey()
        try await keymaker.activatePIN(Fixtures.pin("135790"), authorizedBy: .none)
        await keymaker.lock()
        for failure in 1...10 {
            world.clock.advance(seconds: Double(Keymaker.delay(afterFailures: failure - 1)))
            #expect(destroyed.withLockedValue { $0.isEmpty })
            _ = try? await make().unlock(.pin(Fixtures.pin("000000")))
        }
        #expect(destroyed.withLockedValue { $0 } == ["alice"])
        #expect(try await make().isSetUp() == false)
    }
}

@Suite struct PINPolicyTests {
    @Test(arguments: ["123456", "000000", "abcdef", "pass phrase", "ÄÖÜäöü", String(repeating: "9", count: 256)])
    func acceptable(pin: String) throws {
        try PINPolicy.validate(Fixtures.pin(pin))
    }

    @Test(arguments: ["", "1", "12345", "abcde", "ÄÖÜäö"])
    func tooShort(pin: String) {
        #expect(throws: KeymakerError.pinTooShort(minimumLength: 6)) { try PINPolicy.validate(Fixtures.pin(pin)) }
    }

    @Test func tooLong() {
        #expect(throws: KeymakerError.pinTooLong(maximumBytes: 256)) {
            try PINPolicy.validate(Fixtures.pin(String(repeating: "9", count: 257)))
        }
    }

    @Test func theProductionMinimumIsSix() {
        #expect(Keymaker.Configuration().minimumPINLength == 6)
        #expect(PINPolicy.minimumLength == 6)
    }

    @Test(
        arguments: [
            ("123456", PINCostEstimate.Shape.digits, 6), ("0042", .digits, 4), ("secret", .lowercase, 6),
            ("Secret", .letters, 6), ("Secr3t", .lettersAndDigits, 6), ("s3cr3t!", .printable, 7),
            ("pässwort", .printable, 8),
        ]
    )
    func shapes(pin: String, shape: PINCostEstimate.Shape, length: Int) {
        let estimate = PINCostEstimate(pin: Fixtures.pin(pin), secondsPerGuess: 1)
        #expect(estimate.shape == shape)
        #expect(estimate.length == length)
    }

    @Test func theArithmetic() {
        // 10^6 PINs at half a second: 500,000 s, about 5.8 days.
        let six = PINCostEstimate(shape: .digits, length: 6, secondsPerGuess: 0.5)
        #expect(six.guessSpace == 1_000_000)
        #expect(six.secondsToTryAll == 500_000)
        #expect(
            six.sentence
                == "A thief with a copy of this disk needs about 6 CPU-days to try every 6-digit PIN "
                + "(10^6 guesses at 500 ms each on this machine)."
        )
        // 10^4 PINs at 1 s: 10,000 s, about 3 hours.
        let four = PINCostEstimate(shape: .digits, length: 4, secondsPerGuess: 1)
        #expect(four.sentence.contains("about 3 CPU-hours to try every 4-digit PIN"))
        // 10^4 PINs at 0.1 s: 1,000 s, about 17 minutes.
        let quick = PINCostEstimate(shape: .digits, length: 4, secondsPerGuess: 0.1)
        #expect(quick.sentence.contains("about 17 CPU-minutes"))
        // 26^8 lowercase letters at 0.5 s: about 3,300 years.
        let words = PINCostEstimate(shape: .lowercase, length: 8, secondsPerGuess: 0.5)
        #expect(words.guessSpace == 208_827_064_576)
        #expect(words.sentence.contains("about 3311 CPU-years"))
        #expect(words.sentence.contains("8-character passphrase"))
        let huge = PINCostEstimate(shape: .printable, length: 40, secondsPerGuess: 1)
        #expect(huge.sentence.contains("more than 10^15 CPU-years"))
    }
}

@Suite struct AutolockFallbackTests {
    @Test func anUnreadableSettingFallsBackAndSaysSo() async throws {
        let world = try World()
        let keymaker = world.keymaker()
        try await keymaker.createMainKey()
        try await keymaker.setAutolock(.never)
        await keymaker.lock()
        let restarted = world.keymaker()
        try await restarted.unlock(.none)
        #expect(await restarted.autolockPolicy == .never)
        #expect(await restarted.autolockSettingFallback == nil)
        await restarted.lock()

        try world.keychain.update(
            SecretBytes(copying: [1, 2, 3]),
            at: KeychainAddress(service: "coffer.autolock", account: "alice")
        )
        let damaged = world.keymaker()
        var events = damaged.events.makeAsyncIterator()
        try await damaged.unlock(.none)
        #expect(await damaged.autolockPolicy == .mostPrivate)
        #expect(await damaged.autolockSettingFallback == .unreadable)
        #expect(await events.next() == .mainKeyObtained)
        #expect(await events.next() == .autolockSettingFallback(.unreadable))
        // Storing a policy again clears the fallback.
        try await damaged.setAutolock(.after(seconds: 120))
        #expect(await damaged.autolockSettingFallback == nil)
    }

    @Test func aMissingSettingFallsBackAndSaysSo() async throws {
        let world = try World()
        let keymaker = world.keymaker()
        try await keymaker.createMainKey()
        await keymaker.lock()
        try world.keychain.delete(KeychainAddress(service: "coffer.autolock", account: "alice"))
        let restarted = world.keymaker()
        try await restarted.unlock(.none)
        #expect(await restarted.autolockPolicy == .mostPrivate)
        #expect(await restarted.autolockSettingFallback == .missing)
    }
}
