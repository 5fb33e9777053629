import CofferIMAP
import CofferStore
import CofferTesting
import Foundation
import Testing

@testable import CofferSync

extension TestServers.PinnedDovecot {
    /// Creates `folder` over IMAP (subscribed unless told not to), then writes `count` messages straight into its
    /// Maildir as the server's user: tens of thousands a second, where APPEND or LMTP manage hundreds. Message `n`
    /// (from 0) is `template` with every `{n}` replaced by `n`; Dovecot numbers them when the folder is next selected.
    func fillMaildir(_ folder: String, count: Int, template: String, subscribe: Bool = true) async throws {
        try await python(
            """
            import os
            imap.create(\(String(reflecting: folder)))
            if \(subscribe ? "True" : "False"):
                imap.subscribe(\(String(reflecting: folder)))
            mail = os.path.join(\(String(reflecting: server.dir)), "mail")
            owner = os.stat(mail)
            cur = os.path.join(mail, \(String(reflecting: Self.user)), "." + \(String(reflecting: folder)), "cur")
            os.makedirs(cur, exist_ok=True)
            template = \(String(reflecting: template))
            for n in range(\(count)):
                data = template.replace("{n}", str(n)).encode()
                path = os.path.join(cur, "%d.M%dP1.coffer,S=%d:2," % (1700000000 + n, n, len(data)))
                with open(path, "wb") as f:
                    f.write(data)
                os.chown(path, owner.st_uid, owner.st_gid)
            print(len(os.listdir(cur)))
            """
        )
    }

    /// The UIDs of `folder` as imaplib lists them (it has no line limit).
    func uids(_ folder: String) async throws -> [UInt32] {
        let line = try await python(
            """
            imap.select(\(String(reflecting: folder)), readonly=True)
            _, data = imap.uid("SEARCH", None, "ALL")
            print(" ".join(x.decode() for x in data[0].split()))
            """
        )
        return line.split(separator: " ").compactMap { UInt32($0) }
    }
}

/// Folders too large for one answer, and a folder that fails among others (issue 25, item 1).
@Suite(.serialized) struct LargeFolderTests {
    static let template =
        "From: Bob <bob@coffer.test>\r\nTo: alice@coffer.test\r\nSubject: bulk {n}\r\n"
        + "Message-ID: <bulk{n}@coffer.test>\r\nDate: Mon, 1 Jan 2024 10:00:00 +0000\r\n\r\nbulk body {n}\r\n"

    func world(
        _ server: SyncDovecot,
        limits: IMAPResponseParser.Limits = .init(),
        ignoring: Set<String> = [],
        batch: Int = 200
    ) async throws -> (SyncWorld, Syncer, Int64, SyncEventLog) {
        let world = try await SyncWorld()
        let log = SyncEventLog()
        let syncer = Syncer(
            store: world.store,
            batchSize: batch,
            limits: limits,
            timeout: .seconds(60),
            ignoredCapabilities: ignoring,
            observer: { log.record($0) }
        )
        let account = try await world.store.addServerAccount(try server.account())
        return (world, syncer, account, log)
    }

    /// A folder whose plain `UID SEARCH ALL` answer is longer than the parser's line limit (2,500 UIDs, about 12 KB,
    /// against a 4 KiB limit here; the issue's 14,000 against 64 KiB is the same failure): it is listed in windows
    /// of sequence numbers, with ESEARCH and without, and the folder after it is synced too.
    @Test(arguments: [Set<String>(), ["ESEARCH"]])
    func aFolderTooLargeForOneSearchAnswerIsSyncedAndSoIsTheNextFolder(ignoring: Set<String>) async throws {
        let server = try await SyncDovecot.start()
        defer { server.stop() }
        try await server.fillMaildir("Big", count: 2500, template: Self.template)
        try await server.fillMaildir(
            "After",
            count: 3,
            template: Self.template.replacingOccurrences(of: "bulk", with: "aft")
        )
        let limits = IMAPResponseParser.Limits(maxLineLength: 4096)
        let (world, syncer, account, log) = try await world(server, limits: limits, ignoring: ignoring)

        let summary = try await syncer.sync(accountID: account, folders: ["Big", "After"])
        #expect(summary.failures.isEmpty, "\(summary.failures)")
        #expect(summary.folders == 2)
        #expect(summary.fetched == 2503)
        for folder in ["Big", "After"] {
            let state = try #require(try await world.store.syncFolder(accountID: account, name: folder))
            let stored = try await world.store.syncLocations(folderID: state.id).map(\.uid)
            await #expect(stored == (try server.uids(folder)), "\(folder)")
        }
        // Windows of (4096 - 256) / 11 = 349 sequence numbers: 8 for Big, 1 for After.
        #expect(SyncEventLog.commands(log.take(), "UID SEARCH") == 9)
        #expect(try await world.store.search("aft").count == 3)

        // Nothing new: the second sync compares every UID again (without QRESYNC) or asks for none.
        let again = try await syncer.sync(accountID: account, folders: ["Big", "After"])
        #expect(again.fetched == 0 && again.deleted == 0 && again.failures.isEmpty)
        #expect(try await world.store.count() == 2503)
    }

