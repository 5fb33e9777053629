import CofferCrypto
import CofferKeychain
import CofferKeymaker
import CofferTesting
import Testing

@Suite struct AutolockStateMachineTests {
    let start = ClockReading(boot: 1_000_000_000_000, wall: 1_700_000_000_000_000_000)

    func later(_ seconds: Int64, wallDrift: Int64 = 0) -> ClockReading {
        ClockReading(
            boot: start.boot + UInt64(seconds) * 1_000_000_000,
            wall: start.wall + (seconds + wallDrift) * 1_000_000_000
        )
    }

    @Test func intervalSchedulesTheDeadlineAndLocksAtIt() {
        var machine = Autolock(policy: .after(seconds: 20))
        #expect(machine.unlocked(start) == .wake(atBoot: later(20).boot))
        #expect(machine.tick(later(19)) == .wake(atBoot: later(20).boot))
        #expect(machine.tick(later(20)) == .lockNow(.timeout))
    }

    @Test func longIntervalsWakeForHeartbeats() {
        var machine = Autolock(policy: .after(seconds: 600))
        #expect(machine.unlocked(start) == .wake(atBoot: later(30).boot))
        #expect(machine.tick(later(30)) == .wake(atBoot: later(60).boot))
    }

    @Test func activityRestartsTheInterval() {
        var machine = Autolock(policy: .after(seconds: 20))
        _ = machine.unlocked(start)
        #expect(machine.activity(later(15)) == .wake(atBoot: later(35).boot))
        #expect(machine.tick(later(30)) == .wake(atBoot: later(35).boot))
    }

    @Test func backgroundLocksOnlyUnderTheBackgroundPolicy() {
        var background = Autolock(policy: .onBackground)
        #expect(background.unlocked(start) == .none)
        #expect(background.enteredBackground(later(1)) == .lockNow(.background))
        var never = Autolock(policy: .never)
        #expect(never.unlocked(start) == .none)
        #expect(never.enteredBackground(later(1)) == .none)
        #expect(never.tick(later(1_000_000)) == .none)
    }

    @Test(arguments: [-3600, -200, 200, 86_400] as [Int64])
    func wallClockJumpsLock(jump: Int64) {
        var machine = Autolock(policy: .after(seconds: 600))
        _ = machine.unlocked(start)
        #expect(machine.tick(later(30, wallDrift: jump)) == .lockNow(.clockTampered))
    }

    @Test func smallDriftIsTolerated() {
        var machine = Autolock(policy: .after(seconds: 600))
        _ = machine.unlocked(start)
        #expect(machine.tick(later(30, wallDrift: 2)) == .wake(atBoot: later(60).boot))
    }

    @Test func lockedMachinesDoNothing() {
        var machine = Autolock(policy: .after(seconds: 5))
        _ = machine.unlocked(start)
        machine.locked()
        #expect(machine.tick(later(100)) == .none)
        #expect(machine.activity(later(100)) == .none)
    }

    @Test(arguments: [
        ("never", AutolockPolicy.never), ("background", .onBackground), ("30s", .after(seconds: 30)),
        ("5m", .after(seconds: 300)), ("2h", .after(seconds: 7200)),
    ])
    func policiesParseAndPrint(text: String, policy: AutolockPolicy) {
        #expect(AutolockPolicy(parsing: text) == policy)
        #expect(policy.description == text)
    }

    @Test(arguments: ["", "5", "m", "-5m", "0s", "5d", "1000000h"])
    func badPoliciesDoNotParse(text: String) {
        #expect(AutolockPolicy(parsing: text) == nil)
    }
}

@Suite struct KeymakerAutolockTests {
    @Test func theTimerLocksAfterTheInterval() async throws {
        let world = try World()
        let keymaker = world.keymaker()
        try await keymaker.createMainKey()
        try await keymaker.setAutolock(.after(seconds: 20))
        #expect(await eventually { world.clock.sleeperCount > 0 })
        world.clock.advance(seconds: 10)
        #expect(await keymaker.isLocked == false)
        world.clock.advance(seconds: 10)
        #expect(await eventually { await keymaker.isLocked })
        await #expect(throws: KeymakerError.locked) { try await keymaker.mainKey(for: .userRequest) }
    }

    @Test func backgroundLocksAtOnce() async throws {
        let world = try World()
        let keymaker = world.keymaker()
        try await keymaker.createMainKey()
        try await keymaker.setAutolock(.onBackground)
        world.clock.advance(seconds: 3600)
        #expect(await keymaker.isLocked == false)
        await keymaker.enteredBackground()
        #expect(await keymaker.isLocked)
    }

    @Test func theClockBeingSetBackLocks() async throws {
        let world = try World()
        let keymaker = world.keymaker()
        var events = keymaker.events.makeAsyncIterator()
        try await keymaker.createMainKey()
        #expect(await events.next() == .mainKeyObtained)
        try await keymaker.setAutolock(.after(seconds: 300))
        world.clock.jumpWallClock(seconds: -7200)
        world.clock.advance(seconds: 30)
        #expect(await events.next() == .mainKeyRemoved(.clockTampered))
    }

    @Test func thePolicyIsStoredSealedAndTamperingFallsBackToMostPrivate() async throws {
        let world = try World()
        let first = world.keymaker()
        try await first.createMainKey()
        try await first.setAutolock(.never)
        let restarted = world.keymaker()
        try await restarted.unlock(.none)
        #expect(await restarted.autolockPolicy == .never)
        try world.keychain.update(
            SecretBytes(copying: [1, 2, 3]),
            at: KeychainAddress(service: "coffer.autolock", account: "alice")
        )
        let tampered = world.keymaker()
        try await tampered.unlock(.none)
        #expect(await tampered.autolockPolicy == AutolockPolicy.mostPrivate)
    }
}
