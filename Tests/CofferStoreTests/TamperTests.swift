import CofferCrypto
import CofferKeychain
import CofferKeymaker
import CofferSampleMail
import CofferTesting
import Foundation
import GRDB
import Testing

@testable import CofferStore

@Suite("Tampering")
struct TamperTests {
    /// Imports three messages and returns their ids.
    func seed(_ world: StoreWorld) async throws -> [Int64] {
        let outcomes = try await world.store.importMessages([
            rawMessage(id: "1@x", subject: "first", body: "one", date: "Mon, 1 Jan 2024 10:00:00 +0000"),
            rawMessage(id: "2@x", subject: "second", body: "two", date: "Tue, 2 Jan 2024 10:00:00 +0000"),
            rawMessage(id: "3@x", subject: "third", body: "three", date: "Wed, 3 Jan 2024 10:00:00 +0000"),
        ])
        return outcomes.compactMap(\.id)
    }

    @Test("one flipped byte in one sealed cell marks only that message corrupt", arguments: ["subject", "textBody"])
    func flippedCell(column: String) async throws {
        let world = try await StoreWorld()
        let ids = try await seed(world)
        try await world.rawQueue().write { db in
            let cell: Data = try #require(
                try Data.fetchOne(db, sql: "SELECT \(column) FROM messages WHERE id = ?", arguments: [ids[1]])
            )
            var bytes = Array(cell)
            bytes[bytes.count - 20] ^= 0x01
            try db.execute(sql: "UPDATE messages SET \(column) = ? WHERE id = ?", arguments: [Data(bytes), ids[1]])
        }
        await #expect(throws: StoreError.corruptMessage(ids[1])) { try await world.store.message(ids[1]) }
        let listed = try await world.store.list()
        #expect(listed.count == 3)
        #expect(listed.filter(\.isCorrupt).map(\.id) == [ids[1]])
        #expect(listed.first { $0.id == ids[1] }?.subject == nil)
        #expect(try await world.store.message(ids[0]).snippet == "one")
        #expect(try await world.store.message(ids[2]).snippet == "three")
        // The mark is persistent (a clear flag), so the message stays corrupt after a restart.
        let flags = try await world.rawQueue().read { db in
            try Int64.fetchOne(db, sql: "SELECT flags FROM messages WHERE id = ?", arguments: [ids[1]])
        }
        #expect(MessageFlags(rawValue: try #require(flags)).contains(.corrupt))
        let events = await drain(world.store.events, expecting: 1)
        #expect(events.contains(.messageCorrupt(ids[1])))
    }

    @Test("swapping the same column between two rows makes both fail")
    func swappedCells() async throws {
        let world = try await StoreWorld()
        let ids = try await seed(world)
        try await world.rawQueue().write { db in
            let first = try Data.fetchOne(db, sql: "SELECT subject FROM messages WHERE id = ?", arguments: [ids[0]])
            let second = try Data.fetchOne(db, sql: "SELECT subject FROM messages WHERE id = ?", arguments: [ids[2]])
            try db.execute(sql: "UPDATE messages SET subject = ? WHERE id = ?", arguments: [second, ids[0]])
            try db.execute(sql: "UPDATE messages SET subject = ? WHERE id = ?", arguments: [first, ids[2]])
        }
        await #expect(throws: StoreError.corruptMessage(ids[0])) { try await world.store.message(ids[0]) }
        await #expect(throws: StoreError.corruptMessage(ids[2])) { try await world.store.message(ids[2]) }
        #expect(try await world.store.message(ids[1]).summary.subject == "second")
    }

    @Test("moving a cell to another column of the same row fails")
    func movedColumn() async throws {
        let world = try await StoreWorld()
        let ids = try await seed(world)
        try await world.rawQueue().write { db in
            try db.execute(sql: "UPDATE messages SET snippet = textBody WHERE id = ?", arguments: [ids[0]])
        }
        await #expect(throws: StoreError.corruptMessage(ids[0])) { try await world.store.message(ids[0]) }
    }

    @Test("moving an attachment to another message fails to open")
    func movedAttachment() async throws {
        let world = try await StoreWorld()
        let ids = try await seed(world)
        let withAttachment = try #require(
            try await world.store.importMessage(RawMessage(bytes: SyntheticMail().message(5, attachment: true))).id
        )
        try await world.rawQueue().write { db in
            try db.execute(
                sql: "UPDATE attachments SET messageID = ? WHERE messageID = ?",
                arguments: [ids[0], withAttachment]
            )
        }
        await #expect(throws: StoreError.corruptMessage(ids[0])) { try await world.store.message(ids[0]) }
        #expect(try await world.store.message(withAttachment).attachments.isEmpty)
    }

    @Test("a tampered setting reverts to the most private value and is reported")
    func tamperedSettings() async throws {
        let world = try await StoreWorld()
        let store = world.store
        #expect(try await store.settings() == .mostPrivate)
        let lax = StoreSettings(remoteImages: true, stripMetadata: false)
        try await store.updateSettings(lax)
        #expect(try await store.settings() == lax)

        try await world.rawQueue().write { db in
            let value = try #require(
                try Data.fetchOne(db, sql: "SELECT value FROM settings WHERE name = 'remoteImages'")
            )
            var bytes = Array(value)
            bytes[bytes.count - 1] ^= 0x80
            try db.execute(sql: "UPDATE settings SET value = ? WHERE name = 'remoteImages'", arguments: [Data(bytes)])
        }
        let reverted = try await store.settings()
        #expect(reverted.remoteImages == false)
        #expect(reverted.stripMetadata == false)
        #expect(await drain(store.events, expecting: 1) == [.settingReverted("remoteImages")])
        // The private value was written back, so it stays private and reads cleanly.
        #expect(try await store.settings().remoteImages == false)

        // Swapping the two settings' ciphertexts fails both: each is bound to its name.
        try await store.updateSettings(lax)
        try await world.rawQueue().write { db in
            let images = try Data.fetchOne(db, sql: "SELECT value FROM settings WHERE name = 'remoteImages'")
            let strip = try Data.fetchOne(db, sql: "SELECT value FROM settings WHERE name = 'stripMetadata'")
            try db.execute(sql: "UPDATE settings SET value = ? WHERE name = 'remoteImages'", arguments: [strip])
            try db.execute(sql: "UPDATE settings SET value = ? WHERE name = 'stripMetadata'", arguments: [images])
        }
        #expect(try await store.settings() == .mostPrivate)
        let events = await drain(store.events, expecting: 2)
        #expect(Set(events) == [.settingReverted("remoteImages"), .settingReverted("stripMetadata")])

        // A deleted setting reads as its (most private) default.
        try await store.updateSettings(lax)
        try await world.rawQueue().write { db in try db.execute(sql: "DELETE FROM settings") }
        #expect(try await store.settings() == .mostPrivate)
    }

    @Test("under another MainKey nothing opens: every message reads as corrupt")
    func otherKey() async throws {
        let world = try await StoreWorld()
        _ = try await seed(world)
        let other = try await Fixtures.unlockedKeymaker(account: "mallory")
        try world.store.close()
        let reopened = try MailStore(folder: "\(world.root.path)/store", keys: other)
        #expect(try await reopened.list().allSatisfy(\.isCorrupt))
        #expect(try await reopened.settings() == .mostPrivate)
    }
}
