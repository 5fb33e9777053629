import CofferCrypto
import Foundation
import GRDB

/// ``NotifyStorage`` on GRDB/SQLite: one file (WAL mode), frozen migrations.
///
/// The tables hold token hashes, never tokens, pending messages only as RFC 8291 ciphertext, and each session's
/// push keys only sealed under the master key (``SessionKeySealer``, migration `v3`). SQLite's `secure_delete` is
/// on, so rows rewritten by a migration leave no old bytes in free pages.
public final class SQLiteNotifyStorage: NotifyStorage {
    private let database: DatabasePool
    private let sealer: SessionKeySealer

    /// Opens (creating if needed) the database at `path`, applies the migrations, and seals push keys with keys
    /// derived from the 32-byte `masterKey` (``NotifyHome/masterKey()``).
    ///
    /// - Throws: `NotifyError.storage` when the file cannot be opened or migrated, `.configuration` for a master key
    ///   that is not 32 bytes.
    public init(path: String, masterKey: SecretBytes) throws(NotifyError) {
        let sealer = try SessionKeySealer(masterKey: masterKey)
        self.sealer = sealer
        do {
            var configuration = Configuration()
            configuration.foreignKeysEnabled = true
            configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA secure_delete = ON") }
            database = try DatabasePool(path: path, configuration: configuration)
            let applied = try database.read { db in try Self.migrator(sealer: sealer).appliedIdentifiers(db) }
            try Self.migrator(sealer: sealer).migrate(database)
            // GRDB opens a pool in WAL mode with `synchronous = NORMAL`, which syncs the WAL only at checkpoints: a
            // commit could be lost in a power cut after its event was answered. FULL syncs the WAL at every commit
            // (shared by every event of a ``GroupCommit`` batch). The writer is the pool's one writing connection.
            try database.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
            if !applied.isEmpty && !applied.contains("v3") {
                // Old rows held clear push keys: move the rewritten pages out of the WAL into the zeroed file.
                try database.writeWithoutTransaction { db in
                    try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
                }
            }
        } catch let error as NotifyError {
            throw error
        } catch {
            throw .storage("the database at \(path) could not be opened (\(Self.reason(error)))")
        }
    }

