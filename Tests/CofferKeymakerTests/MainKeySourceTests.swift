import CofferCrypto
import CofferKeymaker
import CofferTesting
import Testing

/// Typed key use (issue 23): a person's request restarts the autolock interval, background work never does, and a
/// key granted to a background job serves that job alone.
@Suite struct MainKeySourceTests {
    @Test func backgroundUseNeverRestartsTheAutolock() async throws {
        let clock = TestClock()
        let keymaker = try await Fixtures.unlockedKeymaker(clock: clock)
        try await keymaker.setAutolock(.after(seconds: 30))
        // A background use every 5 s for 90 s: the deadline stays where the last request put it.
        for _ in 0..<5 {
            clock.advance(seconds: 5)
            _ = try await keymaker.mainKey(for: .background)
        }
        #expect(await keymaker.secondsUntilAutolock() == 5)
        clock.advance(seconds: 5)
        await keymaker.checkAutolock()
        #expect(await keymaker.isLocked)
        await #expect(throws: KeymakerError.locked) { try await keymaker.mainKey(for: .background) }
    }

    @Test func aUserRequestRestartsTheAutolock() async throws {
        let clock = TestClock()
        let keymaker = try await Fixtures.unlockedKeymaker(clock: clock)
        try await keymaker.setAutolock(.after(seconds: 30))
        clock.advance(seconds: 25)
        _ = try await keymaker.mainKey(for: .userRequest)
        #expect(await keymaker.secondsUntilAutolock() == 30)
    }

    @Test func theRunningTasksUseIsWhatTheSourceIsAskedFor() async throws {
        let clock = TestClock()
        let keymaker = try await Fixtures.unlockedKeymaker(clock: clock)
        try await keymaker.setAutolock(.after(seconds: 30))
        clock.advance(seconds: 20)
        // Outside a request path the use is background.
        #expect(KeyUse.current == .background)
        _ = try await keymaker.mainKey()
        #expect(await keymaker.secondsUntilAutolock() == 10)
        _ = try await KeyUse.userRequest.run { try await keymaker.mainKey() }
        #expect(await keymaker.secondsUntilAutolock() == 30)
    }

    @Test func anEphemeralKeyServesBackgroundWorkOnlyAndIsWipedAtTheEnd() throws {
        let bytes = SecretBytes(randomCount: MainKey.byteCount)
        let source = try EphemeralKeySource(taking: bytes)
        let key = try source.mainKey(for: .background)
        #expect(throws: KeymakerError.locked) { try source.mainKey(for: .userRequest) }
        source.end()
        #expect(key.isWiped && bytes.isWiped)
        #expect(throws: KeymakerError.locked) { try source.mainKey(for: .background) }
        #expect(throws: KeymakerError.locked) { try EphemeralKeySource(taking: SecretBytes(randomCount: 16)) }
    }

    @Test func aGrantedKeyServesOnlyItsJobWhileTheAccountIsLocked() async throws {
        let keymaker = try await Fixtures.unlockedKeymaker()
        let accountKey = try await keymaker.mainKey(for: .userRequest).withUnsafeBytes { Array($0) }
        await keymaker.lock()
        let keys = AccountKeys(keymaker: keymaker)
        await #expect(throws: KeymakerError.locked) { try await keys.mainKey(for: .background) }
        let granted = SecretBytes(copying: accountKey)
        let seen = try await keys.withBackgroundKey(granted) { () async throws -> [UInt8] in
            // A person's request during the job still finds the account locked.
            await #expect(throws: KeymakerError.locked) { try await keys.mainKey(for: .userRequest) }
            await #expect(throws: KeymakerError.locked) {
                try await KeyUse.userRequest.run { try await keys.mainKey() }
            }
            // A second job cannot take a key while one holds it.
            await #expect(throws: KeymakerError.locked) {
                try await keys.withBackgroundKey(SecretBytes(randomCount: MainKey.byteCount)) {}
            }
            return try await keys.mainKey().withUnsafeBytes { Array($0) }
        }
        #expect(seen == accountKey)
        #expect(granted.isWiped && !keys.hasBackgroundKey)
        await #expect(throws: KeymakerError.locked) { try await keys.mainKey(for: .background) }
        #expect(await keymaker.isLocked)
    }
}
