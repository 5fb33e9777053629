import CofferCrypto
import CofferIMAP
import CofferKeymaker
import CofferMIME
import CofferSMTP
import CofferStore
import CofferSync
import CofferTesting
import CofferTransport
import Foundation
import Testing

@testable import CofferOutbox

/// The outbox's sender against real servers: Dovecot's submission service relaying through Postfix into the
/// recipient's mailbox, and Dovecot's IMAP for the Sent copy.
@Suite(.serialized) struct OutboxSenderTests {
    typealias Server = TestServers.SubmissionDovecot

    /// An unlocked store with alice's account on `server`: IMAP pinned to certificate A and the backup key, and
    /// submission on `security`'s port pinned to `submissionPins` (the same by default).
    struct World {
        let root = TemporaryDirectory(prefix: "coffer-outbox-test")
        let keymaker: Keymaker
        let store: MailStore
        let accountID: Int64

        init(
            _ server: Server,
            security: ServerEndpoint.Security = .implicitTLS,
            submissionPins: [String]? = nil
        )
            async throws
        {
            keymaker = try await Fixtures.unlockedKeymaker()
            store = try MailStore(folder: "\(root.path)/store", keys: keymaker)
            let pins = [try server.pin("a"), try server.pin("backup")]
            // A copy of the test CA that outlives the server (a test stops it to make it unreachable).
            let caFile = "\(root.path)/ca.pem"
            try FileManager.default.copyItem(atPath: "\(server.certs)/ca.pem", toPath: caFile)
            var account = ServerAccount(
                host: Server.name,
                port: server.imapsPort,
                username: Server.sender.user,
                password: Server.sender.password,
                pins: pins,
                caFile: caFile,
                connectAddress: "127.0.0.1"
            )
            account.submission = SubmissionServer(
                endpoint: ServerEndpoint(
                    host: Server.name,
                    port: security == .startTLS ? server.submissionPort : server.submissionsPort,
                    security: security,
                    pins: submissionPins ?? pins,
                    caFile: caFile,
                    connectAddress: "127.0.0.1"
                ),
                address: MailAddress(name: "Alice", address: Server.sender.address)
            )
            accountID = try await store.addServerAccount(account)
        }

        /// Queues a message from alice to bob; returns the item and the exact bytes queued.
        func enqueue(
            subject: String,
            attachment: [UInt8]? = nil,
            to recipient: String = Server.recipient.address
        ) async throws -> (OutboxItem, [UInt8]) {
            let message = OutgoingMessage(
                from: MailAddress(name: "Alice", address: Server.sender.address),
                to: [MailAddress(name: "Bob", address: recipient)],
                subject: subject,
                text: "Hello Bob,\n.\n.a line that starts with a dot\nAlice\n",
                attachments: attachment.map { [OutgoingAttachment(filename: "data.bin", bytes: $0)] } ?? []
            )
            let item = try await store.enqueue(message, accountID: accountID)
            let reader = try await store.openOutboxMessage(item.id)
            var bytes: [UInt8] = []
            while let chunk = try reader.nextChunk() { bytes += chunk }
            return (item, bytes)
        }
    }

    /// The messages of `user`'s folder `mailbox` over IMAP: exact bytes and flags.
    static func folder(
        _ server: Server,
        user: (String, String),
        mailbox: String
    ) async throws -> [(bytes: [UInt8], flags: [String])] {
        let client = try await IMAPClient.connect(
            IMAPConfiguration(
                tls: PinnedTLSConfiguration(
                    serverName: Server.name,
                    port: server.imapsPort,
                    connectAddress: "127.0.0.1",
                    trustRoots: .caBundle(path: "\(server.certs)/ca.pem"),
                    timeout: .seconds(60)
                )
            )
        )
        try await client.login(user: user.0, password: user.1)
        defer { Task { await client.logout() } }
        let selected = try await client.select(mailbox, readOnly: true)
        guard selected.exists > 0 else { return [] }
        return try await client.uidFetch("1:*").map { ($0.body ?? [], $0.flags) }
    }

    /// bob's INBOX, waiting for `count` messages (the relay delivers after the submission server has answered).
    static func recipientInbox(_ server: Server, count: Int, waiting: Duration = .seconds(30)) async throws -> [[UInt8]]
    {
        let deadline = ContinuousClock.now + waiting
        while true {
            let messages = try await folder(
                server,
                user: (Server.recipient.user, Server.recipient.password),
                mailbox: "INBOX"
            )
            if messages.count >= count || ContinuousClock.now > deadline { return messages.map(\.bytes) }
            try await Task.sleep(for: .milliseconds(200))
        }
    }

