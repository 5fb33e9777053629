import CofferCrypto
import CofferKeychain
import CofferKeymaker
import CofferTesting
import NIOConcurrencyHelpers
import Testing

/// A wall clock that moves an hour on every reading, so no attempt waits for the guard's delay (the boot clock
/// stands still; no key is unlocked, so autolock never looks).
final class HourlyClock: KeymakerClock {
    private let wall = NIOLockedValueBox<Int64>(1_767_225_600 * 1_000_000_000)
    func now() -> ClockReading {
        ClockReading(
            boot: 1_000_000_000_000,
            wall: wall.withLockedValue {
                $0 += 3600 * 1_000_000_000
                return $0
            }
        )
    }
    func sleep(untilBoot deadline: UInt64) async throws { try await Task.sleep(nanoseconds: 1_000_000_000_000) }
}

/// Wrong PINs tried at once, from Keymakers over separate `FileKeychain` instances of one folder (as separate
/// processes are): every one is counted, and the limit destroys the key at exactly the tenth.
@Suite struct ParallelAttemptTests {
    /// A protected account and a factory of Keymakers that share nothing but the folder.
    func protectedAccount(
        clock: any KeymakerClock,
        destroyed: Recorder? = nil
    ) async throws -> (World, @Sendable () throws -> Keymaker) {
        let world = try World()
        let folder = "\(world.root.path)/keychain"
        let device = world.device
        var configuration = Fixtures.keymakerConfiguration
        configuration.onDestroy = { account in destroyed?.names.withLockedValue { $0.append(account) } }
        let make: @Sendable () throws -> Keymaker = { [configuration] in
            Keymaker(
                account: "alice",
                keychain: try FileKeychain(folder: folder, device: device),
                device: device,
                clock: clock,
                configuration: configuration
            )
        }
        let first = try make()
        try await first.createMainKey()
        try await first.activatePIN(Fixtures.pin("135790"), authorizedBy: .none)
        return (world, make)
    }

    /// Runs `count` wrong PINs at once, each from its own Keymaker; returns each one's error.
    func wrongPINsAtOnce(
        _ count: Int,
        _ make: @escaping @Sendable () throws -> Keymaker
    ) async throws
        -> [KeymakerError]
    {
        let keymakers = try (0..<count).map { _ in try make() }
        return await withTaskGroup(of: KeymakerError?.self) { group in
            for (index, keymaker) in keymakers.enumerated() {
                group.addTask {
                    do {
                        try await keymaker.unlock(.pin(Fixtures.pin("9000\(index + 10)")))
                        return nil
                    } catch let error as KeymakerError {
                        return error
                    } catch {
                        return .interrupted(step: .wrapWritten)
                    }
                }
            }
            var errors: [KeymakerError] = []
            for await error in group { errors.append(error ?? .interrupted(step: .recordWritten)) }
            return errors
        }
    }

    @Test func fourAtOnceAreAllCounted() async throws {
        let clock = TestClock()
        let (world, make) = try await protectedAccount(clock: clock)
        defer { withExtendedLifetime(world) {} }
        let errors = try await wrongPINsAtOnce(4, make)
        let left = errors.compactMap { error -> Int? in
            if case .wrongPIN(let left) = error { return left }
            return nil
        }
        #expect(left.sorted() == [6, 7, 8, 9])
        let fresh = try make()
        #expect(try await fresh.failedAttempts() == 4)
        // The fifth waits, whoever asks.
        await #expect(throws: KeymakerError.tooSoon(retryAfterSeconds: 30)) {
            try await fresh.unlock(.pin(Fixtures.pin("135790")))
        }
    }

    @Test func twelveAtOnceShredAtExactlyTheTenth() async throws {
        let destroyed = Recorder()
        let (world, make) = try await protectedAccount(clock: HourlyClock(), destroyed: destroyed)
        let errors = try await wrongPINsAtOnce(12, make)
        let left = errors.compactMap { error -> Int? in
            if case .wrongPIN(let left) = error { return left }
            return nil
        }
        // Nine counted failures with every count from 9 down to 1, then the tenth destroys.
        #expect(left.sorted() == Array(1...9))
        #expect(errors.filter { $0 == KeymakerError.mainKeyDestroyed }.count >= 1)
        #expect(
            errors.allSatisfy { $0 == KeymakerError.mainKeyDestroyed || $0 == KeymakerError.notSetUp || $0.isWrongPIN },
            "\(errors)"
        )
        let after = try make()
        #expect(try await after.isSetUp() == false)
        await #expect(throws: KeymakerError.notSetUp) { try await after.unlock(.pin(Fixtures.pin("135790"))) }
        #expect(TemporaryDirectory.files(below: "\(world.root.path)/keychain").filter { $0.hasSuffix(".item") }.isEmpty)
        #expect(destroyed.names.withLockedValue { $0.contains("alice") })
    }

    @Test func oneKeymakerAlsoCountsConcurrentCalls() async throws {
        let (world, make) = try await protectedAccount(clock: TestClock())
        defer { withExtendedLifetime(world) {} }
        let keymaker = try make()
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<3 {
                group.addTask { _ = try? await keymaker.unlock(.pin(Fixtures.pin("00000\(index)"))) }
            }
        }
        #expect(try await keymaker.failedAttempts() == 3)
    }
}

/// Account names a destroy action was called with.
final class Recorder: Sendable {
    let names = NIOLockedValueBox<[String]>([])
}

extension KeymakerError {
    var isWrongPIN: Bool {
        if case .wrongPIN = self { return true }
        return false
    }
}
