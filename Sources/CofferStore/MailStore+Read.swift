import CofferMIME
import GRDB

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The columns a list row needs, decoded strictly: a row whose clear columns or cells have the wrong type (the
/// file was changed outside Coffer) is kept as damaged, with only its id, so one bad row never hides the others.
package struct SummaryRow: Sendable {
    package var id: Int64
    package var conversationID: Int64 = 0
    package var time: Int64 = 0
    package var flags: Int64 = 0
    package var size: Int64 = 0
    /// The subject and senders cells: read only for rows without a summary cell.
    package var subject: Data?
    package var fromList: Data?
    /// The summary cell; `nil` in rows written before migration `v3-summary`, which are listed from the two cells
    /// above.
    package var summary: Data?
    /// Whether a column held a value of the wrong type.
    package var isDamaged = false

    /// The selected columns, in the order ``init(row:)`` reads them by position. The list reads only the cells it
    /// shows: the subject and senders cells only where the summary cell is missing (a page of 50 copies 50 cells out
    /// of SQLite, not 150), so damage to them is found when the message is opened, not in the list (checking their
    /// types in every row cost about 40 µs a page).
    package static let columns = """
        m.id, m.conversationID, m.time, m.flags, m.size, m.summary,
        CASE WHEN m.summary IS NULL THEN m.subject END, CASE WHEN m.summary IS NULL THEN m.fromList END
        """

    /// Decodes a row of ``columns`` by position; `nil` only if even the id is unreadable (SQLite keeps a rowid an
    /// integer).
    package init?(row: Row) {
        guard case .int64(let id) = (row[0] as DatabaseValue).storage else { return nil }
        self.id = id
        func integer(_ index: Int) -> Int64? {
            guard case .int64(let value) = (row[index] as DatabaseValue).storage else { return nil }
            return value
        }
        /// `.some(nil)` for NULL, `nil` for another type.
        func optionalBlob(_ index: Int) -> Data?? {
            switch (row[index] as DatabaseValue).storage {
            case .null: return .some(nil)
            case .blob(let data): return data
            default: return nil
            }
        }
        guard let conversationID = integer(1), let time = integer(2), let flags = integer(3), let size = integer(4),
            let summary = optionalBlob(5), let subject = optionalBlob(6), let fromList = optionalBlob(7),
            summary != nil || (subject != nil && fromList != nil)
        else {
            isDamaged = true
            return
        }
        (self.conversationID, self.time, self.flags, self.size) = (conversationID, time, flags, size)
        (self.summary, self.subject, self.fromList) = (summary, subject, fromList)
    }

    /// Every row of `sql` (which selects ``columns``), read through a cursor.
    static func fetchAll(_ db: Database, sql: String, arguments: StatementArguments) throws -> [SummaryRow] {
        var rows: [SummaryRow] = []
        let cursor = try Row.fetchCursor(db, sql: sql, arguments: arguments)
        while let row = try cursor.next() {
            if let decoded = SummaryRow(row: row) { rows.append(decoded) }
        }
        return rows
    }
}

extension MailStore {
    /// The largest page ``list(label:limit:offset:)`` and ``search(_:limit:offset:)`` return.
    public static let maximumPageSize = 1000

    /// Messages by date, newest first, optionally only those under the label called `label`.
    ///
    /// A message whose subject or sender fails to open is returned with ``MessageSummary/isCorrupt`` set and no
    /// sealed fields, is marked corrupt in the store, and is reported on ``events``.
    public func list(
        label: String? = nil,
        limit: Int = 50,
        offset: Int = 0
    ) async throws(StoreError)
        -> [MessageSummary]
    {
        try Self.checkPage(limit: limit, offset: offset)
        let keys = try await keys()
        let rows: [SummaryRow] = try await read { db in
            if let label {
                let lookup = Data(keys.lookup.hash(tag: HashTag.labelName, Array(label.utf8)).prefix(16))
                guard
                    let labelID = try Int64.fetchOne(
                        db,
                        sql: "SELECT id FROM labels WHERE lookup = ?",
                        arguments: [lookup]
                    )
                else { return [] }
                return try SummaryRow.fetchAll(
                    db,
                    sql: """
                        SELECT \(SummaryRow.columns) FROM messageLabels l JOIN messages m ON m.id = l.messageID
                        WHERE l.labelID = ? ORDER BY l.time DESC, l.messageID DESC LIMIT ? OFFSET ?
                        """,
                    arguments: [labelID, limit, offset]
                )
            }
            return try SummaryRow.fetchAll(
                db,
                sql: "SELECT \(SummaryRow.columns) FROM messages m ORDER BY m.time DESC, m.id DESC LIMIT ? OFFSET ?",
                arguments: [limit, offset]
            )
        }
        return await summaries(rows, keys: keys)
    }

    /// Messages containing every word of `query` (in the subject, the From and To names and addresses, or the first
    /// ``indexedBodyBytes`` of the text body), newest first. Words are normalised like the index (case, Unicode
    /// form); words shorter than ``SearchTokenizer/minimumLength`` are ignored. An empty query finds nothing.
    ///
    /// Matching uses the blind index only: truncated keyed hashes of the words, never the words.
    public func search(
        _ query: String,
        limit: Int = 50,
        offset: Int = 0
    ) async throws(StoreError)
        -> [MessageSummary]
    {
        try Self.checkPage(limit: limit, offset: offset)
        let keys = try await keys()
        var hashes: [Int64] = []
        SearchTokenizer.forEachToken(in: query) { token in
            let hash = keys.search.hash64(tag: HashTag.searchToken, token)
            if !hashes.contains(hash) { hashes.append(hash) }
        }
        guard !hashes.isEmpty else { return [] }
        let terms = Array(hashes.prefix(32))
        let rows: [SummaryRow] = try await read { db in
            try SummaryRow.fetchAll(db, sql: Self.searchSQL, arguments: [SearchIndex.query(terms), limit, offset])
        }
        return await summaries(rows, keys: keys)
    }

    /// A search page: the hits are ordered by date through `messages_id_time` (migration `v13-search-page`), which
    /// holds each message's time by its id, and only the page's rows are read. Ordering the joined rows themselves
    /// read every hit's row (a random b-tree descent through the table and its wide sealed cells) to sort them.
    static let searchSQL = """
        WITH hits(id) AS (SELECT rowid FROM searchIndex WHERE searchIndex MATCH ?),
        page(id) AS (
            SELECT t.id FROM hits JOIN messages t INDEXED BY messages_id_time ON t.id = hits.id
            ORDER BY t.time DESC, t.id DESC LIMIT ? OFFSET ?
        )
        SELECT \(SummaryRow.columns) FROM page JOIN messages m ON m.id = page.id ORDER BY m.time DESC, m.id DESC
        """

    /// One whole message: headers, addresses, bodies and attachment metadata.
    ///
    /// - Throws: ``StoreError/messageNotFound(_:)``, or ``StoreError/corruptMessage(_:)`` if any of its sealed cells
    ///   fails to open (the message is then marked corrupt and reported on ``events``).
    public func message(_ id: Int64) async throws(StoreError) -> MessageDetail {
        let keys = try await keys()
        let found: (MessageRecord, [Int64], [AttachmentRecord])?
        do {
            found = try await read { db in
                do {
                    // Cached statements: a person opens messages one after another, and preparing each statement
                    // again (SQL parse and GRDB's authorizer) was a tenth of the agent's work for a `show`.
                    guard
                        let record = try MessageRecord.fetchOne(
                            db.cachedStatement(sql: "SELECT * FROM messages WHERE id = ?"),
                            arguments: [id]
                        )
                    else { return nil }
                    let labels = try Row.fetchAll(
                        db.cachedStatement(
                            sql: "SELECT labelID FROM messageLabels WHERE messageID = ? ORDER BY labelID"
                        ),
                        arguments: [id]
                    ).map { row in
                        guard case .int64(let label) = row.databaseValues.first?.storage else {
                            throw DamagedRow(table: "messages", id: id)
                        }
                        return label
                    }
                    let attachments = try AttachmentRecord.fetchAll(
                        db.cachedStatement(
                            sql: """
                                SELECT id, messageID, position, info, x'' AS body, file FROM attachments
                                WHERE messageID = ? ORDER BY position
                                """
                        ),
                        arguments: [id]
                    )
                    return (record, labels, attachments)
                } catch is DamagedRow {
                    // A damaged attachment or label row damages its message.
                    throw DamagedRow(table: "messages", id: id)
                }
            }
        } catch .corruptMessage(let damaged) {
            await markCorrupt([damaged])
            throw .corruptMessage(damaged)
        }
        guard let (record, labelIDs, attachmentRecords) = found else { throw .messageNotFound(id) }
        if MessageFlags(rawValue: record.flags).contains(.corrupt) { throw .corruptMessage(id) }
        do {
            /// Opens and decodes one cell, zeroing its decrypted buffer.
            func cell<T>(_ data: Data, _ column: SealedColumn, _ decode: ([UInt8]) throws -> T) throws -> T {
                guard let value = keys.decode(data, column, row: id, decode) else { throw CellReader.Malformed() }
                return value
            }
            let summary = MessageSummary(
                id: id,
                conversationID: record.conversationID,
                date: Date(timeIntervalSince1970: TimeInterval(record.time)),
                flags: MessageFlags(rawValue: record.flags),
                size: Int(record.size),
                subject: try cell(record.subject, .messageSubject, CellReader.text),
                from: try cell(record.fromList, .messageFrom, CellReader.addressList)
            )
            // The summary cell is checked too, so a changed one fails here as it does in a list.
            if let summaryCell = record.summary {
                let listed = try cell(summaryCell, .messageSummary) { plain in try CellReader.summary(plain) }
                guard listed.subject == summary.subject, listed.from == summary.from else {
                    throw CellReader.Malformed()
                }
            }
            var attachments: [AttachmentInfo] = []
            for attachment in attachmentRecords {
                guard attachment.messageID == id else { throw CellReader.Malformed() }
                attachments.append(try Self.attachmentInfo(attachment, keys: keys))
            }
            return MessageDetail(
                summary: summary,
                labelIDs: labelIDs,
                to: try cell(record.toList, .messageTo, CellReader.addressList),
                cc: try cell(record.ccList, .messageCc, CellReader.addressList),
                bcc: try cell(record.bccList, .messageBcc, CellReader.addressList),
                headers: try cell(record.headers, .messageHeaders, CellReader.headers),
                textBody: try cell(record.textBody, .messageText, CellReader.text),
                htmlBody: try cell(record.htmlBody, .messageHTML, CellReader.text),
                snippet: try cell(record.snippet, .messageSnippet, CellReader.text),
                attachments: attachments,
                openPGP: try record.openPGP.map { sealed in try cell(sealed, .messageOpenPGP, MessageOpenPGP.read) }
            )
        } catch {
            await markCorrupt([id])
            throw .corruptMessage(id)
        }
    }

    /// The attachments' metadata of a message, in order.
    public func attachments(of messageID: Int64) async throws(StoreError) -> [AttachmentInfo] {
        try await message(messageID).attachments
    }

    /// The metadata of one attachment, without opening its content.
    ///
    /// - Throws: ``StoreError/attachmentNotFound(_:)``, or ``StoreError/corruptMessage(_:)`` if its cell fails to open.
    public func attachmentInfo(_ id: Int64) async throws(StoreError) -> AttachmentInfo {
        let keys = try await keys()
        let found = try await read { db in try AttachmentRecord.fetchOne(db, key: id) }
        guard let record = found else { throw .attachmentNotFound(id) }
        do {
            return try Self.attachmentInfo(record, keys: keys)
        } catch {
            await markCorrupt([record.messageID])
            throw .corruptMessage(record.messageID)
        }
    }

    /// The metadata and decrypted content of one attachment.
    ///
    /// - Throws: ``StoreError/attachmentNotFound(_:)``, or ``StoreError/corruptMessage(_:)`` if its cells fail to
    ///   open (its message is then marked corrupt).
    ///
    /// A large attachment (migration `v6-attachment-files`) is read from its sealed file, verified chunk by chunk;
    /// the caller gets the same bytes either way.
    public func attachmentContent(_ id: Int64) async throws(StoreError) -> (info: AttachmentInfo, content: [UInt8]) {
        let keys = try await keys()
        let found = try await read { db in try AttachmentRecord.fetchOne(db, key: id) }
        guard let record = found else { throw .attachmentNotFound(id) }
        let info: AttachmentInfo
        let body: AttachmentBody
        do {
            info = try Self.attachmentInfo(record, keys: keys)
            body = try Self.attachmentBody(record, keys: keys)
        } catch {
            await markCorrupt([record.messageID])
            throw .corruptMessage(record.messageID)
        }
        switch body {
        case .inline(let content):
            return (info, content)
        case .file(let file, let size):
            do throws(StoreError) {
                let content = try await readAttachmentFile(file, size: size, id: id)
                return (info, content)
            } catch .corruptFile {
                await markCorrupt([record.messageID])
                throw .corruptMessage(record.messageID)
            }
        }
    }

    /// The number of messages in the store.
    public func count() async throws(StoreError) -> Int {
        _ = try await keys()
        return try await read { db in try MessageRecord.fetchCount(db) }
    }

    static func attachmentInfo(_ record: AttachmentRecord, keys: StoreKeys) throws -> AttachmentInfo {
        guard let plain = keys.open(record.info, .attachmentInfo, row: record.id, extra: String(record.messageID))
        else { throw CellReader.Malformed() }
        var reader = try CellReader(plain)
        let filename = try reader.string()
        let contentType = try reader.requiredString()
        let contentID = try reader.string()
        let size = try reader.count()
        try reader.finish()
        return AttachmentInfo(
            id: record.id,
            messageID: record.messageID,
            position: Int(record.position),
            filename: filename,
            contentType: contentType,
            contentID: contentID,
            size: size
        )
    }

    static func checkPage(limit: Int, offset: Int) throws(StoreError) {
        guard (1...maximumPageSize).contains(limit) else {
            throw .invalidArgument("the limit must be between 1 and \(maximumPageSize)")
        }
        guard offset >= 0 else { throw .invalidArgument("the offset must not be negative") }
    }

    /// Opens the summary cell of list rows (or, in rows older than `v3-summary`, the subject and senders cells); rows
    /// that fail are marked corrupt.
    func summaries(_ rows: [SummaryRow], keys: StoreKeys) async -> [MessageSummary] {
        var corrupt: [Int64] = []
        var result: [MessageSummary] = []
        result.reserveCapacity(rows.count)
        for row in rows {
            if row.isDamaged {
                result.append(
                    MessageSummary(
                        id: row.id,
                        conversationID: row.id,
                        date: Date(timeIntervalSince1970: 0),
                        flags: .corrupt,
                        size: 0,
                        subject: nil,
                        from: []
                    )
                )
                corrupt.append(row.id)
                continue
            }
            var summary = MessageSummary(
                id: row.id,
                conversationID: row.conversationID,
                date: Date(timeIntervalSince1970: TimeInterval(row.time)),
                flags: MessageFlags(rawValue: row.flags),
                size: Int(row.size),
                subject: nil,
                from: []
            )
            if !summary.isCorrupt, let summaryCell = row.summary {
                if let listed = keys.decode(
                    summaryCell,
                    .messageSummary,
                    row: row.id,
                    { plain in try CellReader.summary(plain) }
                ) {
                    summary.subject = listed.subject
                    summary.from = listed.from
                } else {
                    summary.flags.insert(.corrupt)
                    corrupt.append(row.id)
                }
            } else if !summary.isCorrupt {
                if let subjectText = keys.decode(row.subject, .messageSubject, row: row.id, CellReader.text),
                    let addresses = keys.decode(row.fromList, .messageFrom, row: row.id, CellReader.addressList)
                {
                    summary.subject = subjectText
                    summary.from = addresses
                } else {
                    summary.flags.insert(.corrupt)
                    corrupt.append(row.id)
                }
            }
            result.append(summary)
        }
        await markCorrupt(corrupt)
        return result
    }
}
