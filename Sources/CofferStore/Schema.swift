import GRDB

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The store's migrations. A migration that has shipped never changes: new needs get a new migration.
enum Schema {
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            // Sealed cells are BLOBs holding sealed envelopes v1; clear columns are listed in docs/STORE.md.
            try db.execute(
                sql: """
                    CREATE TABLE accounts (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        details BLOB NOT NULL
                    );
                    CREATE TABLE addresses (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        accountID INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                        lookup BLOB NOT NULL UNIQUE,
                        details BLOB NOT NULL
                    );
                    CREATE INDEX addresses_account ON addresses(accountID);
                    CREATE TABLE contacts (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        lookup BLOB NOT NULL UNIQUE,
                        details BLOB NOT NULL
                    );
                    CREATE TABLE labels (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        lookup BLOB NOT NULL UNIQUE,
                        name BLOB NOT NULL
                    );
                    CREATE TABLE messages (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        conversationID INTEGER NOT NULL,
                        time INTEGER NOT NULL,
                        flags INTEGER NOT NULL,
                        size INTEGER NOT NULL,
                        messageIDHash BLOB,
                        contentHash BLOB NOT NULL,
                        subject BLOB NOT NULL,
                        fromList BLOB NOT NULL,
                        toList BLOB NOT NULL,
                        ccList BLOB NOT NULL,
                        bccList BLOB NOT NULL,
                        headers BLOB NOT NULL,
                        textBody BLOB NOT NULL,
                        htmlBody BLOB NOT NULL,
                        snippet BLOB NOT NULL
                    );
                    CREATE INDEX messages_time ON messages(time DESC, id DESC);
                    CREATE INDEX messages_conversation ON messages(conversationID);
                    CREATE UNIQUE INDEX messages_message_id ON messages(messageIDHash) WHERE messageIDHash IS NOT NULL;
                    CREATE UNIQUE INDEX messages_content ON messages(contentHash);
                    CREATE TABLE messageLabels (
                        labelID INTEGER NOT NULL REFERENCES labels(id) ON DELETE CASCADE,
                        time INTEGER NOT NULL,
                        messageID INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
                        PRIMARY KEY (labelID, time, messageID)
                    ) WITHOUT ROWID;
                    CREATE INDEX messageLabels_message ON messageLabels(messageID);
                    CREATE TABLE attachments (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        messageID INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
                        position INTEGER NOT NULL,
                        info BLOB NOT NULL,
                        body BLOB NOT NULL
                    );
                    CREATE INDEX attachments_message ON attachments(messageID, position);
                    CREATE TABLE searchTokens (
                        token INTEGER NOT NULL,
                        messageID INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
                        PRIMARY KEY (token, messageID)
                    ) WITHOUT ROWID;
                    CREATE INDEX searchTokens_message ON searchTokens(messageID);
                    CREATE TABLE settings (
                        name TEXT PRIMARY KEY NOT NULL,
                        value BLOB NOT NULL
                    ) WITHOUT ROWID;
                    """
            )
        }
        registerSyncMigration(&migrator)
        migrator.registerMigration("v3-summary") { db in
            // One sealed cell per message with what a list row shows (subject and senders), so a list page opens
            // one cell per row. Rows written before it keep NULL here and are listed from `subject` and `fromList`.
            try db.execute(sql: "ALTER TABLE messages ADD COLUMN summary BLOB")
        }
        registerIdentityMigration(&migrator)
        registerOutboxMigration(&migrator)
        registerAttachmentFilesMigration(&migrator)
        registerOpenPGPKeysMigration(&migrator)
        registerOpenPGPMailMigration(&migrator)
        registerContactKeysMigration(&migrator)
        registerAutocryptMigration(&migrator)
        registerOpenPGPPendingMigration(&migrator)
        registerSearchIndexMigration(&migrator)
        registerSearchPageMigration(&migrator)
        return migrator
    }

    /// The next id for `table`: above every id it holds and every id it ever handed out (AUTOINCREMENT's
    /// `sqlite_sequence`), so a deleted row's id, and with it the context of its old ciphertexts, is never reused.
    static func nextID(_ db: Database, table: String) throws -> Int64 {
        let used =
            try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = ?", arguments: [table]) ?? 0
        let highest = try Int64.fetchOne(db, sql: "SELECT max(id) FROM \(table)") ?? 0
        // SQLite hands ids out from 1, so an id near the top of the range means a changed file; refusing here keeps
        // every later `+ 1` of the batch from overflowing.
        let top = max(used, highest)
        guard top < Int64.max - idHeadroom else { throw StoreError.corruptRecord(table: table, id: top) }
        return top + 1
    }

    /// Ids left free above the highest one: more than any batch can use.
    static let idHeadroom: Int64 = 1 << 40

    /// Unix seconds of `date`, clamped to what an `Int64` holds (a Date header can name any year).
    static func seconds(_ date: Date) -> Int64 {
        let value = date.timeIntervalSince1970.rounded(.down)
        guard value.isFinite else { return 0 }
        if value >= 0x1p63 { return .max }
        if value < -0x1p63 { return .min }
        return Int64(value)
    }
}

