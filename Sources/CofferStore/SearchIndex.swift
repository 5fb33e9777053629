import GRDB

/// The blind index of messages (index format v2, migration `v12-search-fts5`; docs/STORE.md, "Blind index").
///
/// One row per indexed message in the FTS5 table `searchIndex`, whose row id is the message's id and whose text is
/// the message's token hashes, each as 16 lower-case hex digits, separated by spaces. FTS5 writes a transaction's
/// rows as one new segment and merges segments later, so a batch of messages costs a few page writes per token
/// instead of two b-tree inserts per token and message (format v1's table).
enum SearchIndex {
    /// The text of a message's row: each hash as 16 lower-case hex digits (its 64 bits), separated by spaces.
    static func document(_ hashes: some Collection<Int64>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(hashes.count * 17)
        for hash in hashes {
            if !bytes.isEmpty { bytes.append(UInt8(ascii: " ")) }
            let value = UInt64(bitPattern: hash)
            for shift in stride(from: 60, through: 0, by: -4) {
                bytes.append(digits[Int((value >> UInt64(shift)) & 0xF)])
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// An FTS5 query for the rows holding every one of `hashes`: each a quoted term, joined by `AND`.
    static func query(_ hashes: [Int64]) -> String {
        hashes.map { "\"\(document(CollectionOfOne($0)))\"" }.joined(separator: " AND ")
    }

    /// Writes message `id`'s row inside the caller's transaction; a message without tokens gets none.
    static func insert(_ document: String, messageID id: Int64, db: Database) throws {
        guard !document.isEmpty else { return }
        try db.cachedStatement(sql: "INSERT INTO searchIndex (rowid, tokens) VALUES (?, ?)")
            .execute(arguments: [id, document])
    }

    /// Removes message `id`'s row (deleting the message does it through the trigger `messages_searchIndex`).
    static func remove(messageID id: Int64, db: Database) throws {
        try db.execute(sql: "DELETE FROM searchIndex WHERE rowid = ?", arguments: [id])
    }
}
