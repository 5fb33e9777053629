import CofferBlocking
import CofferCrypto
import CofferKeychain
import CofferKeymaker
import CofferTesting
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Where blocking work runs (docs/ARCHITECTURE.md, "Concurrency"): on ``BlockingPool``'s threads, never on an event
/// loop or the cooperative pool, even when the caller runs on an event loop.
@Suite struct BlockingWorkTests {
    /// Where the calling thread is.
    struct Place: Sendable, Equatable {
        var onEventLoop: Bool
        var inPool: Bool
        var threadName: String

        static var here: Place {
            Place(
                onEventLoop: MultiThreadedEventLoopGroup.currentEventLoop != nil,
                inPool: BlockingPool.isCurrentThreadInPool,
                threadName: threadName()
            )
        }

        /// The calling thread's name, from `/proc/thread-self/comm`.
        static func threadName() -> String {
            let fd = open("/proc/thread-self/comm", O_RDONLY)
            guard fd >= 0 else { return "" }
            defer { close(fd) }
            var bytes = [UInt8](repeating: 0, count: 64)
            let count = read(fd, &bytes, bytes.count)
            let text = String(decoding: bytes.prefix(max(0, count)), as: UTF8.self)
            return text.split(separator: "\n").first.map(String.init) ?? ""
        }

        /// A thread of the blocking pool (NIOThreadPool names its threads `TP-#n`), not an event loop.
        var isBlockingPool: Bool { !onEventLoop && inPool && threadName.hasPrefix("TP-#") }
    }

    @Test func theHelperRunsItsClosureOnThePoolWhenCalledFromAnEventLoop() async throws {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let (caller, inside) = await withTaskExecutorPreference(LoopExecutor(loop)) {
            let caller = Place.here
            let inside = await BlockingPool.run { Place.here }
            return (caller, inside)
        }
        // The caller really was on the event loop, and the closure was not.
        #expect(caller.onEventLoop && !caller.inPool)
        #expect(inside.isBlockingPool, "\(inside)")
    }

    @Test func theHelperRunsItsClosureOnThePoolWhenCalledFromTheCooperativePool() async throws {
        let caller = Place.here
        let inside = await BlockingPool.run { Place.here }
        #expect(!caller.inPool && !caller.onEventLoop)
        #expect(inside.isBlockingPool, "\(inside)")
    }

    @Test func theHelperPassesTypedErrorsThrough() async {
        await #expect(throws: KeychainError.itemNotFound) {
            try await BlockingPool.run { () throws(KeychainError) -> Int in throw .itemNotFound }
        }
    }

    @Test func theKeymakersKeychainCallsRunOnThePoolWhenCalledFromAnEventLoop() async throws {
        let keychain = RecordingKeychain()
        let device = Fixtures.device()
        let keymaker = Keymaker(
            account: "alice",
            keychain: keychain,
            device: device,
            clock: TestClock(),
            configuration: Fixtures.keymakerConfiguration
        )
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let caller = try await withTaskExecutorPreference(LoopExecutor(loop)) {
            let caller = Place.here
            try await keymaker.createMainKey()
            try await keymaker.activatePIN(Fixtures.pin("135790"), authorizedBy: .none)
            await keymaker.lock()
            try await keymaker.unlock(.pin(Fixtures.pin("135790")))
            _ = try await keymaker.strategies()
            _ = try await keymaker.failedAttempts()
            try await keymaker.setAutolock(.after(seconds: 60))
            return caller
        }
        #expect(caller.onEventLoop)
        let places = keychain.places
        #expect(places.count > 10)
        #expect(places.allSatisfy { $0.isBlockingPool }, "\(places.filter { !$0.isBlockingPool })")
    }
}

/// Runs a task's jobs on one event loop (what the agent does for a connection's task).
private final class LoopExecutor: TaskExecutor {
    let loop: any EventLoop
    init(_ loop: any EventLoop) { self.loop = loop }
    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        loop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}

/// An in-memory keychain (with the cross-process lock a PIN attempt takes) that records where each call ran.
final class RecordingKeychain: KeychainLocking {
    private let inner = InMemoryKeychain()
    private let lock = NIOLock()
    private let recorded = NIOLockedValueBox<[BlockingWorkTests.Place]>([])

    var places: [BlockingWorkTests.Place] { recorded.withLockedValue { $0 } }

    private func note() { recorded.withLockedValue { $0.append(.here) } }

    func add(
        _ value: SecretBytes,
        at address: KeychainAddress,
        accessibility: KeychainAccessibility
    ) throws(KeychainError) {
        note()
        try inner.add(value, at: address, accessibility: accessibility)
    }

    func update(_ value: SecretBytes, at address: KeychainAddress) throws(KeychainError) {
        note()
        try inner.update(value, at: address)
    }

    func read(_ address: KeychainAddress) throws(KeychainError) -> SecretBytes {
        note()
        return try inner.read(address)
    }

    func delete(_ address: KeychainAddress) throws(KeychainError) {
        note()
        inner.delete(address)
    }

    func addresses(accessGroup: String, service: String) throws(KeychainError) -> [KeychainAddress] {
        note()
        return inner.addresses(accessGroup: accessGroup, service: service)
    }

    func passcodeRemoved() throws(KeychainError) {
        note()
        inner.passcodeRemoved()
    }

    func withExclusiveLock<R>(named name: String, _ body: () -> R) throws(KeychainError) -> R {
        note()
        return lock.withLock { body() }
    }
}
