import CofferIMAP
import CofferStore
import CofferTesting
import Foundation
import NIOConcurrencyHelpers
import Testing

@testable import CofferSync

/// Collects what a syncer reports (commands sent, locations read, which path brought a folder up to date).
final class SyncEventLog: Sendable {
    private let events = NIOLockedValueBox<[SyncEvent]>([])

    func record(_ event: SyncEvent) { events.withLockedValue { $0.append(event) } }
    func take() -> [SyncEvent] {
        events.withLockedValue { list in
            defer { list = [] }
            return list
        }
    }

    static func commands(_ events: [SyncEvent], _ name: String) -> Int {
        events.filter { $0 == .command(name) }.count
    }
}

/// Round trips against the live Dovecot counted by the syncer's observer: how many commands and store reads a sync
/// costs, QRESYNC against the plain UID diff, and every subscribed folder with non-ASCII names.
@Suite(.serialized) struct SyncRoundTripTests {
    func setUp(
        _ server: SyncDovecot,
        ignoring: Set<String> = []
    ) async throws -> (SyncWorld, Syncer, Int64, SyncEventLog) {
        let world = try await SyncWorld()
        let log = SyncEventLog()
        let syncer = Syncer(
            store: world.store,
            batchSize: 10,
            timeout: .seconds(60),
            ignoredCapabilities: ignoring,
            observer: { log.record($0) }
        )
        let account = try await world.store.addServerAccount(try server.account())
        return (world, syncer, account, log)
    }

    @Test func localFlagChangesGoInOneUIDStorePerFlagSetAndLocationsAreReadOncePerFolder() async throws {
        let server = try await SyncDovecot.start()
        defer { server.stop() }
        for index in 1...6 { try await server.deliver(SyncMail.message("batchstore\(index)")) }
        let (world, syncer, account, log) = try await setUp(server)
        #expect(try await syncer.sync(accountID: account).fetched == 6)
        #expect(log.take().filter { $0 == .locationsRead }.count == 1)

        // Five read here, one of them also flagged: two sets of flags, so two UID STOREs, not six.
        let folder = try #require(try await world.store.syncFolder(accountID: account, name: "INBOX"))
        let locations = try await world.store.syncLocations(folderID: folder.id)
        for location in locations.prefix(5) { try await world.store.setFlags(location.messageID, adding: .seen) }
        try await world.store.setFlags(locations[0].messageID, adding: .flagged)

        let summary = try await syncer.sync(accountID: account)
        let events = log.take()
        #expect(summary.flagsPushed == 5)
        #expect(SyncEventLog.commands(events, "UID STORE") == 2)
        #expect(events.filter { $0 == .locationsRead }.count == 1)
        let reference = try await server.messages()
        #expect(reference.filter { $0.flags.contains("\\Seen") }.map(\.uid) == Array(locations.prefix(5).map(\.uid)))
        #expect(reference.filter { $0.flags.contains("\\Flagged") }.map(\.uid) == [locations[0].uid])

        // Nothing left: no STORE at all.
        let again = try await syncer.sync(accountID: account)
        #expect(again.flagsPushed == 0 && again.flagsPulled == 0)
        #expect(SyncEventLog.commands(log.take(), "UID STORE") == 0)
    }

    /// A flag set and a message expunged by imaplib are seen by the next sync: through QRESYNC when the server
    /// offers it, through the UID diff with CHANGEDSINCE when only CONDSTORE is used, and through the plain UID diff
    /// when the client ignores both.
    @Test(arguments: [[], ["QRESYNC"], ["QRESYNC", "CONDSTORE"]])
    func serverChangesArriveWithAndWithoutQRESYNC(ignoring: [String]) async throws {
        let server = try await SyncDovecot.start()
        defer { server.stop() }
        for index in 1...4 { try await server.deliver(SyncMail.message("qresync\(index)")) }
        let qresync = ignoring.isEmpty
        let (world, syncer, account, log) = try await setUp(server, ignoring: Set(ignoring))
        #expect(try await syncer.sync(accountID: account).fetched == 4)
        let folder = try #require(try await world.store.syncFolder(accountID: account, name: "INBOX"))
        #expect((folder.highestModSeq > 0) == !ignoring.contains("CONDSTORE"))
        _ = log.take()

        try await server.python(
            """
            imap.select("INBOX")
            imap.uid("STORE", "1", "+FLAGS", "(\\\\Deleted)")
            imap.uid("STORE", "3", "+FLAGS", "(\\\\Flagged \\\\Answered)")
            imap.expunge()
            """
        )
        let summary = try await syncer.sync(accountID: account)
        let events = log.take()
        #expect(summary.deleted == 1)
        #expect(summary.flagsPulled == 1)
        #expect(try await world.store.search("qresync1").isEmpty)
        let third = try await world.store.syncLocations(folderID: folder.id).first { $0.uid == 3 }
        #expect(third?.localFlags == [.flagged, .answered])
        if qresync {
            #expect(events.contains(.resynchronized))
            #expect(!events.contains(.comparedUIDs))
            // Everything came with the SELECT: no search of every UID, no flag fetch.
            #expect(SyncEventLog.commands(events, "UID SEARCH") == 0)
            #expect(SyncEventLog.commands(events, "UID FETCH") == 0)
        } else {
            #expect(events.contains(.comparedUIDs))
            #expect(!events.contains(.resynchronized))
            #expect(SyncEventLog.commands(events, "UID SEARCH") == 1)
        }

        // New mail after it is still found (QRESYNC: by UID above the highest stored).
        try await server.deliver(SyncMail.message("qresync5"))
        #expect(try await syncer.sync(accountID: account).fetched == 1)
        #expect(try await world.store.search("qresync5").count == 1)
        await #expect(try server.messages().map(\.uid) == [2, 3, 4, 5])
    }

