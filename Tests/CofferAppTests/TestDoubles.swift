import CofferApp
import CofferCrypto
import CofferKeychain
import CofferKeymaker
import CofferTesting
import Logging
import NIOConcurrencyHelpers
import Synchronization
import Testing

/// A keychain that fails the test when touched: for paths that must not read or write secrets.
struct UnimplementedKeychain: Keychain {
    /// Where touching is reported: a test failure by default; a double's own test passes a recorder.
    var report: @Sendable (String) -> Void = { Issue.record(Comment(rawValue: $0)) }

    func add(
        _ value: SecretBytes,
        at address: KeychainAddress,
        accessibility: KeychainAccessibility
    )
        throws(KeychainError)
    {
        report("UnimplementedKeychain.add was called: this path must not touch the keychain")
        throw .itemNotFound
    }

    func update(_ value: SecretBytes, at address: KeychainAddress) throws(KeychainError) {
        report("UnimplementedKeychain.update was called: this path must not touch the keychain")
        throw .itemNotFound
    }

    func read(_ address: KeychainAddress) throws(KeychainError) -> SecretBytes {
        report("UnimplementedKeychain.read was called: this path must not touch the keychain")
        throw .itemNotFound
    }

    func delete(_ address: KeychainAddress) throws(KeychainError) {
        report("UnimplementedKeychain.delete was called: this path must not touch the keychain")
    }

    func addresses(accessGroup: String, service: String) throws(KeychainError) -> [KeychainAddress] {
        report("UnimplementedKeychain.addresses was called: this path must not touch the keychain")
        return []
    }

    func passcodeRemoved() throws(KeychainError) {
        report("UnimplementedKeychain.passcodeRemoved was called: this path must not touch the keychain")
    }
}

/// A presence authenticator that fails the test (without crashing the run) when asked.
struct RecordingUnimplementedPresence: PresenceAuthenticator {
    /// Where touching is reported: a test failure by default; a double's own test passes a recorder.
    var report: @Sendable (String) -> Void = { Issue.record(Comment(rawValue: $0)) }

    func confirmPresence(reason: String) async -> Bool {
        report("UnimplementedPresence.confirmPresence was called: this path must not ask for presence")
        return false
    }
}

/// A clock that fails the test when read.
struct UnimplementedClock: KeymakerClock {
    /// Where touching is reported: a test failure by default; a double's own test passes a recorder.
    var report: @Sendable (String) -> Void = { Issue.record(Comment(rawValue: $0)) }

    func now() -> ClockReading {
        report("UnimplementedClock.now was called: this path must not read the clock")
        return ClockReading(boot: 0, wall: 0)
    }

    func sleep(untilBoot deadline: UInt64) async throws {
        report("UnimplementedClock.sleep was called: this path must not wait")
    }
}

/// A keychain that serves from `inner` until ``forbid()``, then reports every touch like ``UnimplementedKeychain``:
/// a test sets an account up with a working keychain, then checks that the path under test leaves it alone.
final class GuardedKeychain: Keychain {
    private let inner: any Keychain
    private let forbidden = Atomic(false)
    private let unimplemented = UnimplementedKeychain()

    init(_ inner: any Keychain) { self.inner = inner }

    /// From now on, every call fails the test.
    func forbid() { forbidden.store(true, ordering: .sequentiallyConsistent) }
    private var current: any Keychain { forbidden.load(ordering: .sequentiallyConsistent) ? unimplemented : inner }

    func add(
        _ value: SecretBytes,
        at address: KeychainAddress,
        accessibility: KeychainAccessibility
    ) throws(KeychainError) { try current.add(value, at: address, accessibility: accessibility) }
    func update(_ value: SecretBytes, at address: KeychainAddress) throws(KeychainError) {
        try current.update(value, at: address)
    }
    func read(_ address: KeychainAddress) throws(KeychainError) -> SecretBytes { try current.read(address) }
    func delete(_ address: KeychainAddress) throws(KeychainError) { try current.delete(address) }
    func addresses(accessGroup: String, service: String) throws(KeychainError) -> [KeychainAddress] {
        try current.addresses(accessGroup: accessGroup, service: service)
    }
    func passcodeRemoved() throws(KeychainError) { try current.passcodeRemoved() }
}

/// A clock that reads `inner` until ``forbid()``, then reports every touch like ``UnimplementedClock``.
final class GuardedClock: KeymakerClock {
    private let inner: any KeymakerClock
    private let forbidden = Atomic(false)

    init(_ inner: any KeymakerClock) { self.inner = inner }

    /// From now on, every call fails the test.
    func forbid() { forbidden.store(true, ordering: .sequentiallyConsistent) }
    private var current: any KeymakerClock {
        forbidden.load(ordering: .sequentiallyConsistent) ? UnimplementedClock() : inner
    }

    func now() -> ClockReading { current.now() }
    func sleep(untilBoot deadline: UInt64) async throws { try await current.sleep(untilBoot: deadline) }
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

/// Collects what an unimplemented double reports, for the doubles' own tests.
final class TouchRecorder: Sendable {
    private let messages = NIOLockedValueBox<[String]>([])
    var recorded: [String] { messages.withLockedValue { $0 } }
    var report: @Sendable (String) -> Void { { [self] message in messages.withLockedValue { $0.append(message) } } }
}
