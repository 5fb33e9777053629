import CofferCrypto
import CofferKeymaker
import CofferMIME
import CofferTesting
import Foundation
import Testing

@testable import CofferStore

#if canImport(Glibc)
import Glibc
#endif

/// What the parent tests hand their child processes.
enum OutboxChildEnvironment {
    static let role = "COFFER_OUTBOX_CHILD"
    static let key = "COFFER_OUTBOX_KEY"
    static let store = "COFFER_OUTBOX_STORE"
    static let ledger = "COFFER_OUTBOX_LEDGER"
    static let result = "COFFER_OUTBOX_RESULT"
    static let messages = 40
    static let round = "COFFER_OUTBOX_ROUND"

    static var role_: String? { ProcessInfo.processInfo.environment[role] }

    /// Runs this test binary again with only `suite`, with `environment` added; kills it with SIGKILL after
    /// `killAfter` milliseconds unless it ended first.
    static func run(
        suite: String,
        environment: [String: String],
        killAfter: Int?
    ) throws -> (status: Int32, killed: Bool) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        process.arguments = ["--testing-library", "swift-testing", "--filter", suite]
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        if let killAfter {
            usleep(useconds_t(killAfter * 1000))
            kill(process.processIdentifier, SIGKILL)
        }
        process.waitUntilExit()
        return (process.terminationStatus, process.terminationReason == .uncaughtSignal)
    }

    /// Appends a line to the ledger and flushes it to disk before returning.
    static func append(_ line: String, to path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw StoreError.io(operation: "open the ledger", errno: errno) }
        defer { close(fd) }
        var sink = FileDescriptorSink(fd: fd)
        try sink.write(Array((line + "\n").utf8))
        guard fsync(fd) == 0 else { throw StoreError.io(operation: "flush the ledger", errno: errno) }
    }

    static func ledger(_ path: String) -> [String] {
        guard let bytes = try? SecureFile.read(path) else { return [] }
        return String(decoding: bytes, as: UTF8.self).split(separator: "\n").map(String.init)
    }
}

/// The child side: runs only inside the processes the tests below start (and kill).
@Suite("Outbox child")
struct OutboxChild {
    /// Queues the messages of rounds 0 to `round` (40 each) that are neither queued nor delivered, then sends
    /// everything due: "delivery" is a
    /// line `D <n>` in the ledger, flushed before `markSent` (as a server's final reply comes before the commit).
    @Test(
        "queue and send for the parent",
        .enabled(if: OutboxChildEnvironment.role_ == "send", "runs only inside the child the outbox kill test starts")
    )
    func queueAndSend() async throws {
        let environment = ProcessInfo.processInfo.environment
        let key = try #require(environment[OutboxChildEnvironment.key].flatMap { [UInt8](hexString: $0) })
        let ledger = try #require(environment[OutboxChildEnvironment.ledger])
        let store = try MailStore(
            folder: try #require(environment[OutboxChildEnvironment.store]),
            keys: try await Fixtures.unlockedKeymaker(account: "outbox", mainKey: key)
        )
        // Items a killed run left sent: their "Sent copy" step.
        for item in try await store.outbox() where item.state == .sent { try await store.removeSent(item.id) }
        let delivered = Set(OutboxChildEnvironment.ledger(ledger).map { $0.dropFirst(2) }.map(String.init))
        let queued = Set(try await store.outbox().map(\.subject))
        let round = Int(environment[OutboxChildEnvironment.round] ?? "0") ?? 0
        for number in 0..<(OutboxChildEnvironment.messages * (round + 1)) {
            let subject = "message \(number)"
            if delivered.contains(subject) || queued.contains(subject) { continue }
            try await store.enqueue(outgoing(subject: subject, text: "body \(number)\n"), accountID: 1)
        }
        while let item = try await store.claimNextDue() {
            let bytes = try await store.openOutboxMessage(item.id).readAll()
            guard try MIMEParser.parse(bytes).subject == item.subject else {
                throw StoreError.corruptFile(table: "outbox", id: item.id)
            }
            try OutboxChildEnvironment.append("D \(item.subject)", to: ledger)
            try await store.markSent(item.id)
            try await store.removeSent(item.id)
        }
        try store.close()
    }

