import GRDB

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension Schema {
    /// Registers migration `v5-outbox` (after `v4-identity`): sealed drafts and their attachments, the address book
    /// with its blind prefix index, and the outbox. It only adds tables, so an older store keeps every row. The v1
    /// `contacts` table stays as it was and is no longer written or read (no command ever filled it); the address
    /// book replaces it. See `docs/STORE.md`, "Schema (migration `v5-outbox`)".
    static func registerOutboxMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v5-outbox") { db in
            try db.execute(
                sql: """
                    CREATE TABLE drafts (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        created INTEGER NOT NULL,
                        updated INTEGER NOT NULL,
                        record BLOB NOT NULL
                    );
                    CREATE INDEX drafts_updated ON drafts(updated DESC, id DESC);
                    CREATE TABLE draftAttachments (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        draftID INTEGER NOT NULL REFERENCES drafts(id) ON DELETE CASCADE,
                        position INTEGER NOT NULL,
                        file TEXT NOT NULL UNIQUE,
                        info BLOB NOT NULL
                    );
                    CREATE INDEX draftAttachments_draft ON draftAttachments(draftID, position);
                    CREATE TABLE addressBook (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        lookup BLOB NOT NULL UNIQUE,
                        record BLOB NOT NULL
                    );
                    CREATE TABLE addressBookTokens (
                        token INTEGER NOT NULL,
                        contactID INTEGER NOT NULL REFERENCES addressBook(id) ON DELETE CASCADE,
                        PRIMARY KEY (token, contactID)
                    ) WITHOUT ROWID;
                    CREATE INDEX addressBookTokens_contact ON addressBookTokens(contactID);
                    CREATE TABLE outbox (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        accountID INTEGER NOT NULL,
                        state INTEGER NOT NULL,
                        claimant INTEGER NOT NULL,
                        attempts INTEGER NOT NULL,
                        nextAttempt INTEGER NOT NULL,
                        created INTEGER NOT NULL,
                        file TEXT NOT NULL UNIQUE,
                        record BLOB NOT NULL,
                        lastError BLOB
                    );
                    CREATE INDEX outbox_due ON outbox(state, nextAttempt, id);
                    """
            )
        }
    }
}
