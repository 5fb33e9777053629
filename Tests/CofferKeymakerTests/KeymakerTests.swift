import CofferCrypto
import CofferKeychain
import CofferKeymaker
import CofferTesting
import Testing

@Suite struct KeymakerTests {
    @Test func loginCreatesAnUnlockedKeyProtectedByNone() async throws {
        let world = try World()
        let keymaker = world.keymaker()
        #expect(try await keymaker.isSetUp() == false)
        try await keymaker.createMainKey()
        #expect(try await keymaker.isSetUp())
        #expect(await keymaker.isLocked == false)
        #expect(try await keymaker.strategies() == [.none])
        #expect(try await keymaker.keyBytes().count == 32)
        await #expect(throws: KeymakerError.alreadySetUp) { try await keymaker.createMainKey() }
    }

    @Test func everyUseWhileLockedThrowsLocked() async throws {
        let world = try World()
        let keymaker = world.keymaker()
        try await keymaker.createMainKey()
        await keymaker.lock()
        await #expect(throws: KeymakerError.locked) { try await keymaker.mainKey(for: .userRequest) }
        await #expect(throws: KeymakerError.locked) { try await keymaker.mainKey(for: .userRequest).subkey("x") }
        await #expect(throws: KeymakerError.locked) { try await keymaker.setAutolock(.never) }
    }

    @Test func lockingZeroesAKeyThatSomeoneKept() async throws {
        let world = try World()
        let keymaker = world.keymaker()
        try await keymaker.createMainKey()
        let kept = try await keymaker.mainKey(for: .userRequest)
        #expect(kept.withUnsafeBytes { $0.contains { $0 != 0 } })
        await keymaker.lock()
        #expect(kept.isWiped)
        #expect(kept.withUnsafeBytes { $0.allSatisfy { $0 == 0 } })
        #expect(throws: KeymakerError.locked) { try kept.subkey("store") }
    }

    @Test func noneUnlocksToTheSameKeyAfterARestart() async throws {
        let world = try World()
        let first = world.keymaker()
        try await first.createMainKey()
        let original = try await first.keyBytes()
        let restarted = world.keymaker()
        #expect(await restarted.isLocked)
        try await restarted.unlock(.none)
        #expect(try await restarted.keyBytes() == original)
    }

