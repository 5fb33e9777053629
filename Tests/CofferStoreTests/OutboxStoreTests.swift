import CofferCrypto
import CofferMIME
import CofferTesting
import Foundation
import GRDB
import Testing

@testable import CofferStore

#if canImport(Glibc)
import Glibc
#endif

/// A message to queue.
func outgoing(
    subject: String = "Status report",
    text: String = "All good.\n",
    to: String = "bob@example.org",
    bcc: String? = "hidden@example.org",
    attachment: [UInt8]? = nil
) -> OutgoingMessage {
    var message = OutgoingMessage(
        from: MailAddress(name: "Alice", address: "alice@example.org"),
        to: [MailAddress(name: "Bob", address: to)],
        bcc: bcc.map { [MailAddress(name: nil, address: $0)] } ?? [],
        subject: subject,
        text: text,
        date: Date(timeIntervalSince1970: 1_750_000_000)
    )
    if let attachment {
        message.attachments = [OutgoingAttachment(filename: "data.bin", bytes: attachment)]
    }
    return message
}

/// The process id of a process that has exited.
func deadProcessID() throws -> Int64 {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/true")
    try process.run()
    process.waitUntilExit()
    return Int64(process.processIdentifier)
}

@Suite("Outbox")
struct OutboxStoreTests {
    @Test("a queued message is written once: claimed, read back twice with the same bytes, sent, then removed")
    func lifecycle() async throws {
        let world = try await StoreWorld()
        let store = world.store
        let payload = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let queued = try await store.enqueue(outgoing(attachment: payload), accountID: 1)
        #expect(queued.state == .queued && queued.attempts == 0)
        #expect(queued.envelope.sender == "alice@example.org")
        #expect(queued.envelope.recipients == ["bob@example.org", "hidden@example.org"])
        #expect(queued.subject == "Status report")
        let claimed = try #require(try await store.claimNextDue())
        #expect(claimed.id == queued.id && claimed.state == .sending && claimed.attempts == 1)
        #expect(try await store.claimNextDue() == nil, "one item, claimed once")

        let first = try await store.openOutboxMessage(claimed.id).readAll()
        let second = try await store.openOutboxMessage(claimed.id).readAll()
        #expect(first == second, "every attempt sends the same bytes")
        #expect(Int64(first.count) == queued.size)
        let parsed = try MIMEParser.parse(first)
        #expect(parsed.messageID == queued.messageID)
        #expect(parsed.subject == "Status report")
        #expect(parsed.attachments.first?.body == payload)
        #expect(!String(decoding: first, as: UTF8.self).contains("hidden@example.org"), "Bcc is envelope only")

        await #expect(throws: StoreError.outboxItemBusy(claimed.id)) { try await store.cancel(claimed.id) }
        try await store.markSent(claimed.id)
        #expect(try await store.outbox().map(\.state) == [.sent])
        #expect(try await store.openOutboxMessage(claimed.id).readAll() == first, "kept for the Sent copy")
        await #expect(throws: StoreError.outboxItemBusy(claimed.id)) { try await store.retry(claimed.id) }
        try await store.removeSent(claimed.id)
        #expect(try await store.outbox().isEmpty)
        let folder = "\(world.root.path)/store/\(MailStore.sealedFilesFolderName)"
        #expect(try SecureFile.list(folder).isEmpty)
        await #expect(throws: StoreError.outboxItemNotFound(claimed.id)) { try await store.markSent(claimed.id) }
    }

