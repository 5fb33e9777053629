import CofferTesting
import Foundation
import GRDB
import Testing

@testable import CofferStore

/// What an attacker with write access to the database file puts into one column of one message row.
enum TamperValue: String, CaseIterable, Sendable, CustomTestStringConvertible {
    /// Text in an integer column, a number in a BLOB column.
    case wrongType
    /// A real number.
    case real
    /// NULL (after the `NOT NULL` constraints were removed from the schema).
    case null
    case int64Max
    case int64Min
    /// A 2 MiB BLOB.
    case hugeBlob

    var testDescription: String { rawValue }

    func value(integerColumn: Bool) -> DatabaseValue {
        switch self {
        case .wrongType: integerColumn ? "1700000000x".databaseValue : Int64(42).databaseValue
        case .real: 1.5.databaseValue
        case .null: .null
        case .int64Max: Int64.max.databaseValue
        case .int64Min: Int64.min.databaseValue
        case .hugeBlob: Data(repeating: 0x41, count: 2 << 20).databaseValue
        }
    }
}

/// Message columns, whether each holds an integer, and whether it is a sealed cell.
let messageColumns: [(name: String, integer: Bool)] = [
    ("conversationID", true), ("time", true), ("flags", true), ("size", true), ("messageIDHash", false),
    ("contentHash", false), ("subject", false), ("fromList", false), ("toList", false), ("ccList", false),
    ("bccList", false), ("headers", false), ("textBody", false), ("htmlBody", false), ("snippet", false),
    ("summary", false),
]

extension StoreWorld {
    /// Removes every `NOT NULL` from the schema, as an attacker editing the file can, so NULLs can be written.
    func dropNotNullConstraints() throws {
        let queue = try rawQueue()
        try queue.writeWithoutTransaction { db in
            let version = try Int.fetchOne(db, sql: "PRAGMA schema_version") ?? 0
            try db.execute(sql: "PRAGMA writable_schema = ON")
            try db.execute(sql: "UPDATE sqlite_master SET sql = replace(sql, 'NOT NULL', '') WHERE type = 'table'")
            try db.execute(sql: "PRAGMA schema_version = \(version + 1)")
            try db.execute(sql: "PRAGMA writable_schema = OFF")
        }
        try queue.close()
    }
}

@Suite("Tampering with clear columns")
struct ClearColumnTamperTests {
    /// Whether a message whose `column` holds `value` must read as damaged: a value of the wrong type anywhere, a
    /// sealed cell that does not open, or a flags value with the corrupt bit set. Integers in integer columns (even
    /// the extremes) and a nullable or unchecked hash of any BLOB length are valid.
    static func damages(_ column: (name: String, integer: Bool), _ value: TamperValue) -> Bool {
        let sealed = !column.integer && column.name != "messageIDHash" && column.name != "contentHash"
        switch value {
        case .wrongType, .real: return true
        // A NULL summary is a row written before `v3-summary`: it is listed from the subject and sender cells.
        case .null: return column.name != "messageIDHash" && column.name != "summary"
        case .int64Max: return !column.integer || column.name == "flags"
        case .int64Min: return !column.integer
        case .hugeBlob: return column.integer || sealed
        }
    }

