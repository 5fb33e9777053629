import CofferTesting
import Foundation
import GRDB
import Testing

@testable import CofferStore

/// The summary cell (migration `v3-summary`): one sealed cell per message with what a list row shows.
@Suite("Summary cell")
struct SummaryCellTests {
    /// Imports three messages from different senders and returns their ids.
    func seed(_ world: StoreWorld) async throws -> [Int64] {
        try await world.store.importMessages([
            rawMessage(
                id: "1@x",
                subject: "first",
                body: "one",
                from: "Ann <ann@example.org>",
                date: "Mon, 1 Jan 2024 10:00:00 +0000"
            ),
            rawMessage(
                id: "2@x",
                subject: "second",
                body: "two",
                from: "Bob <bob@example.org>",
                date: "Tue, 2 Jan 2024 10:00:00 +0000"
            ),
            rawMessage(
                id: "3@x",
                subject: "third",
                body: "three",
                from: "Cy <cy@example.org>",
                date: "Wed, 3 Jan 2024 10:00:00 +0000"
            ),
        ]).compactMap(\.id)
    }

    func expectIntactList(_ listed: [MessageSummary]) {
        #expect(listed.map(\.subject) == ["third", "second", "first"])
        #expect(listed.map { $0.from.first?.address } == ["cy@example.org", "bob@example.org", "ann@example.org"])
        #expect(listed.allSatisfy { !$0.isCorrupt })
    }

    @Test("a snippet collapses white space and keeps the first 160 characters, a cluster counted as one")
    func snippet() {
        #expect(MailStore.snippet("  Hello,\r\n\n\tworld  again \n") == "Hello, world again")
        #expect(MailStore.snippet(" \n\t ").isEmpty)
        let long = String(repeating: "ab ", count: 200)
        let cut = MailStore.snippet(long)
        #expect(cut.count == 160 && cut == String(long.prefix(160)))
        // One family emoji is one character of the 160, however many scalars it holds.
        let families = String(repeating: "👨‍👩‍👧‍👦", count: 300)
        #expect(MailStore.snippet(families) == String(repeating: "👨‍👩‍👧‍👦", count: 160))
    }

    @Test("a new message has a sealed summary cell, and list and search show it")
    func written() async throws {
        let world = try await StoreWorld()
        let ids = try await seed(world)
        let cells = try await world.rawQueue().read { db in
            try Data.fetchAll(db, sql: "SELECT summary FROM messages ORDER BY id")
        }
        #expect(cells.count == 3)
        // A sealed envelope ("CFEV"), never the subject in clear.
        #expect(cells.allSatisfy { Array($0.prefix(4)) == Array("CFEV".utf8) })
        #expect(cells.allSatisfy { $0.range(of: Data("second".utf8)) == nil })
        expectIntactList(try await world.store.list())
        #expect(try await world.store.search("two").map(\.subject) == ["second"])
        #expect(try await world.store.message(ids[1]).summary.subject == "second")
    }

    @Test("a flipped byte in a summary cell marks only that message corrupt, in list and in show")
    func flipped() async throws {
        let world = try await StoreWorld()
        let ids = try await seed(world)
        try await world.rawQueue().write { db in
            let cell = try #require(
                try Data.fetchOne(db, sql: "SELECT summary FROM messages WHERE id = ?", arguments: [ids[1]])
            )
            var bytes = Array(cell)
            bytes[bytes.count - 20] ^= 0x01
            try db.execute(sql: "UPDATE messages SET summary = ? WHERE id = ?", arguments: [Data(bytes), ids[1]])
        }
        let listed = try await world.store.list()
        #expect(listed.filter(\.isCorrupt).map(\.id) == [ids[1]])
        #expect(listed.first { $0.id == ids[1] }?.subject == nil)
        #expect(listed.first { $0.id == ids[0] }?.subject == "first")
        await #expect(throws: StoreError.corruptMessage(ids[1])) { try await world.store.message(ids[1]) }
    }

    @Test("a summary cell swapped between rows, or another column's cell moved into it, fails to open")
    func swappedAndMoved() async throws {
        let world = try await StoreWorld()
        let ids = try await seed(world)
        try await world.rawQueue().write { db in
            let first = try Data.fetchOne(db, sql: "SELECT summary FROM messages WHERE id = ?", arguments: [ids[0]])
            let third = try Data.fetchOne(db, sql: "SELECT summary FROM messages WHERE id = ?", arguments: [ids[2]])
            try db.execute(sql: "UPDATE messages SET summary = ? WHERE id = ?", arguments: [third, ids[0]])
            try db.execute(sql: "UPDATE messages SET summary = ? WHERE id = ?", arguments: [first, ids[2]])
            try db.execute(sql: "UPDATE messages SET summary = subject WHERE id = ?", arguments: [ids[1]])
        }
        let listed = try await world.store.list()
        #expect(Set(listed.filter(\.isCorrupt).map(\.id)) == Set(ids))
        #expect(listed.allSatisfy { $0.subject == nil && $0.from.isEmpty })
        for id in ids {
            await #expect(throws: StoreError.corruptMessage(id)) { try await world.store.message(id) }
        }
    }

    @Test("a store written before v3-summary is migrated and lists its old rows from the subject and sender cells")
    func oldStoreStaysReadable() async throws {
        let world = try await StoreWorld()
        let ids = try await seed(world)
        try world.store.close()
        // Turn the file back into a v2-sync store: no summary column, no v3-summary migration recorded.
        try await world.rawQueue().writeWithoutTransaction { db in
            try db.execute(sql: "ALTER TABLE messages DROP COLUMN summary")
            try db.execute(sql: "DELETE FROM grdb_migrations WHERE identifier = 'v3-summary'")
        }
        let reopened = try MailStore(folder: "\(world.root.path)/store", keys: world.keymaker)
        let nulls = try await world.rawQueue().read { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM messages WHERE summary IS NULL")
        }
        #expect(nulls == 3)
        expectIntactList(try await reopened.list())
        #expect(try await reopened.message(ids[2]).summary.subject == "third")
        // New rows get the cell; old and new rows list together.
        let fourth = try #require(
            try await reopened.importMessage(
                rawMessage(id: "4@x", subject: "fourth", body: "four", date: "Thu, 4 Jan 2024 10:00:00 +0000")
            ).id
        )
        let listed = try await reopened.list()
        #expect(listed.map(\.subject) == ["fourth", "third", "second", "first"])
        #expect(listed.allSatisfy { !$0.isCorrupt })
        let written = try await world.rawQueue().read { db in
            try Data.fetchOne(db, sql: "SELECT summary FROM messages WHERE id = ?", arguments: [fourth])
        }
        #expect(written != nil)
        try reopened.close()
    }

    @Test("an old row's subject cell is still checked in a list when its summary is NULL")
    func oldRowTampered() async throws {
        let world = try await StoreWorld()
        let ids = try await seed(world)
        try await world.rawQueue().write { db in
            try db.execute(sql: "UPDATE messages SET summary = NULL")
            try db.execute(sql: "UPDATE messages SET subject = fromList WHERE id = ?", arguments: [ids[0]])
        }
        let listed = try await world.store.list()
        #expect(listed.filter(\.isCorrupt).map(\.id) == [ids[0]])
        #expect(listed.first { $0.id == ids[2] }?.subject == "third")
    }
}