    /// Streams a 25 MB attachment into a draft, through the MIME writer into the outbox, and out again, and writes
    /// the peak resident set growth (KiB) to the result file.
    @Test(
        "stream 25 MB for the parent",
        .enabled(if: OutboxChildEnvironment.role_ == "memory", "runs only inside the child the memory test starts")
    )
    func streamLarge() async throws {
        let environment = ProcessInfo.processInfo.environment
        let root = try #require(environment[OutboxChildEnvironment.store])
        let result = try #require(environment[OutboxChildEnvironment.result])
        let store = try MailStore(folder: "\(root)/store", keys: try await Fixtures.unlockedKeymaker())
        let size = 25 << 20
        let source = "\(root)/large.bin"
        do {
            let fd = open(source, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            defer { close(fd) }
            var sink = FileDescriptorSink(fd: fd)
            for offset in stride(from: 0, to: size, by: 1 << 16) { try sink.write(LargePattern.chunk(at: offset)) }
        }
        let draft = try await store.saveDraft(sampleDraft())
        _ = try await store.draft(draft)

        // The peak resident set is measured from here on.
        let clear = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC)
        guard clear >= 0, write(clear, "5", 1) == 1 else {
            throw StoreError.io(operation: "reset the peak resident set (/proc/self/clear_refs)", errno: errno)
        }
        close(clear)
        let baseline = try MemoryStatus.kibibytes("VmRSS")

        let attachment = try await store.addDraftAttachment(to: draft, contentsOf: source, filename: "large.bin")
        // The attachment back, checked against the pattern chunk by chunk.
        let reader = try await store.draftAttachmentReader(attachment.id)
        var offset = 0
        while let chunk = try reader.nextChunk() {
            var expected: [UInt8] = []
            while expected.count < chunk.count { expected += LargePattern.chunk(at: offset + expected.count) }
            guard Array(expected.prefix(chunk.count)) == chunk else { throw StoreError.corruptFile(table: "x", id: 0) }
            offset += chunk.count
        }
        var message = outgoing()
        message.attachments = try await store.outgoingAttachments(ofDraft: draft)
        let item = try await store.enqueue(message, accountID: 1, replacingDraft: draft)
        let outbox = try await store.openOutboxMessage(item.id)
        var total = 0
        while let chunk = try outbox.nextChunk() { total += chunk.count }
        let peak = try MemoryStatus.kibibytes("VmHWM")
        let line = "growth=\(peak - baseline) attachment=\(offset) outbox=\(total) size=\(item.size)"
        try SecureFile.writeAtomically(Array(line.utf8), to: result)
    }
}

/// A deterministic byte pattern, made 64 KiB at a time (never whole in memory).
enum LargePattern {
    static func chunk(at offset: Int) -> [UInt8] {
        (0..<(1 << 16)).map { UInt8(truncatingIfNeeded: (offset + $0) &* 2_654_435_761 >> 7) }
    }
}

/// Reads this process's memory figures from /proc/self/status.
enum MemoryStatus {
    static func kibibytes(_ field: String) throws -> Int {
        // Not SecureFile.read: a /proc file reports a size of 0.
        let text = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
        for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
            let digits = line.dropFirst(field.count + 1).filter(\.isNumber)
            return try #require(Int(digits))
        }
        throw StoreError.invalidArgument("no \(field) in /proc/self/status")
    }
}

