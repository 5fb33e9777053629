import CofferCrypto
import CofferKeychain
import CofferKeymaker
import Foundation

/// Ready-made test fixtures.
public enum Fixtures {
    /// A device identity with a random secret and the given machine id.
    public static func device(machineID: String = "test-machine-0001") -> DeviceIdentity {
        try! DeviceIdentity(secret: SecretBytes(randomCount: 32), machineID: Array(machineID.utf8))
    }

    /// The Keymaker configuration for tests: cheap scrypt (explicitly allowed), otherwise production values.
    public static let keymakerConfiguration = Keymaker.Configuration(
        scrypt: .insecureForTestingOnly,
        allowInsecureKDF: true
    )

    /// ``keymakerConfiguration`` without the autolock, for a Keymaker on the real clock: a slow machine must not lock
    /// a test's key halfway (the 5-minute default fired once in CI, in a crash test that ran 304 s under load). The
    /// autolock's own tests use a `TestClock` and set their policy.
    static let realClockConfiguration = Keymaker.Configuration(
        scrypt: .insecureForTestingOnly,
        allowInsecureKDF: true,
        defaultAutolock: .never
    )

    /// A Keymaker over a fresh in-memory keychain with a MainKey made (random, or `mainKey`'s bytes) and so
    /// unlocked: the key holder of the store, cache and sync tests. On the real clock it never autolocks.
    public static func unlockedKeymaker(
        account: String = "alice",
        clock: any KeymakerClock = SystemClock(),
        mainKey: [UInt8]? = nil
    ) async throws -> Keymaker {
        let keymaker = Keymaker(
            account: account,
            keychain: InMemoryKeychain(),
            device: device(),
            clock: clock,
            configuration: clock is SystemClock ? realClockConfiguration : keymakerConfiguration
        )
        try await keymaker.createMainKey(injected: mainKey.map { SecretBytes(copying: $0) })
        return keymaker
    }

    /// A PIN as secret bytes.
    public static func pin(_ text: String) -> SecretBytes { SecretBytes(copying: Array(text.utf8)) }

    /// Decodes the JSON file at `path`, relative to the folder of the test file that calls (for example
    /// `"Fixtures/vectors.json"`).
    public static func json<Value: Decodable>(
        _ type: Value.Type,
        _ path: String,
        besideFile file: String = #filePath
    ) throws -> Value {
        let url = URL(fileURLWithPath: file).deletingLastPathComponent().appendingPathComponent(path)
        return try JSONDecoder().decode(type, from: Data(contentsOf: url))
    }
}