    /// The issue's size: a folder of 100,000 messages (written into the server's Maildir in a few seconds). Listed
    /// whole in one `UID SEARCH ALL` answer, as before, it is a 600 KB line that the default 64 KiB limit refuses;
    /// the sync lists it in 25 windows with ESEARCH, stores every message, and a second sync without QRESYNC
    /// compares all 100,000 UIDs and their flags in answers of bounded size and fetches nothing.
    @Test func aFolderOfOneHundredThousandMessagesIsSynced() async throws {
        let server = try await SyncDovecot.start()
        defer { server.stop() }
        let count = 100_000
        let clock = ContinuousClock()
        let filled = clock.now
        try await server.fillMaildir("Huge", count: count, template: Self.template)
        print("100,000 messages written into the Maildir in \(clock.now - filled)")
        let (world, syncer, account, log) = try await world(server, batch: 500)

        let oneAnswer = Syncer(store: world.store, timeout: .seconds(60), ignoredCapabilities: ["ESEARCH"])
        let client = try await oneAnswer.connect(try server.account())
        _ = try await client.select("Huge", readOnly: true)
        await #expect(throws: IMAPError.lineTooLong(limit: 64 * 1024)) { _ = try await client.uidSearch(["ALL"]) }
        await client.logout()

        let first = clock.now
        let summary = try await syncer.sync(accountID: account, folders: ["Huge"])
        print("first sync of 100,000 messages (debug build): \(clock.now - first)")
        #expect(summary.failures.isEmpty, "\(summary.failures)")
        #expect(summary.fetched == count)
        #expect(SyncEventLog.commands(log.take(), "UID SEARCH") == (count + 4095) / 4096)
        let state = try #require(try await world.store.syncFolder(accountID: account, name: "Huge"))
        let stored = try await world.store.syncLocations(folderID: state.id).map(\.uid)
        #expect(stored.count == count)
        await #expect(stored == (try server.uids("Huge")))
        #expect(try await world.store.count() == count)
        #expect(try await world.store.search("99999").count == 1)

        let compare = Syncer(
            store: world.store,
            timeout: .seconds(60),
            ignoredCapabilities: ["QRESYNC", "CONDSTORE"],
            observer: { log.record($0) }
        )
        // As if the last complete sync had no mod-sequence: every flag is asked for, 4,096 messages per command.
        try await world.store.setHighestModSeq(folderID: state.id, 0)
        let second = clock.now
        let again = try await compare.sync(accountID: account, folders: ["Huge"])
        print("second sync, every UID and flag compared: \(clock.now - second)")
        #expect(again.fetched == 0 && again.deleted == 0 && again.failures.isEmpty)
        let events = log.take()
        #expect(events.contains(.comparedUIDs))
        #expect(SyncEventLog.commands(events, "UID SEARCH") == (count + 4095) / 4096)
        #expect(SyncEventLog.commands(events, "UID FETCH") == (count + 4095) / 4096)
        #expect(try await world.store.count() == count)
    }

    /// One folder answers a flag fetch with a line over the limit (a message with 120 long keywords), another does
    /// not exist: each is reported in the summary with why, and the folders after them are synced all the same,
    /// the first over a new connection (a line over the limit drops the connection).
    @Test func aFolderThatFailsIsReportedAndTheOtherFoldersStillSync() async throws {
        let server = try await SyncDovecot.start()
        defer { server.stop() }
        try await server.fillMaildir("Wide", count: 1, template: Self.template)
        let keywords = (0..<120).map { "keyword\($0)-" + String(repeating: "x", count: 30) }.joined(separator: " ")
        try await server.python(
            """
            imap.select("Wide")
            imap.uid("STORE", "1", "+FLAGS", "(\(keywords))")
            """
        )
        try await server.deliver(SyncMail.message("inboxafterfailure"))
        let limits = IMAPResponseParser.Limits(maxLineLength: 2048)
        let (world, syncer, account, _) = try await world(server, limits: limits)

        let summary = try await syncer.sync(accountID: account, folders: ["Wide", "Missing", "INBOX"])
        #expect(summary.folders == 1)
        #expect(summary.failures.map(\.folder) == ["Wide", "Missing"])
        #expect(summary.failures.first?.reason == IMAPError.lineTooLong(limit: 2048).description)
        #expect(summary.failures.last?.reason.contains("refused SELECT with NO") == true)
        #expect(try await world.store.search("inboxafterfailure").count == 1)
        // The failure carries no message text and no keyword the server sent.
        #expect(!summary.failures.contains { $0.reason.contains("keyword") || $0.reason.contains("bulk") })
    }
}
