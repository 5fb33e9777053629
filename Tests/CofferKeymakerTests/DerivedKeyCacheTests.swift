import CofferKeymaker
import CofferTesting
import NIOConcurrencyHelpers
import Testing

@Suite struct DerivedKeyCacheTests {
    struct Locked: Error, Equatable {}

    @Test func derivesOncePerUnlockAndAgainAfterALock() async throws {
        let world = try World()
        let keymaker = world.keymaker()
        try await keymaker.createMainKey()
        let cache = DerivedKeyCache<[UInt8]>()
        let derivations = NIOLockedValueBox(0)
        func value() async throws(Locked) -> [UInt8] {
            try await cache.value(from: keymaker) { _ in
                Locked()
            } derive: { (key) throws(Locked) in
                derivations.withLockedValue { $0 += 1 }
                return key.withUnsafeBytes { Array($0) }
            }
        }
        let first = try await value()
        _ = try await value()
        #expect(derivations.withLockedValue { $0 } == 1)

        await keymaker.lock()
        await #expect(throws: Locked()) { try await value() }
        try await keymaker.unlock(.none)
        #expect(try await value() == first)
        #expect(derivations.withLockedValue { $0 } == 2)
    }
}