    @Test("the undo window and the backoff hold an item until its time; claims can be per account")
    func dueTimes() async throws {
        let world = try await StoreWorld()
        let store = world.store
        let now = Date()
        let held = try await store.enqueue(outgoing(subject: "held"), accountID: 1, sendAfter: now + 30)
        let other = try await store.enqueue(outgoing(subject: "other"), accountID: 2, sendAfter: now)
        #expect(try await store.claimNextDue(accountID: 1, now: now) == nil)
        #expect(
            try await store.nextOutboxAttempt(accountID: 1)
                == Date(timeIntervalSince1970: (now + 30).timeIntervalSince1970.rounded(.down))
        )
        #expect(try await store.claimNextDue(accountID: 2, now: now)?.id == other.id)
        #expect(try await store.claimNextDue(now: now + 31)?.id == held.id)
        try await store.markFailed(held.id, reason: "451 4.3.0 try later", permanent: false, retryAt: now + 120)
        let retried = try #require(try await store.outbox().first { $0.id == held.id })
        #expect(retried.state == .queued && retried.attempts == 1)
        #expect(try await store.claimNextDue(now: now + 60) == nil)
        #expect(try await store.claimNextDue(now: now + 121)?.attempts == 2)
    }

    @Test("a permanent failure keeps the item as failed with its sanitized reason until retry or cancel")
    func failures() async throws {
        let world = try await StoreWorld()
        let store = world.store
        let item = try await store.enqueue(outgoing(), accountID: 1)
        _ = try await store.claimNextDue()
        try await store.markFailed(
            item.id,
            reason: "550 5.1.1 <bob@example.org>: no such user\r\nX-Injected: yes",
            permanent: true,
            retryAt: nil
        )
        let failed = try #require(try await store.outbox().first)
        guard case .failed(let reason) = failed.state else {
            Issue.record("expected failed, got \(failed.state)")
            return
        }
        #expect(reason == "550 5.1.1 <bob@example.org>: no such user  X-Injected: yes")
        #expect(try await store.claimNextDue(now: Date() + 86_400) == nil, "a failed item is not retried by itself")
        await #expect(throws: StoreError.self) { try await store.markSent(item.id) }
        try await store.retry(item.id)
        let again = try #require(try await store.outbox().first)
        #expect(again.state == .queued && again.attempts == 0)
        _ = try await store.claimNextDue()
        try await store.markFailed(item.id, reason: String(repeating: "x", count: 5000), permanent: true, retryAt: nil)
        if case .failed(let long) = try await store.outbox().first?.state {
            #expect(long?.count == MailStore.maximumOutboxReasonLength)
        }
        try await store.cancel(item.id)
        #expect(try await store.outbox().isEmpty)
        #expect(try SecureFile.list("\(world.root.path)/store/\(MailStore.sealedFilesFolderName)").isEmpty)
    }

    @Test("a message that cannot be written is refused before anything is queued")
    func composeErrors() async throws {
        let world = try await StoreWorld()
        let store = world.store
        await #expect(throws: StoreError.self) {
            try await store.enqueue(outgoing(subject: "hi\r\nBcc: attacker@evil.example"), accountID: 1)
        }
        await #expect(throws: StoreError.self) {
            var message = outgoing()
            message.to = []
            message.bcc = []
            try await store.enqueue(message, accountID: 1)
        }
        await #expect(throws: StoreError.self) {
            var message = outgoing()
            message.attachments = [
                OutgoingAttachment(filename: "gone") { throw StoreError.io(operation: "read", errno: EIO) }
            ]
            try await store.enqueue(message, accountID: 1)
        }
        #expect(try await store.outbox().isEmpty)
        #expect(try SecureFile.list("\(world.root.path)/store/\(MailStore.sealedFilesFolderName)").isEmpty)
    }

    @Test("queueing a draft's message deletes the draft in the same transaction; a missing draft queues nothing")
    func fromDraft() async throws {
        let world = try await StoreWorld()
        let store = world.store
        let draft = try await store.saveDraft(sampleDraft())
        try await store.addDraftAttachment(to: draft, OutgoingAttachment(filename: "a.txt", bytes: Array("abc".utf8)))
        var message = outgoing()
        message.attachments = try await store.outgoingAttachments(ofDraft: draft)
        let item = try await store.enqueue(message, accountID: 1, replacingDraft: draft)
        #expect(try await store.drafts().isEmpty)
        let folder = "\(world.root.path)/store/\(MailStore.sealedFilesFolderName)"
        #expect(try SecureFile.list(folder).count == 1, "only the outbox file is left")
        let bytes = try await store.openOutboxMessage(item.id).readAll()
        #expect(try MIMEParser.parse(bytes).attachments.first?.body == Array("abc".utf8))
        await #expect(throws: StoreError.draftNotFound(draft)) {
            try await store.enqueue(outgoing(), accountID: 1, replacingDraft: draft)
        }
        #expect(try await store.outbox().count == 1)
        #expect(try SecureFile.list(folder).count == 1)
    }

    @Test("an item left sending by a dead process is queued again at open; a live claimant's is left alone")
    func recovery() async throws {
        let world = try await StoreWorld()
        let store = world.store
        let mine = try await store.enqueue(outgoing(subject: "mine"), accountID: 1)
        let dead = try await store.enqueue(outgoing(subject: "dead"), accountID: 1)
        _ = try await store.claimNextDue()
        _ = try await store.claimNextDue()
        let gone = try deadProcessID()
        try await world.rawQueue().write { db in
            try db.execute(sql: "UPDATE outbox SET claimant = ? WHERE id = ?", arguments: [gone, dead.id])
        }
        let reopened = try MailStore(folder: "\(world.root.path)/store", keys: world.keymaker)
        let states = Dictionary(uniqueKeysWithValues: try await reopened.outbox().map { ($0.id, $0.state) })
        #expect(states[dead.id] == .queued)
        #expect(states[mine.id] == .sending, "this process still runs: its send may be in progress")
        #expect(try await reopened.claimNextDue()?.id == dead.id)
        try await world.rawQueue().write { db in
            try db.execute(sql: "UPDATE outbox SET claimant = ? WHERE state = 1", arguments: [gone])
        }
        #expect(try await reopened.recoverInterrupted() == 2)
        #expect(try await reopened.outboxCounts().queued == 2)
    }

    /// A claim names the process by id and start time: a live process that got a dead claimant's id (here this
    /// process, with another start time) is not taken for it. On the code that kept the id alone, the item stayed
    /// `sending` for as long as that process ran.
    @Test(
        "a claim whose process id now belongs to another process is recovered; a claim of an id alone is checked by id"
    )
    func reusedProcessID() async throws {
        let world = try await StoreWorld()
        let store = world.store
        let reused = try await store.enqueue(outgoing(subject: "reused"), accountID: 1)
        let legacy = try await store.enqueue(outgoing(subject: "legacy"), accountID: 1)
        _ = try await store.claimNextDue()
        _ = try await store.claimNextDue()
        let claim = SecureFile.processClaim()
        let limit: Int64 = 1 << 22
        #expect(claim % limit == Int64(getpid()) && claim / limit > 0, "this process's claim has its start time")
        // The store wrote that claim, not the id alone (on the old code: the id alone).
        let stored = try await world.rawQueue().read { db in
            try Int64.fetchAll(db, sql: "SELECT claimant FROM outbox ORDER BY id")
        }
        #expect(stored == [claim, claim])
        #expect(SecureFile.isAlive(claim: claim))
        // This process's id with a start time one tick earlier: the claimant that had this id is gone.
        let earlier = claim - limit
        #expect(!SecureFile.isAlive(claim: earlier))
        try await world.rawQueue().write { db in
            try db.execute(sql: "UPDATE outbox SET claimant = ? WHERE id = ?", arguments: [earlier, reused.id])
            // A record written before claims had a start time: this process's id alone, which still runs.
            try db.execute(sql: "UPDATE outbox SET claimant = ? WHERE id = ?", arguments: [Int64(getpid()), legacy.id])
        }
        #expect(try await store.recoverInterrupted() == 1)
        let states = Dictionary(uniqueKeysWithValues: try await store.outbox().map { ($0.id, $0.state) })
        #expect(states[reused.id] == .queued)
        #expect(states[legacy.id] == .sending)
    }

    @Test("a sealed file no row names is deleted at open once a minute old; a younger one may be about to commit")
    func orphans() async throws {
        let world = try await StoreWorld()
        let folder = "\(world.root.path)/store/\(MailStore.sealedFilesFolderName)"
        let kept = try await world.store.enqueue(outgoing(), accountID: 1)
        let old = "\(folder)/\(String(repeating: "a", count: 32)).cfo"
        let young = "\(folder)/\(String(repeating: "b", count: 32)).cfd"
        let temporary = "\(folder)/.\(String(repeating: "c", count: 32)).cfo.tmp-\(try deadProcessID())-1f"
        let unrelated = "\(folder)/notes.txt"
        for path in [old, young, temporary, unrelated] { try SecureFile.writeAtomically([1, 2, 3], to: path) }
        var times = [timespec(tv_sec: 1_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, old, &times, 0) == 0)
        #expect(utimensat(AT_FDCWD, temporary, &times, 0) == 0)
        _ = try MailStore(folder: "\(world.root.path)/store", keys: world.keymaker)
        #expect(!SecureFile.exists(old) && !SecureFile.exists(temporary))
        #expect(SecureFile.exists(young) && SecureFile.exists(unrelated))
        #expect(try await world.store.openOutboxMessage(kept.id).readAll().isEmpty == false)
    }

    @Test("swapped file names, a damaged file and a moved record are refused with typed errors")
    func tampering() async throws {
        let world = try await StoreWorld()
        let store = world.store
        let one = try await store.enqueue(outgoing(subject: "one"), accountID: 1)
        let two = try await store.enqueue(outgoing(subject: "two"), accountID: 1)
        let folder = "\(world.root.path)/store/\(MailStore.sealedFilesFolderName)"
        let files = try await world.rawQueue().read { db in
            try String.fetchAll(db, sql: "SELECT file FROM outbox ORDER BY id")
        }
        // The other message's sealed bytes under this one's name: the stream's context names its file.
        let original = try #require(try SecureFile.read("\(folder)/\(files[0])"))
        try SecureFile.writeAtomically(
            try #require(try SecureFile.read("\(folder)/\(files[1])")),
            to: "\(folder)/\(files[0])"
        )
        await #expect(throws: StoreError.corruptFile(table: "outbox", id: one.id)) {
            _ = try await store.openOutboxMessage(one.id).readAll()
        }
        try SecureFile.writeAtomically(Array(original.dropLast(1)), to: "\(folder)/\(files[0])")
        await #expect(throws: StoreError.corruptFile(table: "outbox", id: one.id)) {
            _ = try await store.openOutboxMessage(one.id).readAll()
        }
        try SecureFile.writeAtomically(original, to: "\(folder)/\(files[0])")
        #expect(try await store.openOutboxMessage(one.id).readAll().count == Int(one.size))
        // Swapped clear file names: the sealed record names its own file.
        try await world.rawQueue().write { db in
            try db.execute(sql: "UPDATE outbox SET file = 'x' || file")
            try db.execute(sql: "UPDATE outbox SET file = ? WHERE id = ?", arguments: [files[1], one.id])
            try db.execute(sql: "UPDATE outbox SET file = ? WHERE id = ?", arguments: [files[0], two.id])
        }
        await #expect(throws: StoreError.corruptRecord(table: "outbox", id: one.id)) {
            try await store.openOutboxMessage(one.id)
        }
        await #expect(throws: StoreError.corruptRecord(table: "outbox", id: one.id)) { try await store.outbox() }
        // A claim skips an item whose record does not open, and marks it failed.
        #expect(try await store.claimNextDue() == nil)
        #expect(try await store.outboxCounts().failed == 2)
        try await store.cancel(one.id)
        try await store.cancel(two.id)
        #expect(try await store.outbox().isEmpty)
    }

    @Test("the outbox needs the key, except the transitions a send that outlived the unlock must still record")
    func locked() async throws {
        let world = try await StoreWorld()
        let store = world.store
        let item = try await store.enqueue(outgoing(), accountID: 1)
        let other = try await store.enqueue(outgoing(subject: "other"), accountID: 1)
        _ = try await store.claimNextDue()
        _ = try await store.claimNextDue()
        await world.keymaker.lock()
        await #expect(throws: StoreError.locked) { try await store.enqueue(outgoing(), accountID: 1) }
        await #expect(throws: StoreError.locked) { try await store.claimNextDue() }
        await #expect(throws: StoreError.locked) { try await store.outbox() }
        await #expect(throws: StoreError.locked) { try await store.openOutboxMessage(item.id) }
        await #expect(throws: StoreError.locked) { try await store.cancel(item.id) }
        await #expect(throws: StoreError.locked) { try await store.retry(item.id) }
        // Without the key: counts for `coffer status`, and the end of a send.
        #expect(try await store.outboxCounts().sending == 2)
        try await store.markSent(item.id)
        try await store.markFailed(other.id, reason: "421 closing", permanent: true, retryAt: nil)
        try await store.removeSent(item.id)
        try await world.keymaker.unlock(.none)
        #expect(try await store.outbox().map(\.state) == [.failed(reason: nil)])
    }
}

