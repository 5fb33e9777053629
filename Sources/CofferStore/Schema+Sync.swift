import GRDB

extension Schema {
    /// Registers migration `v2-sync` (after `v1`): the IMAP account record, the server folders a sync follows and
    /// where each synced message lives on the server. It only adds tables, so a `v1` store keeps every row.
    static func registerSyncMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v2-sync") { db in
            try db.execute(
                sql: """
                    CREATE TABLE accountServers (
                        accountID INTEGER PRIMARY KEY NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                        config BLOB NOT NULL
                    );
                    CREATE TABLE syncFolders (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        accountID INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                        lookup BLOB NOT NULL,
                        name BLOB NOT NULL,
                        uidValidity INTEGER NOT NULL,
                        highestUID INTEGER NOT NULL,
                        highestModSeq INTEGER NOT NULL,
                        UNIQUE (accountID, lookup)
                    );
                    CREATE TABLE syncLocations (
                        folderID INTEGER NOT NULL REFERENCES syncFolders(id) ON DELETE CASCADE,
                        uid INTEGER NOT NULL,
                        messageID INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
                        serverFlags INTEGER NOT NULL,
                        PRIMARY KEY (folderID, uid)
                    ) WITHOUT ROWID;
                    CREATE INDEX syncLocations_message ON syncLocations(messageID);
                    """
            )
        }
    }
}
