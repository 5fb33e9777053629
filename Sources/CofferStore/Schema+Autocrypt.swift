import GRDB

extension Schema {
    /// Registers migration `v10-autocrypt-peers` (after `v9-contact-keys`): Autocrypt Level 1 peer state, one row per
    /// correspondent address that sent an `Autocrypt` header (a keyed lookup hash of the lower-cased address and
    /// the sealed record: address, last seen, Autocrypt timestamp, prefer-encrypt, certificate). It only adds a
    /// table, so an older store keeps every row. See `docs/STORE.md`, "Schema (migration `v10-autocrypt-peers`)".
    static func registerAutocryptMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v10-autocrypt-peers") { db in
            try db.execute(
                sql: """
                    CREATE TABLE autocryptPeers (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        lookup BLOB NOT NULL UNIQUE,
                        record BLOB NOT NULL
                    );
                    """
            )
        }
    }
}
