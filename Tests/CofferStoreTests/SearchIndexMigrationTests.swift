import CofferTesting
import Foundation
import GRDB
import Testing

@testable import CofferStore

/// Migration `v12-search-fts5`: blind index format v1 (a row per token and message) becomes format v2 (an FTS5 row
/// per message) with the same hashes, so a store written before it finds the same messages after it. Migration
/// `v13-search-page`: a search orders its hits through the index of times by id.
struct SearchIndexMigrationTests {
    func tables(_ world: StoreWorld) throws -> Set<String> {
        Set(try world.rawQueue().read { db in try String.fetchAll(db, sql: "SELECT name FROM sqlite_master") })
    }

    @Test func aV11StoreFindsTheSameMessagesAfterTheMigrationAndDeletesTheirRows() async throws {
        let world = try await StoreWorld()
        let first = try #require(
            try await world.store.importMessage(rawMessage(id: "a@x", subject: "harbour lights", body: "amber")).id
        )
        let second = try #require(
            try await world.store.importMessage(rawMessage(id: "b@x", subject: "harbour fog", body: "grey")).id
        )
        try world.store.close()
        // Back to a v11 file: format v1's table holding the same hashes, no FTS5 table, no v12 recorded.
        try await world.rawQueue().writeWithoutTransaction { db in
            let rows = try Row.fetchAll(db, sql: "SELECT rowid, tokens FROM searchIndex")
            try db.execute(
                sql: """
                    DROP TRIGGER messages_searchIndex;
                    DROP TABLE searchIndex;
                    CREATE TABLE searchTokens (
                        token INTEGER NOT NULL,
                        messageID INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
                        PRIMARY KEY (token, messageID)
                    ) WITHOUT ROWID;
                    CREATE INDEX searchTokens_message ON searchTokens(messageID);
                    DELETE FROM grdb_migrations WHERE identifier = 'v12-search-fts5';
                    """
            )
            for row in rows {
                let id: Int64 = row["rowid"]
                let text: String = row["tokens"]
                for term in text.split(separator: " ") {
                    let token = Int64(bitPattern: try #require(UInt64(term, radix: 16)))
                    try db.execute(sql: "INSERT INTO searchTokens VALUES (?, ?)", arguments: [token, id])
                }
            }
        }
        #expect(try tables(world).contains("searchTokens"))
        #expect(!(try tables(world).contains("searchIndex")))

        let store = try MailStore(folder: "\(world.root.path)/store", keys: world.keymaker)
        #expect(!(try tables(world).contains("searchTokens")))
        #expect(Set(try await store.search("harbour").map(\.id)) == [first, second])
        #expect(try await store.search("amber harbour").map(\.id) == [first])
        #expect(try await store.search("grey").map(\.id) == [second])
        #expect(try await store.search("amber grey").isEmpty)

        // The trigger deletes a message's row with it, and the index passes FTS5's own check.
        try await store.deleteMessage(first)
        #expect(try await store.search("harbour").map(\.id) == [second])
        try await world.rawQueue().write { db in
            #expect(try Int.fetchOne(db, sql: "SELECT count(*) FROM searchIndex") == 1)
            try db.execute(sql: "INSERT INTO searchIndex (searchIndex) VALUES ('integrity-check')")
        }
        try store.close()
    }

    /// Pages of a search are the hits newest first (the same time broken by the higher id), without gaps or
    /// repeats, and the words' order does not matter; hits are ordered through `messages_id_time`, never by reading
    /// every hit's row.
    @Test func searchPagesAreTheHitsNewestFirstOrderedThroughTheTimeIndex() async throws {
        let world = try await StoreWorld()
        var hits: [(time: Int, id: Int64)] = []
        for index in 0..<23 {
            // Days out of order, and pairs of messages at the same minute.
            let day = 1 + (index * 7) % 23
            let outcome = try await world.store.importMessage(
                rawMessage(
                    id: "m\(index)@x",
                    subject: index % 3 == 0 ? "tide tables" : "harbour tide \(index)",
                    body: "text",
                    date: "\(day / 2 + 1) Mar 2024 10:00:00 +0000"
                )
            )
            let id = try #require(outcome.id)
            if index % 3 != 0 { hits.append((day / 2, id)) }
        }
        let expected = hits.sorted { ($0.time, $0.id) > ($1.time, $1.id) }.map(\.id)
        var paged: [Int64] = []
        for offset in stride(from: 0, to: 21, by: 4) {
            paged += try await world.store.search("harbour tide", limit: 4, offset: offset).map(\.id)
        }
        #expect(paged == expected)
        #expect(try await world.store.search("tide harbour", limit: 50).map(\.id) == expected)
        #expect(expected.count == 15)
        #expect(try await world.store.search("harbour", limit: 3, offset: 13).map(\.id) == Array(expected[13...]))
        #expect(try await world.store.search("harbour", limit: 3, offset: 15).isEmpty)

        let plan = try await world.rawQueue().read { db in
            try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN \(MailStore.searchSQL)", arguments: ["x", 50, 0])
                .map { row -> String in row["detail"] }
        }
        #expect(plan.contains("SEARCH t USING COVERING INDEX messages_id_time (id=?)"), "\(plan)")
        try world.store.close()
    }

    @Test func aHashIsSixteenHexDigitsOfItsSixtyFourBits() {
        #expect(
            SearchIndex.document([0, -1, Int64.min, 0x0123_4567_89ab_cdef])
                == [
                    "0000000000000000", "ffffffffffffffff", "8000000000000000", "0123456789abcdef",
                ].joined(separator: " ")
        )
        #expect(SearchIndex.document([Int64]()) == "")
        #expect(SearchIndex.query([1, -2]) == "\"0000000000000001\" AND \"fffffffffffffffe\"")
    }
}