@Suite("Outbox crash safety and memory")
struct OutboxCrashTests {
    @Test("queue-and-send runs killed with SIGKILL at random points lose no message; duplicates only from the window")
    func killedSends() async throws {
        let root = TemporaryDirectory(prefix: "coffer-outbox-crash")
        let key = (0..<32).map { _ in UInt8.random(in: 0...255) }
        let folder = "\(root.path)/store"
        let ledger = "\(root.path)/ledger"
        let environment = [
            OutboxChildEnvironment.role: "send",
            OutboxChildEnvironment.key: key.hexString,
            OutboxChildEnvironment.store: folder,
            OutboxChildEnvironment.ledger: ledger,
        ]
        let keymaker = try await Fixtures.unlockedKeymaker(account: "outbox", mainKey: key)
        var killed = 0
        // Runs until 8 of them were killed mid-way (at most 30): how long a run takes depends on the machine.
        var rounds = 0
        while killed < 8 && rounds < 30 {
            let round = rounds
            rounds += 1
            var environment = environment
            environment[OutboxChildEnvironment.round] = String(round)
            if try OutboxChildEnvironment.run(
                suite: "OutboxChild",
                environment: environment,
                killAfter: Int.random(in: 30...700)
            ).killed {
                killed += 1
            }
            // After every kill: each row's file is there and opens, and nothing is left sending.
            let store = try MailStore(folder: folder, keys: keymaker)
            for item in try await store.outbox() {
                #expect(item.state != .sending, "recovered at open")
                let bytes = try await store.openOutboxMessage(item.id).readAll()
                #expect(try MIMEParser.parse(bytes).subject == item.subject)
            }
            let integrity = try await store.database.read { db in
                try String.fetchOne(db, sql: "PRAGMA integrity_check")
            }
            #expect(integrity == "ok")
            try store.close()
        }
        var last = environment
        last[OutboxChildEnvironment.round] = String(rounds - 1)
        #expect(try OutboxChildEnvironment.run(suite: "OutboxChild", environment: last, killAfter: nil).status == 0)
        #expect(killed > 0, "the child must have been killed mid-run at least once")
        let delivered = OutboxChildEnvironment.ledger(ledger)
        let distinct = Set(delivered)
        let expected = Set((0..<(OutboxChildEnvironment.messages * rounds)).map { "D message \($0)" })
        #expect(distinct == expected, "none lost")
        let duplicates = delivered.count - distinct.count
        #expect(duplicates <= killed, "at most one duplicate per kill (a kill between delivery and its commit)")
        let store = try MailStore(folder: folder, keys: keymaker)
        #expect(try await store.outbox().isEmpty)
        print("outbox kill test: \(killed) of \(rounds) runs killed, \(duplicates) duplicate deliveries")
        try store.close()
    }

    @Test("a 25 MB attachment goes into a draft, through the MIME writer into the outbox and out with flat memory")
    func largeMessageStreams() async throws {
        let root = TemporaryDirectory(prefix: "coffer-outbox-memory")
        let result = "\(root.path)/result"
        let run = try OutboxChildEnvironment.run(
            suite: "OutboxChild",
            environment: [
                OutboxChildEnvironment.role: "memory",
                OutboxChildEnvironment.store: root.path,
                OutboxChildEnvironment.result: result,
            ],
            killAfter: nil
        )
        #expect(run.status == 0)
        let line = String(decoding: try #require(try SecureFile.read(result)), as: UTF8.self)
        var values: [String: Int] = [:]
        for field in line.split(separator: " ") {
            let parts = field.split(separator: "=")
            values[String(parts[0])] = Int(parts[1])
        }
        let growth = try #require(values["growth"])
        #expect(values["attachment"] == 25 << 20)
        let outbox = try #require(values["outbox"])
        #expect(outbox > (25 << 20) * 4 / 3, "base64 of 25 MiB is in the outbox message")
        #expect(values["size"] == outbox)
        // Holding the attachment or the message in memory would add at least 25 MiB.
        #expect(growth < 16 * 1024, "peak resident set grew by \(growth) KiB")
        print("25 MiB through draft and outbox: peak resident set +\(growth) KiB")
    }
}