    static func endsWith(_ bytes: [UInt8], _ suffix: [UInt8]) -> Bool {
        bytes.count >= suffix.count && Array(bytes.suffix(suffix.count)) == suffix
    }

    @Test func queuedMessagesAreDeliveredAndTheirSentCopiesStoredOnTheServerAndHere() async throws {
        let server = try await Server.start(rejectSubject: "refuse-me")
        defer { server.stop() }
        let world = try await World(server)
        // Past the store's attachment-file threshold: the Sent copy keeps it in a sealed file of its own.
        let attachment = (0..<(1 << 20) + 100_000).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 7) }
        let (first, firstBytes) = try await world.enqueue(subject: "first, with an attachment", attachment: attachment)
        // Refused after its DATA, while its Sent copy was going up beside it: the copy is withdrawn on the server,
        // and the import's sealed file of its attachment is deleted (one .cfb file below, the first message's).
        let (refused, _) = try await world.enqueue(subject: "please refuse-me", attachment: attachment)
        let (second, secondBytes) = try await world.enqueue(subject: "second")

        // Suites share this process's two cooperative threads, and under CI's load a reply can come late (once, the
        // 1 MiB message's took past the 120 s idle limit): the limit is longer here, and a message that failed for now
        // is retried as the outbox retries it, by a drain after its backoff. Each retry is printed.
        let timeouts = SMTPTimeouts(idle: .seconds(600))
        var report = try await OutboxSender(store: world.store, timeouts: timeouts).drain(accountID: world.accountID)
        if report.retrying > 0 {
            print("OutboxSenderTests: \(report.retrying) message(s) failed for now; draining again after the backoff")
            let later = OutboxSender(store: world.store, timeouts: timeouts, now: { Date().addingTimeInterval(7200) })
            let again = try await later.drain(accountID: world.accountID)
            report.sent += again.sent
            report.retrying = again.retrying
            report.failed += again.failed
            report.sentCopies += again.sentCopies
            report.sentCopyFailure = report.sentCopyFailure ?? again.sentCopyFailure
        }
        #expect(report.sent == 2)
        #expect(report.retrying == 0)
        #expect(report.failed.map(\.id) == [refused.id])
        #expect(report.failed.first?.reason.contains("550") == true, "\(report.failed)")
        #expect(report.sentCopies == 2)
        #expect(report.sentCopyFailure == nil)

        // bob has both, byte for byte after the relay's trace headers, the dot-led lines intact.
        let inbox = try await Self.recipientInbox(server, count: 2)
        #expect(inbox.count == 2)
        #expect(inbox.contains { Self.endsWith($0, firstBytes) })
        #expect(inbox.contains { Self.endsWith($0, secondBytes) })
        let parsed = try MIMEParser.parse(try #require(inbox.first { Self.endsWith($0, firstBytes) }))
        #expect(parsed.attachments.first?.body == attachment)

        // alice's Sent folder (made, as the test server has none) holds the exact bytes, seen.
        let sent = try await Self.folder(server, user: (Server.sender.user, Server.sender.password), mailbox: "Sent")
        #expect(sent.count == 2 && Set(sent.map(\.bytes)) == [firstBytes, secondBytes])
        #expect(sent.allSatisfy { $0.flags.contains("\\Seen") })

        // The store has them under Sent at once; the outbox keeps only the refused one, failed with its reason.
        let local = try await world.store.list(label: "Sent")
        #expect(Set(local.map(\.subject)) == ["first, with an attachment", "second"])
        let outbox = try await world.store.outbox()
        #expect(outbox.map(\.id) == [refused.id])
        guard case .failed(let reason)? = outbox.first?.state else {
            Issue.record("the refused message is not failed: \(outbox)")
            return
        }
        #expect(reason?.contains("550") == true)
        #expect(![first.id, second.id].contains(outbox[0].id))

        // Nothing is due: a second drain sends nothing.
        let again = try await OutboxSender(store: world.store).drain(accountID: world.accountID)
        #expect(again.sent == 0 && again.failed.isEmpty)

        // The Sent copy's attachment reads back whole from its file; syncing the Sent folder finds both copies by
        // their exact bytes and stores no second one.
        let firstCopy = try #require(local.first { $0.subject == "first, with an attachment" })
        let stored = try await world.store.message(firstCopy.id).attachments
        #expect(stored.map(\.size) == [attachment.count])
        #expect(try await world.store.attachmentContent(stored[0].id).content == attachment)
        let files = try SecureFile.list("\(world.root.path)/store/\(MailStore.sealedFilesFolderName)")
        #expect(files.filter { $0.hasSuffix(".cfb") }.count == 1)
        let synced = try await Syncer(store: world.store).sync(accountID: world.accountID, folders: ["Sent"])
        #expect(synced.folders == 1)
        #expect(try await world.store.count() == 2)
        #expect(Set(try await world.store.list(label: "Sent").map(\.id)) == Set(local.map(\.id)))
    }

    @Test func aMessageRefusedBeforeItsDataStopsItsSentCopyGoingUp() async throws {
        let server = try await Server.start()
        defer { server.stop() }
        let world = try await World(server)
        // Postfix refuses a recipient it does not list at RCPT, long before the 16 MiB copy beside it could be up.
        let attachment = (0..<(16 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 7) }
        let (refused, bytes) = try await world.enqueue(
            subject: "to nobody",
            attachment: attachment,
            to: "nobody@\(Server.recipient.address.split(separator: "@")[1])"
        )
        let report = try await OutboxSender(store: world.store, timeouts: SMTPTimeouts(idle: .seconds(600)))
            .drain(accountID: world.accountID)
        #expect(report.failed.map(\.id) == [refused.id])
        #expect(report.failed.first?.reason.contains("550") == true, "\(report.failed)")
        let sent = try await Self.folder(server, user: (Server.sender.user, Server.sender.password), mailbox: "Sent")
        #expect(sent.isEmpty)
        // Dovecot logs what the connection read when the client went ("Disconnected: Connection closed (While
        // APPENDing: 1 msgs, 0 secs, 0/22958941 bytes) in=65637 …"): less than the message. (The code before this
        // test sent the whole literal and then withdrew it: in=22959042.)
        let log = try Self.dovecotLog(server)
        let line = try #require(
            log.split(separator: "\n").last { $0.contains("While APPENDing") },
            "Dovecot logged no APPEND cut short: \(log.split(separator: "\n").filter { $0.contains("imap(") }.suffix(4))"
        )
        let read = try #require(line.firstMatch(of: /\bin=(\d+)/).flatMap { Int($0.1) }, "\(line)")
        print("OutboxSenderTests: the refused message's connection read \(read) bytes of its \(bytes.count)")
        #expect(read < bytes.count, "the whole copy went up before it was withdrawn")
    }

    /// A message from alice to bob with `attachments`, as `send` takes it.
    static func message(subject: String, attachments: [OutgoingAttachment]) -> OutgoingMessage {
        OutgoingMessage(
            from: MailAddress(name: "Alice", address: Server.sender.address),
            to: [MailAddress(name: "Bob", address: Server.recipient.address)],
            subject: subject,
            text: "Hello Bob,\n.\n.a line that starts with a dot\nAlice\n",
            attachments: attachments
        )
    }

    /// The names of the store's sealed files.
    static func sealedFiles(_ world: World) throws -> [String] {
        try SecureFile.list("\(world.root.path)/store/\(MailStore.sealedFilesFolderName)")
    }

    @Test func aMessageSentAsItIsQueuedIsDeliveredOnceAsQueuedAndItsDraftGoesWithItsFiles() async throws {
        let server = try await Server.start()
        defer { server.stop() }
        let world = try await World(server)
        // A draft with a sealed attachment of 3 MiB: the copy streamed to the server reads it after the transaction
        // that queues the message has deleted the draft's row.
        let attachment = (0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 9) }
        let draft = try await world.store.saveDraft(DraftContent(subject: "streamed"))
        _ = try await world.store.addDraftAttachment(
            to: draft,
            OutgoingAttachment(filename: "a.bin", bytes: attachment)
        )
        let message = Self.message(
            subject: "streamed",
            attachments: try await world.store.outgoingAttachments(ofDraft: draft)
        )
        let filesBefore = try Self.sealedFiles(world)
        #expect(filesBefore.count == 1)

        let (item, report) = try await OutboxSender(store: world.store, timeouts: SMTPTimeouts(idle: .seconds(600)))
            .send(message, accountID: world.accountID, replacingDraft: draft)
        #expect(item.attempts == 1)
        #expect(report.sent == 1 && report.retrying == 0 && report.failed.isEmpty, "\(report)")
        #expect(report.sentCopies == 1 && report.sentCopyFailure == nil, "\(report)")

        // bob has it once; alice's Sent folder has the bytes that were queued, which end bob's copy.
        let sent = try await Self.folder(server, user: (Server.sender.user, Server.sender.password), mailbox: "Sent")
        #expect(sent.count == 1)
        let queued = try #require(sent.first?.bytes)
        let inbox = try await Self.recipientInbox(server, count: 1)
        #expect(inbox.count == 1)
        #expect(Self.endsWith(try #require(inbox.first), queued))
        #expect(try MIMEParser.parse(queued).attachments.first?.body == attachment)

        // The draft, its file and the outbox's file are gone; the Sent copy is stored, its attachment in a file.
        #expect(try await world.store.drafts().isEmpty)
        #expect(try await world.store.outbox().isEmpty)
        let filesAfter = try Self.sealedFiles(world)
        #expect(Set(filesAfter).isDisjoint(with: filesBefore), "\(filesBefore) \(filesAfter)")
        #expect(filesAfter.count == 1 && filesAfter.allSatisfy { $0.hasSuffix(".cfb") }, "\(filesAfter)")
        #expect(try await world.store.list(label: "Sent").map(\.subject) == ["streamed"])
    }

    @Test func aMessageThatCannotBeQueuedIsNeverDeliveredThoughItWasStreaming() async throws {
        let server = try await Server.start()
        defer { server.stop() }
        let world = try await World(server)
        // Queued from a draft that does not exist: the file is written, the transaction that would queue the message
        // fails, while the copy to the server has been streaming. Its final dot must never go.
        let attachment = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 9) }
        let message = Self.message(
            subject: "never queued",
            attachments: [OutgoingAttachment(filename: "a.bin", bytes: attachment)]
        )
        await #expect(throws: StoreError.draftNotFound(4242)) {
            _ = try await OutboxSender(store: world.store, timeouts: SMTPTimeouts(idle: .seconds(600)))
                .send(message, accountID: world.accountID, replacingDraft: 4242)
        }
        #expect(try await world.store.outbox().isEmpty)
        #expect(try Self.sealedFiles(world).isEmpty)
        // bob gets nothing, and the submission server saw the session (its log line is written when it ends, so it is
        // read after the wait).
        #expect(try await Self.recipientInbox(server, count: 1, waiting: .seconds(5)).isEmpty)
        let log = try Self.dovecotLog(server)
        #expect(log.contains("submission("), "the message never reached the submission server")
    }

    @Test func anAttachmentThatChangesWhileItIsSentIsSentLaterAsQueued() async throws {
        let server = try await Server.start()
        defer { server.stop() }
        let world = try await World(server)
        // Each opening of the attachment reads other bytes: the queued copy and the streamed one differ.
        let openings = Openings()
        let changing = OutgoingAttachment(filename: "changing.txt", contentType: "text/plain") {
            ByteChunkReader(Array("version \(openings.next())\n".utf8))
        }
        let message = Self.message(subject: "changed", attachments: [changing])
        let sender = OutboxSender(store: world.store, timeouts: SMTPTimeouts(idle: .seconds(600)))
        let (item, report) = try await sender.send(message, accountID: world.accountID)
        #expect(report.sent == 0 && report.retrying == 1, "\(report)")
        #expect(try await Self.recipientInbox(server, count: 1, waiting: .seconds(5)).isEmpty)
        let outbox = try await world.store.outbox()
        #expect(outbox.map(\.id) == [item.id])
        guard case .queued? = outbox.first?.state else {
            Issue.record("not queued again: \(outbox)")
            return
        }

        // After its backoff it goes from its file: bob gets the bytes that were queued, once.
        let queuedBytes = try await world.store.openOutboxMessage(item.id).readAll()
        let later = OutboxSender(store: world.store, now: { Date().addingTimeInterval(7200) })
        let again = try await later.drain(accountID: world.accountID)
        #expect(again.sent == 1 && again.sentCopies == 1, "\(again)")
        let inbox = try await Self.recipientInbox(server, count: 1)
        #expect(inbox.count == 1 && Self.endsWith(inbox[0], queuedBytes))
    }

    /// Counts the openings of an attachment.
    final class Openings: @unchecked Sendable {
        private let lock = NSLock()
        private var count = 0

        func next() -> Int {
            lock.withLock {
                count += 1
                return count
            }
        }
    }

    /// The submission server's Dovecot log.
    static func dovecotLog(_ server: Server) throws -> String {
        let found = FileManager.default.enumerator(atPath: server.dir)?.compactMap { $0 as? String }
            .first { $0.hasSuffix("dovecot.log") }
        let path = try #require(found, "no dovecot.log under \(server.dir)")
        return try String(contentsOfFile: "\(server.dir)/\(path)", encoding: .utf8)
    }

    @Test func aSubmissionCertificateThatIsNotPinnedFailsForGoodBeforeAuth() async throws {
        let server = try await Server.start()
        defer { server.stop() }
        // Pinned to two keys the server does not have.
        let world = try await World(
            server,
            submissionPins: [
                SPKIPin(subjectPublicKeyInfoDER: [1]).base64, SPKIPin(subjectPublicKeyInfoDER: [2]).base64,
            ]
        )
        let (item, _) = try await world.enqueue(subject: "never sent")
        let report = try await OutboxSender(store: world.store).drain(accountID: world.accountID)
        #expect(report.sent == 0)
        #expect(report.failed.map(\.id) == [item.id])
        #expect(report.failed.first?.reason.contains("pin") == true, "\(report.failed)")
        #expect(!server.log().contains("AUTH"), "the server saw an AUTH")
        #expect(try await Self.recipientInbox(server, count: 0).isEmpty)
        guard case .failed? = try await world.store.outbox().first?.state else {
            Issue.record("not failed")
            return
        }
    }

    @Test func anUnreachableServerQueuesTheMessageAgainWithBackoff() async throws {
        let server = try await Server.start()
        let world = try await World(server)
        server.stop()
        let (item, _) = try await world.enqueue(subject: "later")
        let start = Date()
        let report = try await OutboxSender(store: world.store).drain(accountID: world.accountID)
        #expect(report.sent == 0 && report.failed.isEmpty)
        #expect(report.retrying == 1)
        let queued = try #require(try await world.store.outbox().first { $0.id == item.id })
        #expect(queued.state == .queued)
        #expect(queued.attempts == 1)
        // The first retry is a minute later (OutboxBackoff), not now.
        #expect(queued.nextAttempt.timeIntervalSince(start) >= 55)

        // A message sent at once is queued all the same, and waits its backoff too.
        let (streamed, again) = try await OutboxSender(store: world.store)
            .send(Self.message(subject: "at once", attachments: []), accountID: world.accountID)
        #expect(again.sent == 0 && again.failed.isEmpty && again.retrying == 1, "\(again)")
        let waiting = try #require(try await world.store.outbox().first { $0.id == streamed.id })
        #expect(waiting.state == .queued && waiting.attempts == 1)
        #expect(waiting.nextAttempt.timeIntervalSince(start) >= 55)
    }

    /// The account locks while a large message is being sent: the send finishes (its file holds its own key), but
    /// the Sent copy going up beside it needs the store's key to be committed, so its APPEND is withdrawn and nothing
    /// of it is on the server or in the store while locked; the next drain after the unlock appends and stores it,
    /// once.
    @Test func aSendAcrossTheLockFinishesAndItsSentCopyWaitsForTheUnlock() async throws {
        let server = try await Server.start()
        defer { server.stop() }
        let world = try await World(server)
        let attachment = (0..<6_000_000).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 9) }
        _ = try await world.enqueue(subject: "sent across the lock", attachment: attachment)
        let sender = OutboxSender(store: world.store, timeouts: SMTPTimeouts(idle: .seconds(600)))
        async let drained = sender.drain(accountID: world.accountID)
        // Locked once the message is claimed (its file, the APPEND's and the import's keys are taken at once): the
        // 8 MB DATA takes far longer than the 100 ms waited here.
        while try await world.store.outboxCounts().sending == 0 { try await Task.sleep(for: .milliseconds(5)) }
        try await Task.sleep(for: .milliseconds(100))
        await world.keymaker.lock()
        let first = try await drained
        #expect(first.sent == 1, "\(first)")
        #expect(first.sentCopies == 0, "\(first)")
        #expect(first.sentCopyFailure != nil)
        // The drain made the Sent folder (the test server has none) when it opened its connections.
        let alice = (Server.sender.user, Server.sender.password)
        #expect(try await Self.folder(server, user: alice, mailbox: "Sent").isEmpty)
        #expect(try await world.store.outboxCounts().sent == 1)

        try await world.keymaker.unlock(.none)
        let second = try await sender.drain(accountID: world.accountID)
        #expect(second.sent == 0 && second.sentCopies == 1 && second.sentCopyFailure == nil, "\(second)")
        #expect(try await Self.folder(server, user: alice, mailbox: "Sent").count == 1)
        #expect(try await world.store.list(label: "Sent").count == 1)
        #expect(try await world.store.outbox().isEmpty)
        let inbox = try await Self.recipientInbox(server, count: 1)
        #expect(inbox.count == 1)
    }

    @Test func aLockedStoreSendsNothingAndSaysLocked() async throws {
        let server = try await Server.start()
        defer { server.stop() }
        let world = try await World(server)
        _ = try await world.enqueue(subject: "queued while unlocked")
        await world.keymaker.lock()
        await #expect(throws: StoreError.locked) {
            _ = try await OutboxSender(store: world.store).drain(accountID: world.accountID)
        }
    }
}
