import CofferCrypto
import CofferKeychain
import CofferKeymaker
import CofferTesting
import Testing

@Suite struct AttemptGuardTests {
    func protectedWorld() async throws -> (World, Keymaker) {
        let world = try World()
        let keymaker = world.keymaker()
        try await keymaker.createMainKey()
        try await keymaker.activatePIN(Fixtures.pin("135790"), authorizedBy: .none)
        await keymaker.lock()
        return (world, keymaker)
    }

    @Test func delaysEscalateFromTheFourthFailure() {
        #expect((0...3).map(Keymaker.delay(afterFailures:)) == [0, 0, 0, 0])
        let later = (4...9).map(Keymaker.delay(afterFailures:))
        #expect(later.first! > 0)
        #expect(zip(later, later.dropFirst()).allSatisfy { $0 < $1 })
    }

    @Test func tenWrongPINsDestroyTheKeyAndRestartsDoNotReset() async throws {
        let (world, _) = try await protectedWorld()
        for failure in 1...10 {
            // Each attempt from a fresh process: restarting must not reset anything.
            let keymaker = world.keymaker()
            if failure >= 5 {
                await #expect(throws: KeymakerError.self) { try await keymaker.unlock(.pin(Fixtures.pin("0000"))) }
                world.clock.advance(seconds: Double(Keymaker.delay(afterFailures: failure - 1)))
            }
            let expected: KeymakerError = failure == 10 ? .mainKeyDestroyed : .wrongPIN(attemptsLeft: 10 - failure)
            await #expect(throws: expected) { try await keymaker.unlock(.pin(Fixtures.pin("0000"))) }
        }
        let after = world.keymaker()
        #expect(try await after.isSetUp() == false)
        await #expect(throws: KeymakerError.notSetUp) { try await after.unlock(.pin(Fixtures.pin("135790"))) }
        #expect(TemporaryDirectory.files(below: "\(world.root.path)/keychain").filter { $0.hasSuffix(".item") }.isEmpty)
    }

    @Test func theDelayIsEnforcedAndTheRightPINResetsTheCount() async throws {
        let (world, keymaker) = try await protectedWorld()
        for _ in 1...4 { _ = try? await keymaker.unlock(.pin(Fixtures.pin("0000"))) }
        #expect(try await keymaker.failedAttempts() == 4)
        await #expect(throws: KeymakerError.tooSoon(retryAfterSeconds: 30)) {
            try await keymaker.unlock(.pin(Fixtures.pin("135790")))
        }
        world.clock.advance(seconds: 29)
        await #expect(throws: KeymakerError.tooSoon(retryAfterSeconds: 1)) {
            try await keymaker.unlock(.pin(Fixtures.pin("135790")))
        }
        world.clock.advance(seconds: 1)
        try await keymaker.unlock(.pin(Fixtures.pin("135790")))
        #expect(try await keymaker.failedAttempts() == 0)
    }

    @Test func settingTheClockBackDoesNotShortenTheDelay() async throws {
        let (world, keymaker) = try await protectedWorld()
        for _ in 1...4 { _ = try? await keymaker.unlock(.pin(Fixtures.pin("0000"))) }
        world.clock.jumpWallClock(seconds: -3600)
        await #expect(throws: KeymakerError.tooSoon(retryAfterSeconds: 30)) {
            try await keymaker.unlock(.pin(Fixtures.pin("135790")))
        }
        world.clock.advance(seconds: 30)
        try await keymaker.unlock(.pin(Fixtures.pin("135790")))
    }

    @Test func aDeletedAttemptRecordCountsAsExhausted() async throws {
        let (world, _) = try await protectedWorld()
        try world.keychain.delete(KeychainAddress(service: "coffer.attempts", account: "alice"))
        let keymaker = world.keymaker()
        await #expect(throws: KeymakerError.self) { try await keymaker.unlock(.pin(Fixtures.pin("135790"))) }
        #expect(try await keymaker.isSetUp() == false)
    }

    enum Damage: String, CaseIterable, Sendable {
        case garbageValue, truncatedValue, unknownVersion, flippedByteOnDisk
    }

    @Test(arguments: Damage.allCases)
    func anEditedAttemptRecordCountsAsExhausted(damage: Damage) async throws {
        let (world, _) = try await protectedWorld()
        let address = KeychainAddress(service: "coffer.attempts", account: "alice")
        switch damage {
        case .garbageValue: try world.keychain.update(SecretBytes(copying: [1, 2, 3]), at: address)
        case .truncatedValue: try world.keychain.update(SecretBytes(copying: Array("CFAT".utf8) + [1, 0]), at: address)
        case .unknownVersion:
            try world.keychain.update(
                SecretBytes(copying: Array("CFAT".utf8) + [2] + Array(repeating: 0, count: 9)),
                at: address
            )
        case .flippedByteOnDisk:
            // Find the attempt record's file by damaging each file in turn until that item stops opening.
            var found = false
            for file in TemporaryDirectory.files(below: "\(world.root.path)/keychain") where file.hasSuffix(".item") {
                var bytes = try #require(try SecureFile.read(file))
                bytes[bytes.count - 1] ^= 0xff
                try SecureFile.writeAtomically(bytes, to: file)
                if (try? world.keychain.read(address)) == nil {
                    found = true
                    break
                }
                bytes[bytes.count - 1] ^= 0xff
                try SecureFile.writeAtomically(bytes, to: file)
            }
            #expect(found)
        }
        let keymaker = world.keymaker()
        await #expect(throws: KeymakerError.self) { try await keymaker.unlock(.pin(Fixtures.pin("135790"))) }
        #expect(try await keymaker.isSetUp() == false)
    }
}
