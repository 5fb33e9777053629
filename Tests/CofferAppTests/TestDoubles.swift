import CofferApp
import CofferCrypto
import CofferKeychain
import CofferKeymaker
import CofferTesting
import Logging
import Testing

/// A keychain that fails the test when touched: for paths that must not read or write secrets.
struct UnimplementedKeychain: Keychain {
    func add(
        _ value: SecretBytes,
        at address: KeychainAddress,
        accessibility: KeychainAccessibility
    )
        throws(KeychainError)
    {
        Issue.record("UnimplementedKeychain.add was called: this path must not touch the keychain")
        throw .itemNotFound
    }

    func update(_ value: SecretBytes, at address: KeychainAddress) throws(KeychainError) {
        Issue.record("UnimplementedKeychain.update was called: this path must not touch the keychain")
        throw .itemNotFound
    }

    func read(_ address: KeychainAddress) throws(KeychainError) -> SecretBytes {
        Issue.record("UnimplementedKeychain.read was called: this path must not touch the keychain")
        throw .itemNotFound
    }

    func delete(_ address: KeychainAddress) throws(KeychainError) {
        Issue.record("UnimplementedKeychain.delete was called: this path must not touch the keychain")
    }

    func addresses(accessGroup: String, service: String) throws(KeychainError) -> [KeychainAddress] {
        Issue.record("UnimplementedKeychain.addresses was called: this path must not touch the keychain")
        return []
    }

    func passcodeRemoved() throws(KeychainError) {
        Issue.record("UnimplementedKeychain.passcodeRemoved was called: this path must not touch the keychain")
    }
}

/// A presence authenticator that fails the test (without crashing the run) when asked.
struct RecordingUnimplementedPresence: PresenceAuthenticator {
    func confirmPresence(reason: String) async -> Bool {
        Issue.record("UnimplementedPresence.confirmPresence was called: this path must not ask for presence")
        return false
    }
}

/// A clock that fails the test when read.
struct UnimplementedClock: KeymakerClock {
    func now() -> ClockReading {
        Issue.record("UnimplementedClock.now was called: this path must not read the clock")
        return ClockReading(boot: 0, wall: 0)
    }

    func sleep(untilBoot deadline: UInt64) async throws {
        Issue.record("UnimplementedClock.sleep was called: this path must not wait")
    }
}

/// A global container over a temporary home, with test doubles: an in-memory keychain, a test clock, cheap scrypt
/// and a secure element whose presence the test chooses.
struct TestApp {
    let folder = TemporaryDirectory(prefix: "coffer-app")
    let global: GlobalContainer
    let keychain = InMemoryKeychain()
    let clock = TestClock()
    let presence = TestPresence()

    init() {
        let root = folder.path
        global = GlobalContainer(
            paths: AppPaths(data: "\(root)/data", keychain: "\(root)/keychain", state: "\(root)/state"),
            logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() },
            keymakerConfiguration: Fixtures.keymakerConfiguration
        )
        let device = Fixtures.device()
        let (keychain, clock, presence) = (keychain, clock, presence)
        global.deviceIdentityFactory.register { device }
        global.keychainFactory.register { keychain }
        global.clockFactory.register { clock }
        global.secureElementFactory.register {
            try SoftwareSecureElement(folder: "\(root)/state/secure-element", device: device, presence: presence)
        }
    }

    /// Creates `account` (strategy `none`) and leaves it locked.
    func account(_ name: String) async throws -> UserContainer {
        let user = try global.keymakerRegistry.user(name)
        try await user.keymaker.createMainKey()
        try await user.keymaker.lock()
        return user
    }
}
