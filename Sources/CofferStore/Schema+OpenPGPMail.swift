import GRDB

extension Schema {
    /// Registers migration `v8-openpgp-mail` (after `v7-openpgp-keys`): the nullable sealed column
    /// `messages.openPGP`, what the store found of OpenPGP on a message when it stored it (``MessageOpenPGP``). Older
    /// rows, and every message that came without OpenPGP encryption, keep NULL there, so an older store keeps every
    /// row unchanged. See `docs/STORE.md`, "Schema (migration `v8-openpgp-mail`)".
    static func registerOpenPGPMailMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v8-openpgp-mail") { db in
            try db.execute(sql: "ALTER TABLE messages ADD COLUMN openPGP BLOB")
        }
    }
}
