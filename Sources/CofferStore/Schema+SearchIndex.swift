import GRDB

extension Schema {
    /// Registers migration `v12-search-fts5` (after `v11-openpgp-pending`): blind index format v2. The table
    /// `searchTokens` (one row per token and message, with a second index by message) becomes the FTS5 table
    /// `searchIndex` (one row per message, ``SearchIndex``). The hashes are the same, so every message stays found
    /// by the same words; the rows are copied in the migration's transaction and the old table is dropped (its pages
    /// are zeroed by `secure_delete`). Deleting a message deletes its row through the trigger `messages_searchIndex`.
    /// See `docs/STORE.md`, "Schema (migration `v12-search-fts5`)".
    static func registerSearchIndexMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v12-search-fts5") { db in
            try db.execute(
                sql: """
                    CREATE VIRTUAL TABLE searchIndex USING fts5(tokens, detail=none, columnsize=0, tokenize='ascii');
                    INSERT INTO searchIndex (rowid, tokens)
                        SELECT messageID, group_concat(printf('%016x', token), ' ') FROM searchTokens
                        GROUP BY messageID ORDER BY messageID;
                    DROP TABLE searchTokens;
                    CREATE TRIGGER messages_searchIndex AFTER DELETE ON messages BEGIN
                        DELETE FROM searchIndex WHERE rowid = old.id;
                    END;
                    """
            )
        }
    }

    /// Registers migration `v13-search-page` (after `v12-search-fts5`): the index `messages_id_time`, each message's
    /// time by its id, so that a search orders its hits by date from this small index and reads only the rows of
    /// the page it shows (``MailStore/search(_:limit:offset:)``). It only adds an index of two clear columns; an older
    /// store keeps every row. See `docs/STORE.md`, "Schema (migration `v13-search-page`)".
    static func registerSearchPageMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v13-search-page") { db in
            try db.execute(sql: "CREATE INDEX messages_id_time ON messages(id, time)")
        }
    }
}
