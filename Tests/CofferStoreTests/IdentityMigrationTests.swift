import CofferTesting
import Foundation
import GRDB
import Testing

@testable import CofferStore

/// Migration `v4-identity`: the Message-ID hash index stops being unique (issue 25, item 6).
struct IdentityMigrationTests {
    func indexIsUnique(_ world: StoreWorld) throws -> Bool? {
        try world.rawQueue().read { db in
            try Row.fetchAll(db, sql: "PRAGMA index_list(messages)").first {
                ($0["name"] as String?) == "messages_message_id"
            }
            .map { ($0["unique"] as Int?) == 1 }
        }
    }

    @Test func aV3StoreKeepsItsRowsAndThenStoresTwoMessagesWithOneMessageID() async throws {
        let world = try await StoreWorld()
        let first = try #require(
            try await world.store.importMessage(rawMessage(id: "same@x", subject: "one", body: "a")).id
        )
        try world.store.close()
        // Back to a v3-summary file: the unique index of v1, no v4-identity recorded.
        try await world.rawQueue().writeWithoutTransaction { db in
            try db.execute(sql: "DROP INDEX messages_message_id")
            try db.execute(
                sql:
                    "CREATE UNIQUE INDEX messages_message_id ON messages(messageIDHash) WHERE messageIDHash IS NOT NULL"
            )
            try db.execute(sql: "DELETE FROM grdb_migrations WHERE identifier = 'v4-identity'")
        }
        #expect(try indexIsUnique(world) == true)

        let store = try MailStore(folder: "\(world.root.path)/store", keys: world.keymaker)
        #expect(try indexIsUnique(world) == false)
        #expect(try await store.message(first).summary.subject == "one")
        let account = try await store.addServerAccount(
            ServerAccount(host: "mail.example.org", port: 993, username: "alice", password: "pw")
        )
        let folder = try await store.addSyncFolder(accountID: account, name: "INBOX", uidValidity: 1)
        let other = rawMessage(id: "same@x", subject: "two", body: "b").bytes
        let outcomes = try await store.storeFetchedMail(
            [FetchedMail(uid: 1, bytes: other, flags: [], label: "INBOX")],
            folderID: folder.id
        )
        guard case .stored(let second)? = outcomes.first else {
            Issue.record("not stored: \(outcomes)")
            return
        }
        #expect(second != first)
        #expect(try await store.count() == 2)
        try store.close()
    }
}
