import GRDB

extension Schema {
    /// Registers migration `v7-openpgp-keys` (after `v6-attachment-files`): the user's own OpenPGP keys, each row a
    /// keyed lookup hash of the fingerprint, the clear time it was added and whether it is the default, the sealed
    /// key record (fingerprint, user ids, certificate) and the sealed secret key. It only adds a table, so an older
    /// store keeps every row. See `docs/STORE.md`, "Schema (migration `v7-openpgp-keys`)".
    static func registerOpenPGPKeysMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v7-openpgp-keys") { db in
            try db.execute(
                sql: """
                    CREATE TABLE openPGPKeys (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        lookup BLOB NOT NULL UNIQUE,
                        created INTEGER NOT NULL,
                        isDefault INTEGER NOT NULL,
                        record BLOB NOT NULL,
                        secretKey BLOB NOT NULL
                    );
                    CREATE UNIQUE INDEX openPGPKeys_default ON openPGPKeys(isDefault) WHERE isDefault = 1;
                    """
            )
        }
    }
}
