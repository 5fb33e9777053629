import CofferKeymaker
import CofferMIME
import CofferSampleMail
import CofferStore
import Crypto
import GRDB

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Benchmarks of the sealed store against the same schema in plaintext GRDB (same parsing, batching, statements
/// and index shape; cells unsealed and index tokens stored as words), for `coffer-bench`.
enum StoreBenchmark {
    /// Timings of one run.
    struct Report: Sendable, CustomStringConvertible {
        /// Messages imported into each store.
        var messages: Int
        /// Seconds to import every message, sealed.
        var importSealed: Double
        /// Seconds to import every message, plaintext.
        var importPlain: Double
        /// Microseconds to list a page of 50 (newest first, with subject and senders), sealed.
        var listSealed: Double
        /// Microseconds to list a page of 50, plaintext.
        var listPlain: Double
        /// Microseconds to show one whole message, sealed.
        var showSealed: Double
        /// Microseconds to show one whole message, plaintext.
        var showPlain: Double
        /// Microseconds for a two-word search (first page of 50), sealed.
        var searchSealed: Double
        /// Microseconds for a two-word search, plaintext.
        var searchPlain: Double

        /// A table for people.
        var description: String {
            func row(_ name: String, _ sealed: Double, _ plain: Double, _ unit: String) -> String {
                let ratio = plain > 0 ? sealed / plain : 0
                return
                    "\(name.padding(toLength: 22, withPad: " ", startingAt: 0)) sealed \(format(sealed)) \(unit)"
                    + "   plaintext \(format(plain)) \(unit)   ratio \(format(ratio))x"
            }
            return [
                "store benchmark, \(messages) messages",
                row("import (all)", importSealed, importPlain, "s"),
                row("list page of 50", listSealed, listPlain, "us"),
                row("show one", showSealed, showPlain, "us"),
                row("search two words", searchSealed, searchPlain, "us"),
            ].joined(separator: "\n")
        }

        private func format(_ value: Double) -> String { String(format: "%.2f", value) }
    }

    /// Runs the benchmark in `folder` (two stores are created there) with an unlocked `keymaker`.
    ///
    /// - Parameters:
    ///   - messages: Generated messages to import (``SyntheticMail``, about 1 in 10 with an attachment).
    ///   - folder: An empty folder.
    ///   - keymaker: An unlocked Keymaker.
    ///   - iterations: Repetitions of each read operation (the mean is reported).
    static func run(
        messages: Int = 10_000,
        folder: String,
        keymaker: Keymaker,
        iterations: Int = 200
    )
        async throws -> Report
    {
        let generator = SyntheticMail(seed: 2024)
        let corpus = (0..<messages).map { RawMessage(bytes: generator.message($0)) }
        let batches = stride(from: 0, to: corpus.count, by: MailStore.defaultBatchSize).map {
            Array(corpus[$0..<min($0 + MailStore.defaultBatchSize, corpus.count)])
        }
        var report = Report(
            messages: messages,
            importSealed: 0,
            importPlain: 0,
            listSealed: 0,
            listPlain: 0,
            showSealed: 0,
            showPlain: 0,
            searchSealed: 0,
            searchPlain: 0
        )

        let plain = try PlaintextBaseline(path: "\(folder)/plain.sqlite")
        var start = ContinuousClock.now
        for batch in batches { try await plain.importMessages(batch) }
        report.importPlain = seconds(since: start)

        let store = try MailStore(folder: "\(folder)/sealed", keymaker: keymaker)
        start = ContinuousClock.now
        for batch in batches { _ = try await store.importMessages(batch) }
        report.importSealed = seconds(since: start)

        var random = SplitMix(seed: 99)
        let ids = (0..<iterations).map { _ in Int64(random.next() % UInt64(max(messages, 1))) + 1 }
        let query = "meeting budget"

        report.listPlain = try await mean(iterations) { _ in _ = try await plain.list(limit: 50, offset: 0) }
        report.listSealed = try await mean(iterations) { _ in _ = try await store.list(limit: 50, offset: 0) }
        report.showPlain = try await mean(iterations) { index in _ = try await plain.message(ids[index]) }
        report.showSealed = try await mean(iterations) { index in _ = try await store.message(ids[index]) }
        report.searchPlain = try await mean(iterations) { _ in _ = try await plain.search(query) }
        report.searchSealed = try await mean(iterations) { _ in _ = try await store.search(query) }
        try store.close()
        return report
    }

    static func seconds(since start: ContinuousClock.Instant) -> Double {
        let elapsed = ContinuousClock.now - start
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    /// Mean microseconds of `body` over `count` runs (after one warm-up run).
    static func mean(_ count: Int, _ body: (Int) async throws -> Void) async throws -> Double {
        try await body(0)
        let start = ContinuousClock.now
        for index in 0..<count { try await body(index) }
        return seconds(since: start) * 1e6 / Double(max(count, 1))
    }
}

/// The same schema, parsing, batching and statements as ``MailStore``, without sealing: cells hold their plaintext
/// encoding and the token index holds the words. For benchmarks only.
final class PlaintextBaseline: Sendable {
    let database: DatabasePool

    init(path: String) throws {
        var configuration = Configuration()
        configuration.foreignKeysEnabled = true
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA temp_store = MEMORY; PRAGMA synchronous = NORMAL;")
        }
        database = try DatabasePool(path: path, configuration: configuration)
        try database.write { db in
            try db.execute(
                sql: """
                    CREATE TABLE labels (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE);
                    CREATE TABLE messages (
                        id INTEGER PRIMARY KEY AUTOINCREMENT, conversationID INTEGER NOT NULL, time INTEGER NOT NULL,
                        flags INTEGER NOT NULL, size INTEGER NOT NULL, messageIDHash BLOB, contentHash BLOB NOT NULL,
                        subject BLOB NOT NULL, fromList BLOB NOT NULL, toList BLOB NOT NULL, ccList BLOB NOT NULL,
                        bccList BLOB NOT NULL, headers BLOB NOT NULL, textBody BLOB NOT NULL, htmlBody BLOB NOT NULL,
                        snippet BLOB NOT NULL);
                    CREATE INDEX messages_time ON messages(time DESC, id DESC);
                    CREATE INDEX messages_conversation ON messages(conversationID);
                    CREATE UNIQUE INDEX messages_message_id ON messages(messageIDHash) WHERE messageIDHash IS NOT NULL;
                    CREATE UNIQUE INDEX messages_content ON messages(contentHash);
                    CREATE TABLE messageLabels (labelID INTEGER NOT NULL, time INTEGER NOT NULL,
                        messageID INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
                        PRIMARY KEY (labelID, time, messageID)) WITHOUT ROWID;
                    CREATE INDEX messageLabels_message ON messageLabels(messageID);
                    CREATE TABLE attachments (id INTEGER PRIMARY KEY AUTOINCREMENT,
                        messageID INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
                        position INTEGER NOT NULL, info BLOB NOT NULL, body BLOB NOT NULL);
                    CREATE INDEX attachments_message ON attachments(messageID, position);
                    CREATE TABLE searchTokens (token TEXT NOT NULL,
                        messageID INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
                        PRIMARY KEY (token, messageID)) WITHOUT ROWID;
                    CREATE INDEX searchTokens_message ON searchTokens(messageID);
                    """
            )
        }
    }

    struct Prepared: Sendable {
        var time: Int64
        var flags: Int64
        var size: Int64
        var messageID: Data?
        var content: Data
        var parents: [Data]
        var cells: [Data]
        var tokens: [String]
        var attachments: [(info: Data, body: Data)]
        var labels: [String]
    }

    static func prepare(_ raw: RawMessage) -> Prepared? {
        guard let message = try? MIMEParser.parse(raw.bytes) else { return nil }
        var tokens = Set<String>()
        func index(_ text: String?) {
            guard let text else { return }
            SearchTokenizer.forEachToken(in: text) { token in
                if tokens.count < MailStore.maximumTokensPerMessage {
                    tokens.insert(String(decoding: token, as: UTF8.self))
                }
            }
        }
        let text = message.textBody
        index(message.subject)
        for address in message.from + message.to {
            index(address.name)
            index(address.address)
        }
        index(text.map { String(decoding: $0.utf8.prefix(MailStore.indexedBodyBytes), as: UTF8.self) })
        let cells = [
            CellWriter.text(message.subject), CellWriter.addressList(message.from), CellWriter.addressList(message.to),
            CellWriter.addressList(message.cc), CellWriter.addressList(message.bcc),
            CellWriter.headers(message.headers), CellWriter.text(text), CellWriter.text(message.htmlBody),
            CellWriter.text(text.map(MailStore.snippet)),
        ].map { Data($0) }
        let attachments = message.attachments.map { part -> (info: Data, body: Data) in
            var info = CellWriter(capacity: 96)
            info.string(part.filename)
            info.string(part.contentType.mimeType)
            info.string(part.contentID)
            info.count(part.body.count)
            var body = CellWriter(capacity: part.body.count + 8)
            body.raw(part.body)
            return (Data(info.bytes), Data(body.bytes))
        }
        return Prepared(
            time: message.date.map { Int64($0.timeIntervalSince1970) } ?? 0,
            flags: attachments.isEmpty ? 0 : MessageFlags.hasAttachments.rawValue,
            size: Int64(raw.bytes.count),
            messageID: message.messageID.map { Data($0.utf8) },
            content: Data(SHA256.hash(data: raw.bytes).prefix(16)),
            parents: (message.inReplyTo + message.references.reversed()).prefix(4).map { Data($0.utf8) },
            cells: cells,
            tokens: Array(tokens),
            attachments: attachments,
            labels: raw.labels
        )
    }

    func importMessages(_ messages: [RawMessage]) async throws {
        let prepared = messages.compactMap(Self.prepare)
        try await database.write { db in
            let duplicateByContent = try db.cachedStatement(sql: "SELECT 1 FROM messages WHERE contentHash = ?")
            let duplicateByID = try db.cachedStatement(sql: "SELECT 1 FROM messages WHERE messageIDHash = ?")
            let conversation = try db.cachedStatement(
                sql: "SELECT conversationID FROM messages WHERE messageIDHash = ?"
            )
            let insertMessage = try db.cachedStatement(
                sql: """
                    INSERT INTO messages (id, conversationID, time, flags, size, messageIDHash, contentHash, subject,
                    fromList, toList, ccList, bccList, headers, textBody, htmlBody, snippet)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """
            )
            let insertLabel = try db.cachedStatement(
                sql: "INSERT INTO messageLabels (labelID, time, messageID) VALUES (?, ?, ?)"
            )
            let insertToken = try db.cachedStatement(
                sql: "INSERT OR IGNORE INTO searchTokens (token, messageID) VALUES (?, ?)"
            )
            let insertAttachment = try db.cachedStatement(
                sql: "INSERT INTO attachments (id, messageID, position, info, body) VALUES (?, ?, ?, ?, ?)"
            )
            var nextID = (try Int64.fetchOne(db, sql: "SELECT max(id) FROM messages") ?? 0) + 1
            var nextAttachment = (try Int64.fetchOne(db, sql: "SELECT max(id) FROM attachments") ?? 0) + 1
            var labels: [String: Int64] = [:]
            for message in prepared {
                if try Bool.fetchOne(duplicateByContent, arguments: [message.content]) == true { continue }
                if let id = message.messageID, try Bool.fetchOne(duplicateByID, arguments: [id]) == true { continue }
                let id = nextID
                nextID += 1
                var conversationID = id
                for parent in message.parents {
                    if let found = try Int64.fetchOne(conversation, arguments: [parent]) {
                        conversationID = found
                        break
                    }
                }
                var arguments: StatementArguments = [
                    id, conversationID, message.time, message.flags, message.size, message.messageID, message.content,
                ]
                arguments += StatementArguments(message.cells)
                try insertMessage.execute(arguments: arguments)
                for name in message.labels {
                    let labelID: Int64
                    if let known = labels[name] {
                        labelID = known
                    } else {
                        try db.execute(sql: "INSERT OR IGNORE INTO labels (name) VALUES (?)", arguments: [name])
                        labelID = try Int64.fetchOne(
                            db,
                            sql: "SELECT id FROM labels WHERE name = ?",
                            arguments: [name]
                        )!
                        labels[name] = labelID
                    }
                    try insertLabel.execute(arguments: [labelID, message.time, id])
                }
                for token in message.tokens { try insertToken.execute(arguments: [token, id]) }
                for (position, attachment) in message.attachments.enumerated() {
                    try insertAttachment.execute(arguments: [
                        nextAttachment, id, position, attachment.info, attachment.body,
                    ])
                    nextAttachment += 1
                }
            }
        }
    }

    func list(limit: Int, offset: Int) async throws -> [MessageSummary] {
        let rows = try await database.read { db in
            try Row.fetchAll(
                db,
                sql: "SELECT \(SummaryRow.columns) FROM messages m ORDER BY m.time DESC, m.id DESC LIMIT ? OFFSET ?",
                arguments: [limit, offset]
            ).compactMap(SummaryRow.init(row:))
        }
        return try rows.map(Self.summary)
    }

    func search(_ query: String) async throws -> [MessageSummary] {
        let terms = SearchTokenizer.tokens(in: query)
        let rows = try await database.read { db in
            let intersection = Array(
                repeating: "SELECT messageID FROM searchTokens WHERE token = ?",
                count: terms.count
            )
            .joined(separator: " INTERSECT ")
            var arguments = StatementArguments(terms)
            arguments += [50, 0]
            return try Row.fetchAll(
                db,
                sql: """
                    WITH hits(id) AS (\(intersection))
                    SELECT \(SummaryRow.columns) FROM hits JOIN messages m ON m.id = hits.id
                    ORDER BY m.time DESC, m.id DESC LIMIT ? OFFSET ?
                    """,
                arguments: arguments
            ).compactMap(SummaryRow.init(row:))
        }
        return try rows.map(Self.summary)
    }

    func message(_ id: Int64) async throws -> MessageDetail? {
        let found = try await database.read { db -> (MessageRecord, [Int64], [AttachmentInfo])? in
            guard let record = try MessageRecord.fetchOne(db, key: id) else { return nil }
            let labels = try Int64.fetchAll(
                db,
                sql: "SELECT labelID FROM messageLabels WHERE messageID = ? ORDER BY labelID",
                arguments: [id]
            )
            let attachments = try Row.fetchAll(
                db,
                sql: "SELECT id, position, info FROM attachments WHERE messageID = ? ORDER BY position",
                arguments: [id]
            ).map(Self.attachment)
            return (record, labels, attachments)
        }
        guard let (record, labels, attachments) = found else { return nil }
        return MessageDetail(
            summary: MessageSummary(
                id: id,
                conversationID: record.conversationID,
                date: Date(timeIntervalSince1970: TimeInterval(record.time)),
                flags: MessageFlags(rawValue: record.flags),
                size: Int(record.size),
                subject: try CellReader.text(Array(record.subject)),
                from: try CellReader.addressList(Array(record.fromList))
            ),
            labelIDs: labels,
            to: try CellReader.addressList(Array(record.toList)),
            cc: try CellReader.addressList(Array(record.ccList)),
            bcc: try CellReader.addressList(Array(record.bccList)),
            headers: try CellReader.headers(Array(record.headers)),
            textBody: try CellReader.text(Array(record.textBody)),
            htmlBody: try CellReader.text(Array(record.htmlBody)),
            snippet: try CellReader.text(Array(record.snippet)),
            attachments: attachments
        )
    }

    static func attachment(_ row: Row) throws -> AttachmentInfo {
        let info: Data = row["info"]
        var reader = try CellReader(Array(info))
        return AttachmentInfo(
            id: row["id"],
            messageID: row["messageID"] ?? 0,
            position: row["position"],
            filename: try reader.string(),
            contentType: try reader.requiredString(),
            contentID: try reader.string(),
            size: try reader.count()
        )
    }

    static func summary(_ row: SummaryRow) throws -> MessageSummary {
        MessageSummary(
            id: row.id,
            conversationID: row.conversationID,
            date: Date(timeIntervalSince1970: TimeInterval(row.time)),
            flags: MessageFlags(rawValue: row.flags),
            size: Int(row.size),
            subject: try CellReader.text(Array(row.subject)),
            from: try CellReader.addressList(Array(row.fromList))
        )
    }
}
