import CofferNotify
import CofferPush
import Foundation
import Testing

/// Group commit on the event path (issue 27): events in flight together share one transaction, and every caller is
/// answered only after the transaction holding its pushes committed, or with its error.
@Suite struct GroupCommitTests {
    /// Counts the transactions and what each held; the first one waits until `lineUp` callers queue behind it.
    actor Recorder {
        var batches: [[String]] = []
        func record(_ messages: [PendingMessage]) -> Int {
            batches.append(messages.map(\.id))
            return batches.count
        }
    }

    static func message(_ session: String, _ index: Int) -> PendingMessage {
        PendingMessage(
            id: "m-\(index)",
            sessionID: session,
            body: Array(repeating: UInt8(index & 0xFF), count: 64),
            created: Date(),
            expires: Date().addingTimeInterval(3600)
        )
    }

    /// A harness with one session of Alice's; returns its id.
    static func session(_ harness: Harness) async throws -> String {
        try await Device().registerAlice(with: harness.service).session.id
    }

    /// Waits (up to 10 s) until `count` callers queue behind the commit under way.
    static func waitForQueue(_ commits: GroupCommit, _ count: Int) async throws {
        for _ in 0..<1000 where commits.waitingCount < count { try await Task.sleep(for: .milliseconds(10)) }
        try #require(commits.waitingCount == count)
    }