    /// The migrations. Frozen: a shipped migration is never edited, only followed by a new one.
    static func migrator(sealer: SessionKeySealer) -> DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(
                sql: """
                    CREATE TABLE session (
                        id TEXT PRIMARY KEY NOT NULL,
                        user TEXT NOT NULL,
                        device_name TEXT NOT NULL,
                        token_hash BLOB NOT NULL UNIQUE,
                        created REAL NOT NULL,
                        last_seen REAL NOT NULL,
                        expires REAL NOT NULL,
                        revoked INTEGER NOT NULL DEFAULT 0,
                        push_public_key BLOB NOT NULL UNIQUE,
                        push_auth_secret BLOB NOT NULL
                    );
                    CREATE INDEX session_user ON session(user);
                    CREATE TABLE pending_message (
                        id TEXT PRIMARY KEY NOT NULL,
                        session_id TEXT NOT NULL REFERENCES session(id) ON DELETE CASCADE,
                        body BLOB NOT NULL,
                        created REAL NOT NULL,
                        expires REAL NOT NULL
                    );
                    CREATE INDEX pending_message_session ON pending_message(session_id, created);
                    """
            )
        }
        migrator.registerMigration("v2") { db in
            try db.execute(sql: "ALTER TABLE session ADD COLUMN push_endpoint TEXT")
        }
        // v3: the push keys leave the clear. `push_key_id` (HMAC of the public key) keeps keys unique; `push_keys`
        // is the sealed record. Old rows are sealed here; the table is rebuilt because SQLite cannot drop the old
        // UNIQUE NOT NULL columns (foreign keys are off during a GRDB migration and checked after it).
        migrator.registerMigration("v3") { db in
            try db.execute(
                sql: """
                    CREATE TABLE session_v3 (
                        id TEXT PRIMARY KEY NOT NULL,
                        user TEXT NOT NULL,
                        device_name TEXT NOT NULL,
                        token_hash BLOB NOT NULL UNIQUE,
                        created REAL NOT NULL,
                        last_seen REAL NOT NULL,
                        expires REAL NOT NULL,
                        revoked INTEGER NOT NULL DEFAULT 0,
                        push_key_id BLOB NOT NULL UNIQUE,
                        push_keys BLOB NOT NULL,
                        push_endpoint TEXT
                    )
                    """
            )
            let rows = try Row.fetchAll(
                db,
                sql: "SELECT id, user, device_name, token_hash, created, last_seen, expires, revoked, "
                    + "push_public_key, push_auth_secret, push_endpoint FROM session"
            )
            for row in rows {
                let id: String = row["id"]
                let publicKey = [UInt8](row["push_public_key"] as Data)
                let sealed = try sealer.seal(
                    publicKey: publicKey,
                    authSecret: [UInt8](row["push_auth_secret"] as Data),
                    sessionID: id
                )
                try db.execute(
                    sql: "INSERT INTO session_v3 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    arguments: [
                        id, row["user"], row["device_name"], row["token_hash"], row["created"], row["last_seen"],
                        row["expires"], row["revoked"], Data(sealer.keyID(publicKey)), Data(sealed),
                        row["push_endpoint"],
                    ]
                )
            }
            try db.execute(
                sql: """
                    DROP TABLE session;
                    ALTER TABLE session_v3 RENAME TO session;
                    CREATE INDEX session_user ON session(user);
                    """
            )
        }
        // v4: the token a refresh replaced stays accepted until the new one is used.
        migrator.registerMigration("v4") { db in
            try db.execute(
                sql: """
                    ALTER TABLE session ADD COLUMN previous_token_hash BLOB;
                    CREATE INDEX session_previous_token ON session(previous_token_hash);
                    """
            )
        }
        // v5 (issue 24): one identity per user. Every user name becomes its canonical form (``MailUser``), so that
        // sessions registered under a case variant (`USER1`) join the user's own (`user1`) and show, revoke and
        // receive with them. The canonical form is computed here, frozen with this migration.
        migrator.registerMigration("v5") { db in
            let users = try String.fetchAll(db, sql: "SELECT DISTINCT user FROM session")
            for user in users where MailUser.canonical(user) != user {
                try db.execute(
                    sql: "UPDATE session SET user = ? WHERE user = ?",
                    arguments: [MailUser.canonical(user), user]
                )
            }
        }
        // v6 (issue 24): pushes that carry a FastSync key are marked, so that deleting the key deletes them. Rows
        // queued before cannot be told apart and are marked as carrying one.
        migrator.registerMigration("v6") { db in
            try db.execute(
                sql: """
                    ALTER TABLE pending_message ADD COLUMN holds_key INTEGER NOT NULL DEFAULT 0;
                    UPDATE pending_message SET holds_key = 1;
                    """
            )
        }
        // v7: the count of a session's unexpired pushes (at every event) reads an index, not every row's 4 KiB body
        // (SQLite reaches `expires`, stored after `body`, only through the body's overflow pages).
        migrator.registerMigration("v7") { db in
            try db.execute(sql: "CREATE INDEX pending_message_expiry ON pending_message(session_id, expires)")
        }
        return migrator
    }

    /// A short reason without any value from a row (GRDB's messages may quote SQL, never bound values).
    private static func reason(_ error: any Error) -> String {
        if let error = error as? DatabaseError { return "SQLite error \(error.resultCode.rawValue)" }
        return "\(type(of: error))"
    }

    private func read<T: Sendable>(_ body: @Sendable @escaping (Database) throws -> T) async throws(NotifyError) -> T {
        do {
            return try await database.read(body)
        } catch let error as NotifyError {
            throw error
        } catch {
            throw .storage("a read failed (\(Self.reason(error)))")
        }
    }

    private func write<T: Sendable>(_ body: @Sendable @escaping (Database) throws -> T) async throws(NotifyError) -> T {
        do {
            return try await database.write(body)
        } catch let error as NotifyError {
            throw error
        } catch {
            throw .storage("a write failed (\(Self.reason(error)))")
        }
    }

    private static let sessionColumns =
        "id, user, device_name, token_hash, created, last_seen, expires, revoked, push_key_id, push_keys, "
        + "push_endpoint"
    private static let selectedColumns = sessionColumns + ", previous_token_hash"

    private static func session(_ row: Row, _ sealer: SessionKeySealer) throws -> NotifySession {
        let id: String = row["id"]
        let keys = try sealer.open([UInt8](row["push_keys"] as Data), sessionID: id)
        return NotifySession(
            id: row["id"],
            user: row["user"],
            deviceName: row["device_name"],
            tokenHash: [UInt8](row["token_hash"] as Data),
            created: Date(timeIntervalSince1970: row["created"]),
            lastSeen: Date(timeIntervalSince1970: row["last_seen"]),
            expires: Date(timeIntervalSince1970: row["expires"]),
            revoked: row["revoked"],
            pushPublicKey: keys.publicKey,
            pushAuthSecret: keys.authSecret,
            pushEndpoint: row["push_endpoint"],
            previousTokenHash: (row["previous_token_hash"] as Data?).map { [UInt8]($0) }
        )
    }

    /// See ``NotifyStorage/createSession(_:)``.
    public func createSession(_ session: NotifySession) async throws(NotifyError) {
        let keyID = sealer.keyID(session.pushPublicKey)
        let sealed = try sealer.seal(
            publicKey: session.pushPublicKey,
            authSecret: session.pushAuthSecret,
            sessionID: session.id
        )
        try await write { db in
            let used = try Bool.fetchOne(
                db,
                sql: "SELECT EXISTS(SELECT 1 FROM session WHERE push_key_id = ?)",
                arguments: [Data(keyID)]
            )
            if used == true { throw NotifyError.pushKeyInUse }
            try db.execute(
                sql: "INSERT INTO session (\(Self.sessionColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                arguments: [
                    session.id, session.user, session.deviceName, Data(session.tokenHash),
                    session.created.timeIntervalSince1970, session.lastSeen.timeIntervalSince1970,
                    session.expires.timeIntervalSince1970, session.revoked, Data(keyID), Data(sealed),
                    session.pushEndpoint,
                ]
            )
        }
    }

    /// See ``NotifyStorage/session(tokenHash:)``.
    public func session(tokenHash: [UInt8]) async throws(NotifyError) -> NotifySession? {
        try await read { db in
            try Row.fetchOne(
                db,
                sql: "SELECT \(Self.selectedColumns) FROM session WHERE token_hash = ? OR previous_token_hash = ?",
                arguments: [Data(tokenHash), Data(tokenHash)]
            ).map { try Self.session($0, self.sealer) }
        }
    }

    /// See ``NotifyStorage/session(id:)``.
    public func session(id: String) async throws(NotifyError) -> NotifySession? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT \(Self.selectedColumns) FROM session WHERE id = ?", arguments: [id])
                .map { try Self.session($0, self.sealer) }
        }
    }

    /// See ``NotifyStorage/sessions(user:)``.
    public func sessions(user: String) async throws(NotifyError) -> [NotifySession] {
        try await read { db in
            try Row.fetchAll(
                db,
                sql: "SELECT \(Self.selectedColumns) FROM session WHERE user = ? ORDER BY created, id",
                arguments: [user]
            ).map { try Self.session($0, self.sealer) }
        }
    }

    /// See ``NotifyStorage/allSessions()``.
    public func allSessions() async throws(NotifyError) -> [NotifySession] {
        try await read { db in
            try Row.fetchAll(db, sql: "SELECT \(Self.selectedColumns) FROM session ORDER BY created, id")
                .map { try Self.session($0, self.sealer) }
        }
    }

    /// See ``NotifyStorage/touch(id:at:)``.
    public func touch(id: String, at date: Date) async throws(NotifyError) {
        try await write { db in
            try db.execute(
                sql: "UPDATE session SET last_seen = ? WHERE id = ?",
                arguments: [date.timeIntervalSince1970, id]
            )
        }
    }

    /// See ``NotifyStorage/replaceToken(id:tokenHash:previous:expires:)``.
    public func replaceToken(
        id: String,
        tokenHash: [UInt8],
        previous: [UInt8],
        expires: Date
    ) async throws(NotifyError) {
        try await write { db in
            try db.execute(
                sql: "UPDATE session SET token_hash = ?, previous_token_hash = ?, expires = ? WHERE id = ? "
                    + "AND revoked = 0",
                arguments: [Data(tokenHash), Data(previous), expires.timeIntervalSince1970, id]
            )
        }
    }

    /// See ``NotifyStorage/forgetPreviousToken(id:)``.
    public func forgetPreviousToken(id: String) async throws(NotifyError) {
        try await write { db in
            try db.execute(sql: "UPDATE session SET previous_token_hash = NULL WHERE id = ?", arguments: [id])
        }
    }

    /// See ``NotifyStorage/forgetPushEndpoint(id:)``.
    public func forgetPushEndpoint(id: String) async throws(NotifyError) {
        try await write { db in
            try db.execute(sql: "UPDATE session SET push_endpoint = NULL WHERE id = ?", arguments: [id])
        }
    }

    /// See ``NotifyStorage/revoke(id:)``.
    public func revoke(id: String) async throws(NotifyError) -> Bool {
        try await write { db in
            try db.execute(sql: "UPDATE session SET revoked = 1 WHERE id = ?", arguments: [id])
            let changed = db.changesCount > 0
            try db.execute(sql: "DELETE FROM pending_message WHERE session_id = ?", arguments: [id])
            return changed
        }
    }

    /// See ``NotifyStorage/enqueue(_:)``.
    public func enqueue(_ messages: [PendingMessage]) async throws(NotifyError) {
        guard !messages.isEmpty else { return }
        try await write { db in
            let insert = try db.cachedStatement(
                sql: "INSERT INTO pending_message (id, session_id, body, created, expires, holds_key) "
                    + "VALUES (?, ?, ?, ?, ?, ?)"
            )
            for message in messages {
                try insert.execute(arguments: [
                    message.id, message.sessionID, Data(message.body), message.created.timeIntervalSince1970,
                    message.expires.timeIntervalSince1970, message.holdsKey,
                ])
            }
        }
    }

    /// See ``NotifyStorage/pending(sessionID:now:limit:)``.
    public func pending(sessionID: String, now: Date, limit: Int) async throws(NotifyError) -> [PendingMessage] {
        try await read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT id, session_id, body, created, expires FROM pending_message
                    WHERE session_id = ? AND expires > ? ORDER BY created, id LIMIT ?
                    """,
                arguments: [sessionID, now.timeIntervalSince1970, max(0, limit)]
            ).map { row in
                PendingMessage(
                    id: row["id"],
                    sessionID: row["session_id"],
                    body: [UInt8](row["body"] as Data),
                    created: Date(timeIntervalSince1970: row["created"]),
                    expires: Date(timeIntervalSince1970: row["expires"])
                )
            }
        }
    }

    /// See ``NotifyStorage/pendingCount(sessionID:now:)``.
    public func pendingCount(sessionID: String, now: Date) async throws(NotifyError) -> Int {
        try await read { db in
            try Int.fetchOne(
                db,
                sql: "SELECT COUNT(*) FROM pending_message WHERE session_id = ? AND expires > ?",
                arguments: [sessionID, now.timeIntervalSince1970]
            ) ?? 0
        }
    }

    /// See ``NotifyStorage/pendingCounts(sessionIDs:now:)``: one read for all of them.
    public func pendingCounts(sessionIDs: [String], now: Date) async throws(NotifyError) -> [String: Int] {
        guard !sessionIDs.isEmpty else { return [:] }
        return try await read { db in
            let count = try db.cachedStatement(
                sql: "SELECT COUNT(*) FROM pending_message WHERE session_id = ? AND expires > ?"
            )
            var counts: [String: Int] = [:]
            for id in sessionIDs {
                counts[id] = try Int.fetchOne(count, arguments: [id, now.timeIntervalSince1970]) ?? 0
            }
            return counts
        }
    }

    /// Whether the writer syncs the WAL at every commit (`PRAGMA synchronous` is FULL, 2, or EXTRA, 3).
    package func syncsEveryCommit() async throws(NotifyError) -> Bool {
        try await write { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? 0 } >= 2
    }

    /// See ``NotifyStorage/ack(sessionID:ids:)``.
    public func ack(sessionID: String, ids: [String]) async throws(NotifyError) -> Int {
        try await write { db in
            var deleted = 0
            for id in ids {
                try db.execute(
                    sql: "DELETE FROM pending_message WHERE session_id = ? AND id = ?",
                    arguments: [sessionID, id]
                )
                deleted += db.changesCount
            }
            return deleted
        }
    }

    /// See ``NotifyStorage/liveSessionCount(now:)``.
    public func liveSessionCount(now: Date) async throws(NotifyError) -> Int {
        try await read { db in
            try Int.fetchOne(
                db,
                sql: "SELECT COUNT(*) FROM session WHERE revoked = 0 AND expires > ?",
                arguments: [now.timeIntervalSince1970]
            ) ?? 0
        }
    }

    /// See ``NotifyStorage/deleteKeyPushes(sessionID:)``.
    public func deleteKeyPushes(sessionID: String) async throws(NotifyError) -> Int {
        try await write { db in
            try db.execute(
                sql: "DELETE FROM pending_message WHERE session_id = ? AND holds_key = 1",
                arguments: [sessionID]
            )
            return db.changesCount
        }
    }

    /// See ``NotifyStorage/purgeExpired(now:)``.
    public func purgeExpired(now: Date) async throws(NotifyError) -> Int {
        try await write { db in
            try db.execute(
                sql: "DELETE FROM pending_message WHERE expires <= ?",
                arguments: [now.timeIntervalSince1970]
            )
            return db.changesCount
        }
    }
}