/// A row of `accounts`: the id and one sealed cell (name and primary address).
struct AccountRecord: Codable, FetchableRecord, PersistableRecord, Sendable {
    static let databaseTableName = "accounts"

    /// Decodes strictly (see ``StrictRow``): a column of the wrong type throws ``DamagedRow``.
    init(row: Row) throws {
        let row = try StrictRow(row, table: Self.databaseTableName)
        id = row.id
        details = try row.blob("details")
    }

    init(id: Int64, details: Data) {
        self.id = id
        self.details = details
    }
    var id: Int64
    var details: Data
}

/// A row of `addresses` (the account's own addresses): clear account id, a keyed lookup hash, one sealed cell.
struct AddressRecord: Codable, FetchableRecord, PersistableRecord, Sendable {
    static let databaseTableName = "addresses"

    /// Decodes strictly (see ``StrictRow``).
    init(row: Row) throws {
        let row = try StrictRow(row, table: Self.databaseTableName)
        id = row.id
        accountID = try row.int64("accountID")
        lookup = try row.blob("lookup")
        details = try row.blob("details")
    }

    init(id: Int64, accountID: Int64, lookup: Data, details: Data) {
        self.id = id
        self.accountID = accountID
        self.lookup = lookup
        self.details = details
    }
    var id: Int64
    var accountID: Int64
    var lookup: Data
    var details: Data
}

/// A row of `labels`: a keyed lookup hash of the name and the sealed name.
struct LabelRecord: Codable, FetchableRecord, PersistableRecord, Sendable {
    static let databaseTableName = "labels"

    /// Decodes strictly (see ``StrictRow``).
    init(row: Row) throws {
        let row = try StrictRow(row, table: Self.databaseTableName)
        id = row.id
        lookup = try row.blob("lookup")
        name = try row.blob("name")
    }

    init(id: Int64, lookup: Data, name: Data) {
        self.id = id
        self.lookup = lookup
        self.name = name
    }
    var id: Int64
    var lookup: Data
    var name: Data
}