    @Test func eventsInFlightTogetherShareOneCommitAndAreStoredWhenAnswered() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        let sessionID = try await Self.session(harness)
        let storage = harness.storage
        let recorder = Recorder()
        let callers = 12
        let gate = AsyncStream<Void>.makeStream()
        let commits = GroupCommit { (messages: [PendingMessage]) async throws(NotifyError) in
            // The first transaction holds until the other callers wait behind it.
            if await recorder.record(messages) == 1 { for await _ in gate.stream { break } }
            try await storage.enqueue(messages)
        }
        let stored = try await withThrowingTaskGroup(of: Bool.self) { group in
            for index in 0..<callers {
                group.addTask {
                    try await commits.enqueue([Self.message(sessionID, index)])
                    // Answered: the push must already be in the database.
                    let pending = try await storage.pending(sessionID: sessionID, now: Date(), limit: 100)
                    return pending.contains { $0.id == "m-\(index)" }
                }
                if index == 0 { while await recorder.batches.isEmpty { try await Task.sleep(for: .milliseconds(5)) } }
            }
            try await Self.waitForQueue(commits, callers - 1)
            gate.continuation.yield()
            var results: [Bool] = []
            for try await result in group { results.append(result) }
            return results
        }
        #expect(stored == Array(repeating: true, count: callers))
        // One transaction for the first event, one for the eleven that arrived while it ran.
        let batches = await recorder.batches
        #expect(batches.count == 2)
        #expect(batches.map(\.count) == [1, callers - 1])
        #expect(try await storage.pendingCount(sessionID: sessionID, now: Date()) == callers)
    }

    @Test func aFailingCommitFailsEveryCallerOfItsBatchAndStoresNoneOfThem() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        let sessionID = try await Self.session(harness)
        let storage = harness.storage
        let recorder = Recorder()
        let gate = AsyncStream<Void>.makeStream()
        let commits = GroupCommit { (messages: [PendingMessage]) async throws(NotifyError) in
            if await recorder.record(messages) == 1 { for await _ in gate.stream { break } }
            try await storage.enqueue(messages)
        }
        let outcomes = try await withThrowingTaskGroup(of: (Int, NotifyError?).self) { group in
            for index in 0..<6 {
                // Caller 3's push names a session that does not exist: the database refuses the batch's transaction.
                let session = index == 3 ? "no-such-session" : sessionID
                group.addTask {
                    do throws(NotifyError) {
                        try await commits.enqueue([Self.message(session, index)])
                        return (index, nil)
                    } catch {
                        return (index, error)
                    }
                }
                if index == 0 { while await recorder.batches.isEmpty { try await Task.sleep(for: .milliseconds(5)) } }
            }
            try await Self.waitForQueue(commits, 5)
            gate.continuation.yield()
            var outcomes: [Int: NotifyError?] = [:]
            for try await (index, error) in group { outcomes[index] = error }
            return outcomes
        }
        #expect(await recorder.batches.map(\.count) == [1, 5])
        // The first event committed alone; every caller of the failed batch was told, not only its leader.
        #expect(outcomes[0] == .some(nil))
        for index in 1..<6 {
            guard case .some(.some(.storage)) = outcomes[index] else {
                Issue.record("caller \(index) was answered \(String(describing: outcomes[index]))")
                continue
            }
        }
        // None of the failed batch is stored, its good events included.
        let pending = try await storage.pending(sessionID: sessionID, now: Date(), limit: 100)
        #expect(pending.map(\.id) == ["m-0"])
        // The lead was handed back: a later event commits.
        try await commits.enqueue([Self.message(sessionID, 99)])
        #expect(try await storage.pendingCount(sessionID: sessionID, now: Date()) == 2)
    }

    @Test func aLeaderWhoseRequestIsCancelledStillCommitsItsBatchForEveryCaller() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        let sessionID = try await Self.session(harness)
        let storage = harness.storage
        let recorder = Recorder()
        let first = AsyncStream<Void>.makeStream()
        let second = AsyncStream<Void>.makeStream()
        let commits = GroupCommit { (messages: [PendingMessage]) async throws(NotifyError) in
            switch await recorder.record(messages) {
            case 1: for await _ in first.stream { break }
            case 2: for await _ in second.stream { break }
            default: break
            }
            try await storage.enqueue(messages)
        }
        func caller(_ index: Int) -> Task<NotifyError?, Never> {
            Task {
                do throws(NotifyError) {
                    try await commits.enqueue([Self.message(sessionID, index)])
                    return nil
                } catch {
                    return error
                }
            }
        }
        let zero = caller(0)
        while await recorder.batches.isEmpty { try await Task.sleep(for: .milliseconds(5)) }
        // Caller 1 queues first, so it leads the second transaction, which holds callers 1 to 5.
        let one = caller(1)
        try await Self.waitForQueue(commits, 1)
        let others = (2..<6).map(caller)
        try await Self.waitForQueue(commits, 5)
        first.continuation.yield()
        while await recorder.batches.count < 2 { try await Task.sleep(for: .milliseconds(5)) }
        // The leader's client hangs up while its transaction is under way: its request's task is cancelled.
        one.cancel()
        second.continuation.yield()
        #expect(await zero.value == nil)
        #expect(await one.value == nil)
        for task in others { #expect(await task.value == nil) }
        #expect(await recorder.batches.map(\.count) == [1, 5])
        #expect(try await storage.pendingCount(sessionID: sessionID, now: Date()) == 6)
    }

    @Test func concurrentEventsThroughTheServiceAreAllQueuedAndTheWriterSyncsEveryCommit() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        let sessionID = try await Self.session(harness)
        // An answered event survives a power cut: the WAL is synced at every commit (GRDB's pool default is NORMAL).
        #expect(try await harness.storage.syncsEveryCommit())
        let service = harness.service
        let queued = try await withThrowingTaskGroup(of: Int.self) { group in
            for uid in 1...40 {
                group.addTask {
                    try await service.handle(
                        DovecotEvent(
                            user: "alice",
                            folder: "INBOX",
                            uidValidity: 1,
                            uid: UInt32(uid),
                            from: nil,
                            subject: "event \(uid)"
                        )
                    )
                }
            }
            return try await group.reduce(0, +)
        }
        #expect(queued == 40)
        #expect(try await harness.storage.pendingCount(sessionID: sessionID, now: Date()) == 40)
        #expect(service.commits.waitingCount == 0)
    }
}
