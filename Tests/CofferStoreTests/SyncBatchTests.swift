import CofferTesting
import Foundation
import GRDB
import Testing

@testable import CofferStore

/// A sync's batch in two steps (prepared while the one before is written, then written), and the search tokens of
/// a batch written as one blind-index row per message.
struct SyncBatchTests {
    func syncedFolder(_ store: MailStore) async throws -> Int64 {
        let account = try await store.addServerAccount(
            ServerAccount(host: "mail.example.org", port: 993, username: "alice", password: "pw")
        )
        return try await store.addSyncFolder(accountID: account, name: "INBOX", uidValidity: 1).id
    }

    func fetched(_ uid: UInt32, _ subject: String, _ body: String) -> FetchedMail {
        FetchedMail(
            uid: uid,
            bytes: rawMessage(id: "m\(uid)@x", subject: subject, body: body).bytes,
            flags: [],
            label: "INBOX"
        )
    }

    @Test func everyTokenOfABatchIsIndexedInOneRowPerMessage() async throws {
        let world = try await StoreWorld()
        let folder = try await syncedFolder(world.store)
        // Many distinct words, and one word shared by both messages.
        let words = (0..<600).map { "word\($0)x" }
        let outcomes = try await world.store.storeFetchedMail(
            [fetched(1, "many words", words.joined(separator: " ")), fetched(2, "few", "word7x alone")],
            folderID: folder
        )
        #expect(outcomes.count == 2)
        let rows = try await world.rawQueue().read { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM searchIndex") ?? -1
        }
        // One row per message (format v2), whatever the number of words.
        #expect(rows == 2)
        #expect(try await world.store.search("word7x").compactMap(\.subject).sorted() == ["few", "many words"])
        for index in [0, 249, 250, words.count - 1] {
            #expect(try await world.store.search("word\(index)x").map(\.subject) == ["many words"])
        }
        #expect(Set(try await world.store.search("word7x").map(\.subject)) == ["many words", "few"])
    }

    @Test func aBatchPreparedBeforeALockIsNotWritten() async throws {
        let world = try await StoreWorld()
        let folder = try await syncedFolder(world.store)
        let prepared = try await world.store.prepareFetchedMail([fetched(1, "s", "body")])
        #expect(prepared.count == 1)
        await world.keymaker.lock()
        await #expect(throws: StoreError.locked) { try await world.store.storePrepared(prepared, folderID: folder) }
        try await world.keymaker.unlock(.none)
        #expect(try await world.store.count() == 0)
        #expect(try await world.store.storePrepared(prepared, folderID: folder).count == 1)
        #expect(try await world.store.count() == 1)
    }
}
