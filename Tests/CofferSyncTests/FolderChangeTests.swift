import CofferIMAP
import CofferStore
import CofferTesting
import Foundation
import Testing

@testable import CofferSync

/// Folders renamed and deleted on the server, and messages moved between them: the store follows where each message
/// is on the server now (issue 25, items 2 and 3).
@Suite(.serialized) struct FolderChangeTests {
    func append(_ server: SyncDovecot, _ folder: String, _ marker: String) async throws {
        let literal = String(decoding: SyncMail.message(marker), as: UTF8.self)
        try await server.python(
            "imap.append(\(String(reflecting: folder)), None, None, \(String(reflecting: literal)).encode())"
        )
    }

    func ids(_ world: SyncWorld, label: String) async throws -> Set<Int64> {
        Set(try await world.store.list(label: label).map(\.id))
    }

    func id(_ world: SyncWorld, _ word: String) async throws -> Int64 {
        try #require(try await world.store.search(word).first).id
    }

    @Test func aRenamedFolderADeletedFolderAndAMovedMessageLeaveNoStaleState() async throws {
        let server = try await SyncDovecot.start()
        defer { server.stop() }
        try await server.python(
            """
            for name in ("Archive", "Scratch"):
                imap.create(name)
                imap.subscribe(name)
            """
        )
        for marker in ["archone", "archtwo", "archthree"] { try await append(server, "Archive", marker) }
        try await append(server, "Scratch", "scratchonly")
        try await server.deliver(SyncMail.message("inboxonly"))
        let world = try await SyncWorld()
        let syncer = Syncer(store: world.store, batchSize: 10, timeout: .seconds(60))
        let account = try await world.store.addServerAccount(try server.account())
        #expect(try await syncer.sync(accountID: account).fetched == 5)
        let archived = Set([
            try await id(world, "archone"), try await id(world, "archtwo"), try await id(world, "archthree"),
        ])
        #expect(try await ids(world, label: "Archive") == archived)

        // On the server: Archive renamed to Old (and subscribed there), Scratch deleted (its subscription stays, as
        // Dovecot keeps it), and archone moved from Old to INBOX.
        try await server.python(
            """
            imap.rename("Archive", "Old")
            imap.unsubscribe("Archive")
            imap.subscribe("Old")
            imap.delete("Scratch")
            imap.select("Old")
            typ, data = imap.uid("MOVE", "1", "INBOX")
            assert typ == "OK", data
            """
        )
        let summary = try await syncer.sync(accountID: account)
        #expect(summary.failures.isEmpty, "\(summary.failures)")
        #expect(summary.forgotten == 2)
        #expect(summary.deleted == 1)
        #expect(Set(try await world.store.syncFolders(accountID: account).map(\.name)) == ["INBOX", "Old"])
        #expect(try await world.store.count() == 4)
        #expect(try await world.store.search("scratchonly").isEmpty)
        // The same rows, under the labels of where they are now.
        let one = try await id(world, "archone")
        #expect(archived.contains(one))
        #expect(try await ids(world, label: "Archive").isEmpty)
        #expect(try await ids(world, label: "Old") == archived.subtracting([one]))
        #expect(try await ids(world, label: "INBOX") == [try await id(world, "inboxonly"), one])
        #expect(try await world.store.message(one).labelIDs.count == 1)

        // An expunge in the renamed folder deletes here.
        try await server.python(
            """
            imap.select("Old")
            imap.uid("STORE", "2", "+FLAGS", "(\\\\Deleted)")
            imap.expunge()
            """
        )
        let again = try await syncer.sync(accountID: account)
        #expect(again.deleted == 1 && again.forgotten == 0)
        #expect(try await world.store.search("archtwo").isEmpty)
        #expect(try await ids(world, label: "Old") == [try await id(world, "archthree")])
        #expect(try await world.store.count() == 3)
    }
}
