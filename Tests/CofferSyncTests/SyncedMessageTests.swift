import CofferIMAP
import CofferStore
import CofferTesting
import Foundation
import Testing

@testable import CofferSync

/// What a synced message is: its flags, its identity, and what happens to one Coffer cannot parse (issue 25).
@Suite(.serialized) struct SyncedMessageTests {
    func world(_ server: SyncDovecot, batch: Int = 10) async throws -> (SyncWorld, Syncer, Int64) {
        let world = try await SyncWorld()
        let syncer = Syncer(store: world.store, batchSize: batch, timeout: .seconds(60))
        let account = try await world.store.addServerAccount(try server.account())
        return (world, syncer, account)
    }

    func locations(_ world: SyncWorld, _ account: Int64, _ folder: String = "INBOX") async throws -> [SyncLocation] {
        let state = try #require(try await world.store.syncFolder(accountID: account, name: folder))
        return try await world.store.syncLocations(folderID: state.id)
    }

    /// A sender writes `Status: RO` and `X-Status: AFT` into an unread message: its flags here stay the server's
    /// (none), and the next sync pushes nothing, so the message stays unread on the server for every client.
    @Test func statusHeadersInAMessageNeverSetFlagsOfSyncedMail() async throws {
        let server = try await SyncDovecot.start()
        defer { server.stop() }
        let forged = Array(
            ("From: Mallory <m@coffer.test>\r\nTo: alice@coffer.test\r\nSubject: already read statusforged\r\n"
                + "Message-ID: <forged@coffer.test>\r\nStatus: RO\r\nX-Status: AFT\r\n\r\nLooks read.\r\n").utf8
        )
        try await server.deliver(forged)
        let (world, syncer, account) = try await world(server)

        #expect(try await syncer.sync(accountID: account).fetched == 1)
        let location = try #require(try await locations(world, account).first)
        #expect(location.localFlags == [])
        let summary = try #require(try await world.store.search("statusforged").first)
        #expect(!summary.flags.contains(.seen) && !summary.flags.contains(.flagged))

        let again = try await syncer.sync(accountID: account)
        #expect(again.flagsPushed == 0)
        await #expect(try server.messages().first?.flags == [])
    }

    /// A message is its server location and its bytes, never its Message-ID alone: a second, different message that
    /// carries the first one's Message-ID is stored and listed too (before, it was taken for the first and never
    /// stored: a way to hide mail behind an earlier message), while the same bytes in a second folder stay one
    /// message with both folders' labels.
    @Test func twoMessagesWithOneMessageIDAreBothStoredAndOneMessageInTwoFoldersIsStoredOnce() async throws {
        let server = try await SyncDovecot.start()
        defer { server.stop() }
        func message(_ word: String) -> [UInt8] {
            Array(
                ("From: Bob <bob@coffer.test>\r\nTo: alice@coffer.test\r\nSubject: report \(word)\r\n"
                    + "Message-ID: <same@coffer.test>\r\n\r\nText \(word).\r\n").utf8
            )
        }
        try await server.deliver(message("legitword"))
        try await server.deliver(message("forgedword"))
        let legitBytes = try await #require(try server.messages().first?.body)
        try await server.python(
            """
            imap.create("Archive")
            imap.subscribe("Archive")
            imap.append("Archive", None, None, base64.b64decode(\(String(reflecting: Data(legitBytes).base64EncodedString()))))
            """
        )
        let (world, syncer, account) = try await world(server)

        let summary = try await syncer.sync(accountID: account)
        #expect(summary.fetched == 3 && summary.folders == 2)
        #expect(try await world.store.count() == 2)
        let legit = try #require(try await world.store.search("legitword").first)
        let forged = try #require(try await world.store.search("forgedword").first)
        #expect(legit.id != forged.id)
        #expect(try await locations(world, account).map(\.messageID) == [legit.id, forged.id])
        #expect(try await locations(world, account, "Archive").map(\.messageID) == [legit.id])
        #expect(Set(try await world.store.list(label: "INBOX").map(\.id)) == [legit.id, forged.id])
        #expect(try await world.store.list(label: "Archive").map(\.id) == [legit.id])
    }

    /// A message whose header section has more fields than the parser takes (10,001) is stored as what it is: a
    /// "(damaged message)" row that says why, its bytes sealed as an attachment, counted in the summary; before, it
    /// was skipped without a word and the highest UID moved past it for ever.
    @Test func aMessageCofferCannotParseIsStoredAsADamagedMessageAndCounted() async throws {
        let server = try await SyncDovecot.start()
        defer { server.stop() }
        let fields = (0..<10_001).map { "X-Filler-\($0): value\r\n" }.joined()
        let unparsable = Array(
            ("From: bob@coffer.test\r\nSubject: hiddenword\r\n" + fields + "\r\nBody secretbodyword.\r\n").utf8
        )
        let files = TemporaryDirectory(prefix: "coffer-damaged")
        let file = "\(files.path)/unparsable.eml"
        try Data(unparsable).write(to: URL(fileURLWithPath: file))
        try await server.python(
            """
            with open(\(String(reflecting: file)), "rb") as f:
                imap.append("INBOX", None, None, f.read())
            """
        )
        try await server.deliver(SyncMail.message("besidedamaged"))
        let (world, syncer, account) = try await world(server)

        let summary = try await syncer.sync(accountID: account)
        #expect(summary.fetched == 2)
        #expect(summary.damaged == 1)
        #expect(try await locations(world, account).map(\.uid) == [1, 2])
        let listed = try #require(try await world.store.list().first { $0.flags.contains(.damaged) })
        #expect(listed.subject == MailStore.damagedSubject)
        #expect(listed.size == unparsable.count)
        let detail = try await world.store.message(listed.id)
        #expect(detail.textBody?.contains("The message has more than 10000 header fields.") == true)
        #expect(detail.textBody?.contains("hiddenword") == false)
        let attachment = try #require(detail.attachments.first)
        #expect(attachment.filename == MailStore.damagedFileName)
        #expect(try await world.store.attachmentContent(attachment.id).content == unparsable)
        #expect(try await world.store.search("damaged").map(\.id) == [listed.id])
        #expect(try await world.store.search("besidedamaged").count == 1)

        let again = try await syncer.sync(accountID: account)
        #expect(again.fetched == 0 && again.damaged == 0)
        #expect(try await world.store.count() == 2)
    }
}
