import GRDB

extension Schema {
    /// Registers migration `v6-attachment-files` (after `v5-outbox`): an attachment's body may live in a sealed file
    /// of its own in `outgoing/` (the streaming AEAD of draft attachments and outbox messages) instead of one sealed
    /// cell, so a large attachment is never whole in memory or written to SQLite page by page. It adds the nullable
    /// clear column `attachments.file` (the file's name; NULL when the body is in `body`, as in every older row) and a
    /// unique index on it, so an older store keeps every row unchanged. See `docs/STORE.md`, "Schema (migration
    /// `v6-attachment-files`)".
    static func registerAttachmentFilesMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v6-attachment-files") { db in
            try db.execute(
                sql: """
                    ALTER TABLE attachments ADD COLUMN file TEXT;
                    CREATE UNIQUE INDEX attachments_file ON attachments(file) WHERE file IS NOT NULL;
                    """
            )
        }
    }
}