    @Test func aUIDValidityChangeStillResyncsWithQRESYNC() async throws {
        let server = try await SyncDovecot.start()
        defer { server.stop() }
        let append = { (marker: String) in
            let literal = String(decoding: SyncMail.message(marker), as: UTF8.self)
            try await server.python("imap.append(\"Work\", None, None, \(String(reflecting: literal)).encode())")
        }
        try await server.python("imap.create(\"Work\")")
        try await append("validityone")
        let (world, syncer, account, log) = try await setUp(server)
        #expect(try await syncer.sync(accountID: account, folders: ["Work"]).fetched == 1)
        try await server.python("imap.delete(\"Work\")\nimap.create(\"Work\")")
        try await append("validitytwo")
        _ = log.take()
        let summary = try await syncer.sync(accountID: account, folders: ["Work"])
        #expect(summary.resynced == 1 && summary.deleted == 1 && summary.fetched == 1)
        #expect(!log.take().contains(.resynchronized))
        #expect(try await world.store.search("validitytwo").count == 1)
    }

    @Test func withoutFoldersEverySubscribedFolderAndINBOXAreSyncedUnderTheirDecodedNames() async throws {
        let server = try await SyncDovecot.start()
        defer { server.stop() }
        // Entwürfe and 日本語 (RFC 3501's example) in modified UTF-7; "Archive" exists but is not subscribed.
        try await server.python(
            """
            for box in ["Entw&APw-rfe", "&ZeVnLIqe-", "Archive"]:
                imap.create(box)
            for box in ["Entw&APw-rfe", "&ZeVnLIqe-"]:
                imap.subscribe(box)
            imap.append("Entw&APw-rfe", None, None, b"Subject: draftword\\r\\nMessage-ID: <d@coffer.test>\\r\\n\\r\\nx\\r\\n")
            imap.append("&ZeVnLIqe-", None, None, b"Subject: kanjiword\\r\\nMessage-ID: <k@coffer.test>\\r\\n\\r\\nx\\r\\n")
            imap.append("Archive", None, None, b"Subject: archiveword\\r\\nMessage-ID: <a@coffer.test>\\r\\n\\r\\nx\\r\\n")
            """
        )
        try await server.deliver(SyncMail.message("inboxword"))
        let (world, syncer, account, _) = try await setUp(server)
        let summary = try await syncer.sync(accountID: account)
        #expect(summary.folders == 3)
        #expect(summary.fetched == 3)
        let names = Set(try await world.store.syncFolders(accountID: account).map(\.name))
        #expect(names == ["INBOX", "Entwürfe", "日本語"])
        #expect(try await world.store.search("kanjiword").count == 1)
        #expect(try await world.store.search("archiveword").isEmpty)

        // A folder named by a person is sent encoded.
        let archive = try await syncer.sync(accountID: account, folders: ["日本語"])
        #expect(archive.folders == 1 && archive.fetched == 0)
    }
}

/// How new messages are cut into fetch-and-store batches: by count and by the sizes the server gave.
struct SyncBatchTests {
    @Test func batchesKeepOrderAndBoundCountAndBytesAndAHugeMessageGoesAlone() {
        let uids: [UInt32] = Array(1...7)
        let sizes: [UInt32: UInt64] = [1: 10, 2: 10, 3: 80, 4: 500, 5: 1, 6: .max, 7: 5]
        let batches = Syncer.batches(uids, sizes: sizes, maxCount: 3, maxBytes: 100)
        #expect(batches == [[1, 2, 3], [4], [5], [6], [7]])
        #expect(batches.flatMap { $0 } == uids)
        // By count alone when no size is known.
        #expect(Syncer.batches(uids, sizes: [:], maxCount: 3, maxBytes: 100) == [[1, 2, 3], [4, 5, 6], [7]])
        #expect(Syncer.batches([], sizes: [:], maxCount: 3, maxBytes: 100).isEmpty)
    }
}
