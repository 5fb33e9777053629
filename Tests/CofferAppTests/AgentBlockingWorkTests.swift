import CofferAgent
import CofferAgentProtocol
import CofferBlocking
import CofferCrypto
import CofferKeychain
import CofferKeymaker
import CofferTesting
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOPosix
import ServiceLifecycle
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The agent reaches the keychain (whose `flock` and `fsync` block) only from ``BlockingPool``'s threads, never from
/// a connection's event loop or the cooperative pool (docs/ARCHITECTURE.md, "Concurrency").
@Suite struct AgentBlockingWorkTests {
    @Test func statusAccountAutolockAndLockReachTheKeychainOnlyFromThePool() async throws {
        let agent = try await RunningAgent()
        let keychain = PlaceRecordingKeychain(agent.app.keychain)
        agent.app.global.keychainFactory.register { keychain }
        let user = try await agent.app.account("alice")
        try await user.keymaker.unlock(.none)
        keychain.clear()

        let requests: [AgentRequest] = [
            .status(account: nil), .status(account: "alice"), .account(nil),
            .autolock(account: "alice", policy: "10m"), .lock(account: "alice"),
        ]
        for request in requests {
            let client = try await RawAgentClient.connect(agent.socket)
            let reply = try await client.exchange(try requestFrame(request)) { received, _, _ in received.replies.first
            }
            #expect(reply != nil && reply?.failure == nil, "\(request): \(String(describing: reply))")
        }
        try await agent.stop()

        let places = keychain.places
        // Each of these requests reads the keychain (the account list, the protection record, the autolock item).
        #expect(places.count >= requests.count)
        #expect(places.allSatisfy { !$0.onEventLoop && $0.inPool }, "\(places)")
    }

    /// `attachments` and `server-show` check that their account exists, which reads the keychain: they leave the
    /// event loop. `hello`, `background` and `preview-end` stay on the loop and reach no keychain at all. `list` and
    /// `search` are served on the loop (their mail text must not stay on a parked pool thread's stack after a lock:
    /// AgentMemoryTests), all but their account check, which reads the keychain on the pool (docs/ARCHITECTURE.md,
    /// "Concurrency"). On the code that checked the account on the loop, this test failed.
    @Test func mailReadsAndTheRequestsLeftOnTheLoopNeverTakeTheKeychainOnTheLoop() async throws {
        let agent = try await RunningAgent()
        let keychain = PlaceRecordingKeychain(agent.app.keychain)
        agent.app.global.keychainFactory.register { keychain }
        let user = try await agent.app.account("alice")
        try await user.keymaker.unlock(.none)
        keychain.clear()

        let requests: [AgentRequest] = [
            .attachments(account: "alice", message: 1), .serverShow(account: "alice"),
            .list(account: "alice", label: nil, limit: 10, offset: 0),
            .search(account: "alice", words: "canary", limit: 10, offset: 0),
            .hello(version: Int(AgentFrame.version)), .background, .previewEnd,
        ]
        for request in requests {
            let client = try await RawAgentClient.connect(agent.socket)
            // A page of summaries comes in its own frame kind; every other answer is a reply.
            let answer = try await client.exchange(try requestFrame(request)) { received, _, _ in received.frames.last }
            #expect(answer?.kind == .summaries || answer?.kind == .reply, "\(request): no answer")
            if case .attachments = request { continue }  // message 1 does not exist: a failure reply is the answer
            let failure = answer.flatMap { $0.kind == .reply ? decodeReply($0.payload)?.failure : nil }
            #expect(failure == nil, "\(request): \(String(describing: failure))")
        }
        try await agent.stop()

        let places = keychain.places
        // attachments, server-show, list and search each read the keychain at least once (the account's item).
        #expect(places.count >= 4)
        #expect(places.allSatisfy { !$0.onEventLoop && $0.inPool }, "\(places)")
    }
}

/// The agent's services run on the pool: the push stream reads the keychain for each push and the outbox opens
/// stores, so ``AgentServices/run(_:gracefulShutdownSignals:logger:)`` gives them ``BlockingPool``'s task executor.
/// On the composition that ran the `ServiceGroup` as it came (the cooperative pool), this failed.
@Suite struct AgentServicesPlacementTests {
    /// Records where its `run()` and a child task of it ran, then ends.
    struct Probe: Service {
        let places = NIOLockedValueBox<[ThreadPlace]>([])

        func run() async throws {
            places.withLockedValue { $0.append(.here) }
            await withTaskGroup(of: ThreadPlace.self) { group in
                group.addTask { .here }
                for await place in group { places.withLockedValue { $0.append(place) } }
            }
        }
    }

    @Test func theServicesRunOnTheBlockingPoolNotTheCooperativePool() async throws {
        let probe = Probe()
        // The probe ends at once, which the group reports as a service that finished unexpectedly: not the question.
        try? await AgentServices.run([probe], logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
        let places = probe.places.withLockedValue { $0 }
        #expect(places.count == 2)
        #expect(places.allSatisfy { !$0.onEventLoop && $0.inPool }, "\(places)")
    }
}

/// A reply frame's payload, decoded.
private func decodeReply(_ payload: [UInt8]) -> AgentReply? {
    try? JSONDecoder().decode(AgentReply.self, from: Data(payload))
}

/// Where a keychain call ran.
struct ThreadPlace: Sendable, Equatable, CustomStringConvertible {
    var onEventLoop: Bool
    var inPool: Bool

    static var here: ThreadPlace {
        ThreadPlace(
            onEventLoop: MultiThreadedEventLoopGroup.currentEventLoop != nil,
            inPool: BlockingPool.isCurrentThreadInPool
        )
    }

    var description: String { onEventLoop ? "event loop" : inPool ? "blocking pool" : "another thread" }
}

/// A keychain that serves from `inner` and records where each call ran.
final class PlaceRecordingKeychain: Keychain {
    private let inner: any Keychain
    private let recorded = NIOLockedValueBox<[ThreadPlace]>([])

    init(_ inner: any Keychain) { self.inner = inner }

    var places: [ThreadPlace] { recorded.withLockedValue { $0 } }
    func clear() { recorded.withLockedValue { $0 = [] } }
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
        try inner.delete(address)
    }

    func addresses(accessGroup: String, service: String) throws(KeychainError) -> [KeychainAddress] {
        note()
        return try inner.addresses(accessGroup: accessGroup, service: service)
    }

    func passcodeRemoved() throws(KeychainError) {
        note()
        try inner.passcodeRemoved()
    }
}