@Suite("Outbox backoff")
struct OutboxBackoffTests {
    @Test(
        "the wait doubles from one minute to an hour",
        arguments: [(1, 60), (2, 120), (3, 240), (4, 480), (5, 960), (6, 1920), (7, 3600), (8, 3600), (60, 3600)]
    )
    func delays(attempts: Int, seconds: Int64) {
        #expect(OutboxBackoff().delay(afterAttempts: attempts) == seconds)
    }

    @Test("after the last attempt it gives up; before, it names the instant")
    func decisions() {
        let policy = OutboxBackoff()
        let now = Date(timeIntervalSince1970: 1_000_000)
        #expect(policy.decision(afterAttempts: 1, now: now) == .retry(at: now + 60))
        #expect(policy.decision(afterAttempts: 9, now: now) == .retry(at: now + 3600))
        #expect(policy.decision(afterAttempts: 10, now: now) == .giveUp)
        #expect(policy.decision(afterAttempts: Int.max, now: now) == .giveUp)
        let odd = OutboxBackoff(firstDelay: 0, maximumDelay: Int64.max, maximumAttempts: 200)
        #expect(odd.delay(afterAttempts: 0) == 1)
        #expect(odd.delay(afterAttempts: 100) == Int64.max, "no overflow")
    }
}
