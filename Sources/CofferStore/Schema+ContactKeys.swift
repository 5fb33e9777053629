import GRDB

extension Schema {
    /// Registers migration `v9-contact-keys` (after `v8-openpgp-mail`): correspondents' OpenPGP certificates, kept
    /// with the sealed address book. `contactKeys` holds one row per certificate (a keyed lookup hash of the
    /// fingerprint, the clear time it was added, the sealed record); `contactKeyAddresses` ties each to the
    /// address-book entries of its user ids' addresses by the same keyed hash as `addressBook.lookup`. It only adds
    /// tables, so an older store keeps every row. See `docs/STORE.md`, "Schema (migration `v9-contact-keys`)".
    static func registerContactKeysMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v9-contact-keys") { db in
            try db.execute(
                sql: """
                    CREATE TABLE contactKeys (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        lookup BLOB NOT NULL UNIQUE,
                        created INTEGER NOT NULL,
                        record BLOB NOT NULL
                    );
                    CREATE TABLE contactKeyAddresses (
                        address BLOB NOT NULL,
                        keyID INTEGER NOT NULL REFERENCES contactKeys(id) ON DELETE CASCADE,
                        PRIMARY KEY (address, keyID)
                    ) WITHOUT ROWID;
                    CREATE INDEX contactKeyAddresses_key ON contactKeyAddresses(keyID);
                    """
            )
        }
    }
}
