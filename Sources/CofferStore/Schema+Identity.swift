import GRDB

extension Schema {
    /// Registers migration `v4-identity` (after `v3-summary`): the Message-ID hash index stops being unique, so two
    /// different messages that carry one Message-ID are both stored (a synced message is identified by where it is
    /// on the server and by its content, never by its Message-ID alone). The index stays for threading lookups.
    static func registerIdentityMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v4-identity") { db in
            try db.execute(
                sql: """
                    DROP INDEX messages_message_id;
                    CREATE INDEX messages_message_id ON messages(messageIDHash) WHERE messageIDHash IS NOT NULL;
                    """
            )
        }
    }
}
