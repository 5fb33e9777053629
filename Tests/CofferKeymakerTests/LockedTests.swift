import CofferCrypto
import CofferKeymaker
import CofferTesting
import Testing

@Suite struct LockedTests {
    struct Account: Codable, Equatable, Sendable {
        var username: String
        var token: String
    }

    @Test func roundTripsAndBindsTheLabel() async throws {
        let world = try World()
        let keymaker = world.keymaker()
        try await keymaker.createMainKey()
        let key = try await keymaker.mainKey(for: .userRequest)
        let value = Account(username: "alice", token: "t0ken")
        let locked = try Locked(clearValue: value, with: key, label: "account")
        #expect(try locked.unlock(with: key) == value)
        #expect(!locked.description.contains("alice"))
        let moved = Locked<Account>(encrypted: locked.encrypted, label: "settings")
        #expect(throws: KeymakerError.self) { try moved.unlock(with: key) }
        var bytes = locked.encrypted
        bytes[bytes.count / 2] ^= 1
        #expect(throws: KeymakerError.self) {
            try Locked<Account>(encrypted: bytes, label: "account").unlock(with: key)
        }
        await keymaker.lock()
        #expect(throws: KeymakerError.locked) { try locked.unlock(with: key) }
    }
}
