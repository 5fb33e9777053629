import CofferCrypto
import CofferKeychain
import CofferKeymaker
import CofferTesting
import NIOConcurrencyHelpers
import Testing

/// Stops every protection change after each of its steps, restarts, and checks that the stored state is consistent
/// and still unlocks to the same MainKey.
@Suite struct CrashSafetyTests {
    enum Change: String, CaseIterable, Sendable {
        case activatePINFromNone, activateElementWithPIN, changePIN, removeLastPIN, removePINKeepElement, logout
    }

    /// Records step names, and throws at the `stopAt`-th one.
    final class Stopper: Sendable {
        let steps = NIOLockedValueBox<[ProtectionStep]>([])
        let stopAt: Int?
        init(stopAt: Int?) { self.stopAt = stopAt }
        func hook(_ step: ProtectionStep) throws {
            let count = steps.withLockedValue { steps in
                steps.append(step)
                return steps.count
            }
            if count == stopAt { throw CancellationError() }
        }
    }

    /// Prepares the state before `change` and returns the MainKey bytes.
    func prepare(_ change: Change, _ keymaker: Keymaker) async throws -> [UInt8] {
        try await keymaker.createMainKey()
        let bytes = try await keymaker.keyBytes()
        switch change {
        case .activatePINFromNone: break
        case .activateElementWithPIN, .changePIN, .removeLastPIN, .logout:
            try await keymaker.activatePIN(Fixtures.pin("123456"), authorizedBy: .none)
        case .removePINKeepElement:
            try await keymaker.activatePIN(Fixtures.pin("123456"), authorizedBy: .none)
            try await keymaker.activateSecureElement(authorizedBy: .pin(Fixtures.pin("123456")))
        }
        return bytes
    }

    func perform(_ change: Change, _ keymaker: Keymaker) async throws {
        switch change {
        case .activatePINFromNone: try await keymaker.activatePIN(Fixtures.pin("123456"), authorizedBy: .none)
        case .activateElementWithPIN:
            try await keymaker.activateSecureElement(authorizedBy: .pin(Fixtures.pin("123456")))
        case .changePIN:
            try await keymaker.activatePIN(Fixtures.pin("567890"), authorizedBy: .pin(Fixtures.pin("123456")))
        case .removeLastPIN, .removePINKeepElement:
            try await keymaker.deactivate(.pin, authorizedBy: .pin(Fixtures.pin("123456")))
        case .logout: try await keymaker.logout(authorizedBy: .pin(Fixtures.pin("123456")))
        }
    }

    /// Tries every unlock method a restarted process could use; returns the key it gets, if any.
    func unlockAnyway(_ keymaker: Keymaker, strategies: Set<ProtectionStrategy>) async throws -> [UInt8] {
        if strategies.contains(.none) {
            try await keymaker.unlock(.none)
        } else if strategies.contains(.secureElement) {
            try await keymaker.unlock(.secureElement(reason: "test"))
        } else {
            do {
                try await keymaker.unlock(.pin(Fixtures.pin("123456")))
            } catch .wrongPIN {
                try await keymaker.unlock(.pin(Fixtures.pin("567890")))
            }
        }
        return try await keymaker.keyBytes()
    }

    @Test(arguments: Change.allCases)
    func aCrashAfterAnyStepRecoversConsistently(change: Change) async throws {
        // First run the change to completion to learn how many steps it has.
        let probeWorld = try World()
        let probe = probeWorld.keymaker()
        _ = try await prepare(change, probe)
        let counter = Stopper(stopAt: nil)
        await probe.setStepHook { try counter.hook($0) }
        try await perform(change, probe)
        let stepCount = counter.steps.withLockedValue { $0.count }
        #expect(stepCount >= 2)

        for stop in 1...stepCount {
            let world = try World()
            let keymaker = world.keymaker()
            let original = try await prepare(change, keymaker)
            let stopper = Stopper(stopAt: stop)
            await keymaker.setStepHook { try stopper.hook($0) }
            await #expect(throws: KeymakerError.self) { try await perform(change, keymaker) }

            // A new process over the same storage.
            let restarted = world.keymaker()
            guard try await restarted.isSetUp() else {
                #expect(change == .logout, "only a logout may leave no key (stopped after step \(stop))")
                continue
            }
            #expect(change != .logout || stop < stepCount)
            let strategies = try await restarted.strategies()
            if change == .logout {
                // An interrupted logout either had not started deleting wraps or was finished by recovery.
                #expect(try await unlockAnyway(restarted, strategies: strategies) == original)
                continue
            }
            #expect(try await unlockAnyway(restarted, strategies: strategies) == original)
            // Every listed strategy works and nothing unlisted is left behind.
            if strategies.contains(.pin) { #expect(try await restarted.failedAttempts() == 0) }
            let items = TemporaryDirectory.files(below: "\(world.root.path)/keychain").filter { $0.hasSuffix(".item") }
            let wraps = strategies.count
            let records = 1 + 1 + (strategies.contains(.pin) ? 1 : 0)  // protection + autolock (+ attempts)
            #expect(
                items.count == wraps + records,
                "stopped after step \(stop): \(items.count) items for \(strategies)"
            )
        }
    }

    @Test func anInterruptedLoginLeavesNothing() async throws {
        let world = try World()
        let keymaker = world.keymaker()
        await keymaker.setStepHook { step in if step == .noneWritten { throw CancellationError() } }
        await #expect(throws: KeymakerError.interrupted(step: .noneWritten)) { try await keymaker.createMainKey() }
        let restarted = world.keymaker()
        #expect(try await restarted.isSetUp() == false)
        #expect(TemporaryDirectory.files(below: "\(world.root.path)/keychain").filter { $0.hasSuffix(".item") }.isEmpty)
        try await restarted.createMainKey()
    }

    @Test func theChangesTogetherPassEveryStep() async throws {
        var seen = Set<ProtectionStep>()
        for change in Change.allCases {
            let world = try World()
            let keymaker = world.keymaker()
            let recorder = Stopper(stopAt: nil)
            await keymaker.setStepHook { try recorder.hook($0) }
            _ = try await prepare(change, keymaker)
            recorder.steps.withLockedValue { $0.removeAll() }
            try await perform(change, keymaker)
            seen.formUnion(recorder.steps.withLockedValue { $0 })
        }
        // The login (prepare) passes noneWritten; every other step is walked by the crash test above.
        seen.insert(.noneWritten)
        #expect(seen == Set(ProtectionStep.allCases))
    }
}
