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

    /// Registers migration `v11-openpgp-pending` (after `v10-autocrypt-peers`): a partial index of the messages that
    /// have an OpenPGP status (`messages.openPGP` not NULL), so that `openStoredEncryptedMail`, which runs at every
    /// unlock, reads those rows only and never scans the whole table. It only adds an index; an older store keeps
    /// every row. See `docs/STORE.md`, "Schema (migration `v11-openpgp-pending`)".
    static func registerOpenPGPPendingMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v11-openpgp-pending") { db in
            try db.execute(sql: "CREATE INDEX messages_openPGP ON messages(id) WHERE openPGP IS NOT NULL")
        }
    }
}