/// A row of `messages`: the clear metadata, the keyed duplicate hashes and ten sealed cells (nine before `v3-summary`).
package struct MessageRecord: Codable, FetchableRecord, PersistableRecord, Sendable {
    package static let databaseTableName = "messages"

    /// Decodes strictly (see ``StrictRow``): text in `time`, a number in a sealed column, a NULL anywhere throws
    /// ``DamagedRow`` instead of trapping or being converted.
    package init(row: Row) throws {
        let row = try StrictRow(row, table: Self.databaseTableName)
        id = row.id
        conversationID = try row.int64("conversationID")
        time = try row.int64("time")
        flags = try row.int64("flags")
        size = try row.int64("size")
        messageIDHash = try row.optionalBlob("messageIDHash")
        contentHash = try row.blob("contentHash")
        subject = try row.blob("subject")
        fromList = try row.blob("fromList")
        toList = try row.blob("toList")
        ccList = try row.blob("ccList")
        bccList = try row.blob("bccList")
        headers = try row.blob("headers")
        textBody = try row.blob("textBody")
        htmlBody = try row.blob("htmlBody")
        snippet = try row.blob("snippet")
        summary = try row.optionalBlob("summary")
        openPGP = try row.optionalBlob("openPGP")
    }
    package var id: Int64
    package var conversationID: Int64
    package var time: Int64
    package var flags: Int64
    package var size: Int64
    package var messageIDHash: Data?
    package var contentHash: Data
    package var subject: Data
    package var fromList: Data
    package var toList: Data
    package var ccList: Data
    package var bccList: Data
    package var headers: Data
    package var textBody: Data
    package var htmlBody: Data
    package var snippet: Data
    /// The summary cell (subject and senders); `nil` in rows written before migration `v3-summary`.
    package var summary: Data?
    /// The OpenPGP status cell (``MessageOpenPGP``); `nil` for a message that came without OpenPGP encryption, and in
    /// rows written before migration `v8-openpgp-mail`.
    package var openPGP: Data?

    /// A row from its clear columns and the sealed cells of the ten sealed columns.
    init(
        id: Int64,
        conversationID: Int64,
        time: Int64,
        flags: Int64,
        size: Int64,
        messageIDHash: Data?,
        contentHash: Data,
        cells: [SealedColumn: Data]
    ) {
        self.id = id
        self.conversationID = conversationID
        self.time = time
        self.flags = flags
        self.size = size
        self.messageIDHash = messageIDHash
        self.contentHash = contentHash
        subject = cells[.messageSubject] ?? Data()
        fromList = cells[.messageFrom] ?? Data()
        toList = cells[.messageTo] ?? Data()
        ccList = cells[.messageCc] ?? Data()
        bccList = cells[.messageBcc] ?? Data()
        headers = cells[.messageHeaders] ?? Data()
        textBody = cells[.messageText] ?? Data()
        htmlBody = cells[.messageHTML] ?? Data()
        snippet = cells[.messageSnippet] ?? Data()
        summary = cells[.messageSummary]
        openPGP = cells[.messageOpenPGP]
    }
}

/// A row of `messageLabels`: which label a message carries (clear, with the message time for paging).
struct MessageLabelRecord: Codable, FetchableRecord, PersistableRecord, Sendable {
    static let databaseTableName = "messageLabels"
    var labelID: Int64
    var time: Int64
    var messageID: Int64
}

/// A row of `attachments`: clear message id and position, sealed metadata and sealed content.
struct AttachmentRecord: Codable, FetchableRecord, PersistableRecord, Sendable {
    static let databaseTableName = "attachments"

    /// Decodes strictly (see ``StrictRow``).
    init(row: Row) throws {
        let row = try StrictRow(row, table: Self.databaseTableName)
        id = row.id
        messageID = try row.int64("messageID")
        position = try row.int64("position")
        info = try row.blob("info")
        body = try row.blob("body")
        file = try row.optionalText("file")
    }

    init(id: Int64, messageID: Int64, position: Int64, info: Data, body: Data, file: String? = nil) {
        self.id = id
        self.messageID = messageID
        self.position = position
        self.info = info
        self.body = body
        self.file = file
    }
    var id: Int64
    var messageID: Int64
    var position: Int64
    var info: Data
    /// The sealed body cell: the content, or (when ``file`` is set) the reference to its sealed file.
    var body: Data
    /// The name of the body's sealed file in `outgoing/` (migration `v6-attachment-files`); nil when the body is in
    /// ``body``.
    var file: String?
}

/// A row of `settings`: the setting's name (clear) and its sealed value.
struct SettingRecord: Codable, FetchableRecord, PersistableRecord, Sendable {
    static let databaseTableName = "settings"
    var name: String
    var value: Data
}
