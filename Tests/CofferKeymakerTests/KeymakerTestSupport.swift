import CofferCrypto
import CofferKeychain
import CofferKeymaker
import CofferTesting

/// One test's world: a keychain, a device, a secure element, a clock, and a way to make Keymakers over them (a new
/// Keymaker over the same storage is what a restarted process sees).
struct World {
    let root = TemporaryDirectory()
    let device = Fixtures.device()
    let clock = TestClock()
    let presence = TestPresence()
    let keychain: any Keychain
    let element: SoftwareSecureElement

    init(fileBacked: Bool = true) throws {
        keychain =
            fileBacked
            ? try FileKeychain(folder: "\(root.path)/keychain", device: device) : InMemoryKeychain()
        element = try SoftwareSecureElement(folder: "\(root.path)/secure-element", device: device, presence: presence)
    }

    func keymaker(account: String = "alice") -> Keymaker {
        Keymaker(
            account: account,
            keychain: keychain,
            device: device,
            secureElement: element,
            clock: clock,
            configuration: Fixtures.keymakerConfiguration
        )
    }
}

extension Keymaker {
    /// The MainKey's bytes, for comparing keys across rewraps (tests only).
    func keyBytes() throws -> [UInt8] { try mainKey(for: .userRequest).withUnsafeBytes { Array($0) } }
}

/// Waits (bounded, about two seconds) for a condition that another task makes true; returns whether it did.
func eventually(_ condition: () async -> Bool) async -> Bool {
    for _ in 0..<2000 {
        if await condition() { return true }
        try? await Task.sleep(nanoseconds: 1_000_000)
    }
    return await condition()
}