    @Test func pinProtectionReplacesNoneAndUnlocks() async throws {
        let world = try World()
        let keymaker = world.keymaker()
        try await keymaker.createMainKey()
        let original = try await keymaker.keyBytes()
        try await keymaker.activatePIN(Fixtures.pin("471100"), authorizedBy: .none)
        #expect(try await keymaker.strategies() == [.pin])
        await keymaker.lock()
        await #expect(throws: KeymakerError.strategyNotActive(.none)) { try await keymaker.unlock(.none) }
        await #expect(throws: KeymakerError.wrongPIN(attemptsLeft: 9)) {
            try await keymaker.unlock(.pin(Fixtures.pin("0000")))
        }
        try await keymaker.unlock(.pin(Fixtures.pin("471100")))
        #expect(try await keymaker.keyBytes() == original)
        #expect(try await keymaker.failedAttempts() == 0)
    }

    @Test(arguments: ["", "12", "abc", "12345", "abcde", "ÄÖÜäö"])
    func shortPINsAreRefused(pin: String) async throws {
        let world = try World()
        let keymaker = world.keymaker()
        try await keymaker.createMainKey()
        await #expect(throws: KeymakerError.pinTooShort(minimumLength: 6)) {
            try await keymaker.activatePIN(Fixtures.pin(pin), authorizedBy: .none)
        }
        #expect(try await keymaker.strategies() == [.none])
    }

    @Test func secureElementUnlocksOnlyWithPresence() async throws {
        let world = try World()
        let keymaker = world.keymaker()
        try await keymaker.createMainKey()
        let original = try await keymaker.keyBytes()
        try await keymaker.activateSecureElement(authorizedBy: .none)
        #expect(try await keymaker.strategies() == [.secureElement])
        await keymaker.lock()
        world.presence.setPresent(false)
        await #expect(throws: KeymakerError.presenceNotConfirmed) {
            try await keymaker.unlock(.secureElement(reason: "test"))
        }
        #expect(await keymaker.isLocked)
        world.presence.setPresent(true)
        try await keymaker.unlock(.secureElement(reason: "test"))
        #expect(try await keymaker.keyBytes() == original)
        #expect(world.presence.askCount == 2)
    }

    @Test func strategiesStackAndRemovingTheLastReturnsToNone() async throws {
        let world = try World()
        let keymaker = world.keymaker()
        try await keymaker.createMainKey()
        let original = try await keymaker.keyBytes()
        try await keymaker.activatePIN(Fixtures.pin("246813"), authorizedBy: .none)
        try await keymaker.activateSecureElement(authorizedBy: .pin(Fixtures.pin("246813")))
        #expect(try await keymaker.strategies() == [.pin, .secureElement])
        await keymaker.lock()
        try await keymaker.unlock(.pin(Fixtures.pin("246813")))
        await keymaker.lock()
        try await keymaker.unlock(.secureElement(reason: "test"))
        try await keymaker.deactivate(.pin, authorizedBy: .secureElement(reason: "test"))
        #expect(try await keymaker.strategies() == [.secureElement])
        try await keymaker.deactivate(.secureElement, authorizedBy: .secureElement(reason: "test"))
        #expect(try await keymaker.strategies() == [.none])
        await #expect(throws: KeymakerError.strategyNotActive(.pin)) {
            try await keymaker.deactivate(.pin, authorizedBy: .none)
        }
        await keymaker.lock()
        try await keymaker.unlock(.none)
        #expect(try await keymaker.keyBytes() == original)
        #expect(try world.element.publicKey(label: "coffer.mainkey.alice") == nil)
    }

    @Test func changingThePINKeepsTheKey() async throws {
        let world = try World()
        let keymaker = world.keymaker()
        try await keymaker.createMainKey()
        let original = try await keymaker.keyBytes()
        try await keymaker.activatePIN(Fixtures.pin("111111"), authorizedBy: .none)
        try await keymaker.activatePIN(Fixtures.pin("222222"), authorizedBy: .pin(Fixtures.pin("111111")))
        await keymaker.lock()
        await #expect(throws: KeymakerError.wrongPIN(attemptsLeft: 9)) {
            try await keymaker.unlock(.pin(Fixtures.pin("111111")))
        }
        try await keymaker.unlock(.pin(Fixtures.pin("222222")))
        #expect(try await keymaker.keyBytes() == original)
    }

    @Test func logoutDestroysEverything() async throws {
        let world = try World()
        let keymaker = world.keymaker()
        try await keymaker.createMainKey()
        try await keymaker.activatePIN(Fixtures.pin("123456"), authorizedBy: .none)
        try await keymaker.activateSecureElement(authorizedBy: .pin(Fixtures.pin("123456")))
        let sealed = try Locked(clearValue: "token", with: await keymaker.mainKey(for: .userRequest), label: "token")
        try await keymaker.logout(authorizedBy: .secureElement(reason: "test"))
        #expect(await keymaker.isLocked)
        #expect(try await keymaker.isSetUp() == false)
        #expect(TemporaryDirectory.files(below: "\(world.root.path)/keychain").filter { $0.hasSuffix(".item") }.isEmpty)
        #expect(TemporaryDirectory.files(below: "\(world.root.path)/secure-element").isEmpty)
        await #expect(throws: KeymakerError.notSetUp) { try await keymaker.unlock(.none) }
        // A new login gets a new key; what the old key sealed stays sealed.
        try await keymaker.createMainKey()
        let newKey = try await keymaker.mainKey(for: .userRequest)
        #expect(throws: KeymakerError.self) { try sealed.unlock(with: newKey) }
    }

    @Test func eventsReportObtainedRemovedAndFailures() async throws {
        let world = try World()
        let keymaker = world.keymaker()
        var events = keymaker.events.makeAsyncIterator()
        try await keymaker.createMainKey()
        #expect(await events.next() == .mainKeyObtained)
        try await keymaker.activatePIN(Fixtures.pin("123456"), authorizedBy: .none)
        await keymaker.lock()
        #expect(await events.next() == .mainKeyRemoved(.user))
        _ = try? await keymaker.unlock(.pin(Fixtures.pin("9999")))
        #expect(await events.next() == .unlockFailed(attemptsLeft: 9))
        try await keymaker.unlock(.pin(Fixtures.pin("123456")))
        #expect(await events.next() == .mainKeyObtained)
    }
}