    @Test(
        "a wrong type or an extreme value in one column of one row never traps, and only that message is damaged",
        arguments: messageColumns.map(\.name),
        TamperValue.allCases
    )
    func tamperedColumn(column: String, value: TamperValue) async throws {
        let spec = try #require(messageColumns.first { $0.name == column })
        let world = try await StoreWorld()
        let ids = try await world.store.importMessages([
            rawMessage(id: "1@x", subject: "first", body: "one shared", date: "Mon, 1 Jan 2024 10:00:00 +0000"),
            rawMessage(id: "2@x", subject: "second", body: "two shared", date: "Tue, 2 Jan 2024 10:00:00 +0000"),
            rawMessage(id: "3@x", subject: "third", body: "three shared", date: "Wed, 3 Jan 2024 10:00:00 +0000"),
        ]).compactMap(\.id)
        #expect(ids.count == 3)
        try world.dropNotNullConstraints()
        let target = ids[1]
        try await world.rawQueue().write { db in
            try db.execute(
                sql: "UPDATE messages SET \(column) = ? WHERE id = ?",
                arguments: [value.value(integerColumn: spec.integer), target]
            )
        }
        let damaged = Self.damages(spec, value)

        for listed in [try await world.store.list(), try await world.store.search("shared")] {
            #expect(listed.count == 3)
            #expect(Set(listed.map(\.id)) == Set(ids))
            let others = listed.filter { $0.id != target }
            #expect(others.allSatisfy { !$0.isCorrupt && $0.subject != nil })
            // A list opens the summary cell (the subject and sender cells only when it is NULL, in older rows).
            if ["summary", "conversationID", "time", "flags", "size"].contains(column) {
                #expect(listed.first { $0.id == target }?.isCorrupt == damaged)
            }
        }
        if damaged {
            await #expect(throws: StoreError.corruptMessage(target)) { try await world.store.message(target) }
            #expect(try await world.store.list().first { $0.id == target }?.isCorrupt == true)
        } else {
            let detail = try await world.store.message(target)
            #expect(detail.summary.subject == "second")
            if column == "time" {
                #expect(detail.summary.date.timeIntervalSince1970 == Double(value == .int64Max ? Int64.max : .min))
            }
        }
        #expect(try await world.store.message(ids[0]).summary.subject == "first")
        #expect(try await world.store.message(ids[2]).snippet == "three shared")
        // Imports still work, also for a reply to the damaged message (its conversation id is read back).
        let reply = rawMessage(
            id: "4@x",
            subject: "fourth",
            body: "four",
            extraHeaders: "In-Reply-To: <2@x>\r\n"
        )
        let fourth = try #require(try await world.store.importMessage(reply).id)
        #expect(try await world.store.message(fourth).summary.subject == "fourth")
    }

    @Test("a row of another table with a wrong type reads as a damaged record, not a trap")
    func tamperedOtherTables() async throws {
        let world = try await StoreWorld()
        _ = try await world.store.createLabel("Work")
        _ = try await world.store.addContact(name: "Bob", address: "bob@example.org")
        let account = try await world.store.addAccount(username: "alice", displayName: nil)
        _ = try await world.store.saveAddress(accountID: account, address: "alice@example.org", displayName: nil)
        try await world.store.updateSettings(StoreSettings(remoteImages: true, stripMetadata: false))
        try await world.rawQueue().write { db in
            try db.execute(sql: "UPDATE labels SET name = 7")
            try db.execute(sql: "UPDATE addressBook SET record = 'text'")
            try db.execute(sql: "UPDATE accounts SET details = 1.5")
            try db.execute(sql: "UPDATE addresses SET details = 9223372036854775807")
            try db.execute(sql: "UPDATE settings SET value = 1")
        }
        await #expect(throws: StoreError.self) { try await world.store.labels() }
        await #expect(throws: StoreError.self) { try await world.store.allContacts() }
        await #expect(throws: StoreError.self) { try await world.store.accounts() }
        await #expect(throws: StoreError.self) { try await world.store.addresses(accountID: account) }
        // A setting of the wrong type reads as its most private value.
        #expect(try await world.store.settings() == .mostPrivate)
    }

    @Test("an id sequence pushed to the top of the range refuses the import instead of overflowing")
    func exhaustedSequence() async throws {
        let world = try await StoreWorld()
        _ = try await world.store.importMessage(rawMessage(id: "1@x", subject: "first", body: "one"))
        try await world.rawQueue().write { db in
            try db.execute(sql: "UPDATE sqlite_sequence SET seq = 9223372036854775807 WHERE name = 'messages'")
        }
        await #expect(throws: StoreError.self) {
            try await world.store.importMessage(rawMessage(id: "2@x", subject: "second", body: "two"))
        }
        #expect(try await world.store.count() == 1)
    }

    @Test(
        "any Date converts to stored seconds without trapping (the MIME parser bounds years; this is the backstop)",
        arguments: [(1e30, Int64.max), (-1e30, Int64.min), (0x1p63, Int64.max), (-0x1p63, Int64.min), (1.9, 1)]
    )
    func secondsClamp(interval: Double, expected: Int64) {
        #expect(Schema.seconds(Date(timeIntervalSince1970: interval)) == expected)
    }
}
