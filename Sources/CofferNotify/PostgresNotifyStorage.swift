import CofferCrypto
import Foundation
import Logging
import PostgresNIO
import ServiceLifecycle

/// ``NotifyStorage`` on PostgreSQL through postgres-nio, for several coffer-notify instances on one database.
///
/// Same records as ``SQLiteNotifyStorage`` (database v3: token hashes, sealed push keys, sealed pushes; FORMAT.md
/// "PostgreSQL"), and the FastSync escrow's records. Every queued message also sends `NOTIFY coffer_notify, '<session id>'`, and ``listen(_:)``
/// hands each one to the caller, so a long poll held by one instance wakes when another queues its push.
public final class PostgresNotifyStorage: NotifyStorage, EscrowRecords {
    /// The channel of the wake-up notifications.
    public static let channel = "coffer_notify"
    private let client: PostgresClient
    private let runner: Task<Void, Never>
    private let sealer: SessionKeySealer
    private let logger: Logger

    /// Connects (the pool runs until ``shutdown()``), creates the tables if missing, and seals push keys with keys
    /// derived from the 32-byte `masterKey`; every instance on one database must share the master key.
    ///
    /// - Throws: `NotifyError.storage` when the database cannot be reached or prepared.
    public init(
        configuration: PostgresClient.Configuration,
        masterKey: SecretBytes,
        logger: Logger = Logger(label: "coffer-notify-postgres")
    ) async throws(NotifyError) {
        sealer = try SessionKeySealer(masterKey: masterKey)
        self.logger = logger
        let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        self.client = client
        runner = Task { await client.run() }
        do {
            try await Self.migrate(client, logger: logger)
        } catch {
            runner.cancel()
            throw .storage("the PostgreSQL database could not be prepared (\(Self.reason(error)))")
        }
    }

    /// Closes the pool.
    public func shutdown() { runner.cancel() }

    deinit { runner.cancel() }

    /// The schema, made under an advisory lock so that instances starting together do not race. Version 4 matches
    /// SQLite's database v4, version 5 adds the escrow tables (SQLite's are in `escrow.sqlite`); later versions add
    /// statements after these.
    static func migrate(_ client: PostgresClient, logger: Logger) async throws {
        try await client.withConnection { connection in
            _ = try await connection.query("BEGIN", logger: logger)
            do {
                _ = try await connection.query("SELECT pg_advisory_xact_lock(7413001)", logger: logger)
                for statement: PostgresQuery in [
                    "CREATE TABLE IF NOT EXISTS notify_schema (version INT NOT NULL)",
                    """
                    CREATE TABLE IF NOT EXISTS session (
                        id TEXT PRIMARY KEY NOT NULL,
                        "user" TEXT NOT NULL,
                        device_name TEXT NOT NULL,
                        token_hash BYTEA NOT NULL UNIQUE,
                        created DOUBLE PRECISION NOT NULL,
                        last_seen DOUBLE PRECISION NOT NULL,
                        expires DOUBLE PRECISION NOT NULL,
                        revoked BOOLEAN NOT NULL DEFAULT FALSE,
                        push_key_id BYTEA NOT NULL UNIQUE,
                        push_keys BYTEA NOT NULL,
                        push_endpoint TEXT
                    )
                    """,
                    #"CREATE INDEX IF NOT EXISTS session_by_user ON session("user")"#,
                    """
                    CREATE TABLE IF NOT EXISTS pending_message (
                        id TEXT PRIMARY KEY NOT NULL,
                        session_id TEXT NOT NULL REFERENCES session(id) ON DELETE CASCADE,
                        body BYTEA NOT NULL,
                        created DOUBLE PRECISION NOT NULL,
                        expires DOUBLE PRECISION NOT NULL
                    )
                    """,
                    "CREATE INDEX IF NOT EXISTS pending_message_session ON pending_message(session_id, created)",
                    "INSERT INTO notify_schema SELECT 3 WHERE NOT EXISTS (SELECT 1 FROM notify_schema)",
                    // Version 4 (SQLite's v4): the token a refresh replaced stays accepted until the new one is used.
                    "ALTER TABLE session ADD COLUMN IF NOT EXISTS previous_token_hash BYTEA",
                    "CREATE INDEX IF NOT EXISTS session_previous_token ON session(previous_token_hash)",
                    "UPDATE notify_schema SET version = 4 WHERE version < 4",
                    // Version 5: the FastSync escrow (FORMAT.md "FastSync escrow v1") in the shared database, so
                    // that a key escrowed through one instance rides the pushes any instance sends.
                    """
                    CREATE TABLE IF NOT EXISTS escrow_user (
                        "user" TEXT PRIMARY KEY NOT NULL,
                        public_key BYTEA NOT NULL,
                        sealed_private_key BYTEA NOT NULL
                    )
                    """,
                    """
                    CREATE TABLE IF NOT EXISTS escrow_kek (
                        session_id TEXT PRIMARY KEY NOT NULL,
                        "user" TEXT NOT NULL,
                        sealed_kek BYTEA NOT NULL,
                        expires BIGINT NOT NULL
                    )
                    """,
                    "UPDATE notify_schema SET version = 5 WHERE version < 5",
                ] {
                    _ = try await connection.query(statement, logger: logger)
                }
                var current = 0
                let rows = try await connection.query("SELECT MAX(version) FROM notify_schema", logger: logger)
                for try await version in rows.decode(Int?.self) { current = version ?? 0 }
                if current > 8 {
                    throw NotifyError.storage("the database has schema version \(current), newer than this build")
                }
                // Version 6 (issue 24, SQLite's v5 and escrow-v2): every user name in its canonical form
                // (``MailUser``, computed here and frozen with this version). A case variant's escrow key pair gives
                // way to the canonical name's, or takes the canonical name when there is none.
                if current < 6 {
                    var users: [String] = []
                    let names = try await connection.query(
                        #"SELECT "user" FROM session UNION SELECT "user" FROM escrow_user UNION SELECT "user" FROM escrow_kek"#,
                        logger: logger
                    )
                    for try await name in names.decode(String.self) { users.append(name) }
                    for user in users.sorted() where MailUser.canonical(user) != user {
                        let canonical = MailUser.canonical(user)
                        for statement: PostgresQuery in [
                            #"UPDATE session SET "user" = \#(canonical) WHERE "user" = \#(user)"#,
                            #"UPDATE escrow_kek SET "user" = \#(canonical) WHERE "user" = \#(user)"#,
                            """
                            UPDATE escrow_user SET "user" = \(canonical) WHERE "user" = \(user)
                            AND NOT EXISTS (SELECT 1 FROM escrow_user WHERE "user" = \(canonical))
                            """,
                            #"DELETE FROM escrow_user WHERE "user" = \#(user)"#,
                        ] {
                            _ = try await connection.query(statement, logger: logger)
                        }
                    }
                    _ = try await connection.query(
                        "UPDATE notify_schema SET version = 6 WHERE version < 6",
                        logger: logger
                    )
                }
                // Version 7 (SQLite's v6): pushes that carry a FastSync key are marked; rows queued before cannot be
                // told apart and are marked as carrying one.
                if current < 7 {
                    for statement: PostgresQuery in [
                        "ALTER TABLE pending_message ADD COLUMN IF NOT EXISTS holds_key BOOLEAN NOT NULL DEFAULT TRUE",
                        "ALTER TABLE pending_message ALTER COLUMN holds_key SET DEFAULT FALSE",
                        "UPDATE notify_schema SET version = 7 WHERE version < 7",
                    ] {
                        _ = try await connection.query(statement, logger: logger)
                    }
                }
                // Version 8 (SQLite's v7): the count of a session's unexpired pushes, made at every event, reads an
                // index of (session_id, expires) instead of fetching each row.
                if current < 8 {
                    for statement: PostgresQuery in [
                        "CREATE INDEX IF NOT EXISTS pending_message_expiry ON pending_message(session_id, expires)",
                        "UPDATE notify_schema SET version = 8 WHERE version < 8",
                    ] {
                        _ = try await connection.query(statement, logger: logger)
                    }
                }
                _ = try await connection.query("COMMIT", logger: logger)
            } catch {
                _ = try? await connection.query("ROLLBACK", logger: logger)
                throw error
            }
        }
    }

    /// A short reason without any value from a row: the SQLSTATE code when the server gave one.
    private static func reason(_ error: any Error) -> String {
        if let error = error as? NotifyError { return error.description }
        if let error = error as? PSQLError {
            if let state = error.serverInfo?[.sqlState] { return "PostgreSQL error \(state)" }
            return "PostgreSQL \(error.code)"
        }
        return "\(type(of: error))"
    }

    private func run<T>(_ what: String, _ body: () async throws -> T) async throws(NotifyError) -> T {
        do {
            return try await body()
        } catch let error as NotifyError {
            throw error
        } catch {
            throw .storage("a \(what) failed (\(Self.reason(error)))")
        }
    }

    private typealias SessionRow = (String, String, String, Data, Double, Double, Double, Bool, Data, String?, Data?)

    private func sessions(_ query: () throws -> PostgresQuery) async throws(NotifyError) -> [NotifySession] {
        try await run("read") {
            var result: [NotifySession] = []
            let rows = try await client.query(try query(), logger: logger)
            for try await row in rows.decode(SessionRow.self) {
                let keys = try sealer.open([UInt8](row.8), sessionID: row.0)
                result.append(
                    NotifySession(
                        id: row.0,
                        user: row.1,
                        deviceName: row.2,
                        tokenHash: [UInt8](row.3),
                        created: Date(timeIntervalSince1970: row.4),
                        lastSeen: Date(timeIntervalSince1970: row.5),
                        expires: Date(timeIntervalSince1970: row.6),
                        revoked: row.7,
                        pushPublicKey: keys.publicKey,
                        pushAuthSecret: keys.authSecret,
                        pushEndpoint: row.9,
                        previousTokenHash: row.10.map { [UInt8]($0) }
                    )
                )
            }
            return result
        }
    }

    /// See ``NotifyStorage/createSession(_:)``.
    public func createSession(_ session: NotifySession) async throws(NotifyError) {
        let keyID = Data(sealer.keyID(session.pushPublicKey))
        let sealed = Data(
            try sealer.seal(publicKey: session.pushPublicKey, authSecret: session.pushAuthSecret, sessionID: session.id)
        )
        let tokenHash = Data(session.tokenHash)
        let inserted = try await run("write") {
            let rows = try await client.query(
                """
                INSERT INTO session (id, "user", device_name, token_hash, created, last_seen, expires, revoked,
                    push_key_id, push_keys, push_endpoint)
                VALUES (\(session.id), \(session.user), \(session.deviceName), \(tokenHash),
                    \(session.created.timeIntervalSince1970), \(session.lastSeen.timeIntervalSince1970),
                    \(session.expires.timeIntervalSince1970), \(session.revoked), \(keyID), \(sealed),
                    \(session.pushEndpoint))
                ON CONFLICT (push_key_id) DO NOTHING RETURNING id
                """,
                logger: logger
            )
            var count = 0
            for try await _ in rows.decode(String.self) { count += 1 }
            return count
        }
        if inserted == 0 { throw .pushKeyInUse }
    }

    private static let select: String =
        #"SELECT id, "user", device_name, token_hash, created, last_seen, expires, revoked, push_keys, push_endpoint, "#
        + "previous_token_hash FROM session "

    /// See ``NotifyStorage/session(tokenHash:)``.
    public func session(tokenHash: [UInt8]) async throws(NotifyError) -> NotifySession? {
        let hash = Data(tokenHash)
        return try await sessions {
            try "\(unescaped: Self.select) WHERE token_hash = \(hash) OR previous_token_hash = \(hash)"
        }.first
    }

    /// See ``NotifyStorage/session(id:)``.
    public func session(id: String) async throws(NotifyError) -> NotifySession? {
        try await sessions { "\(unescaped: Self.select) WHERE id = \(id)" }.first
    }

    /// See ``NotifyStorage/sessions(user:)``.
    public func sessions(user: String) async throws(NotifyError) -> [NotifySession] {
        try await sessions { #"\#(unescaped: Self.select) WHERE "user" = \#(user) ORDER BY created, id"# }
    }

    /// See ``NotifyStorage/allSessions()``.
    public func allSessions() async throws(NotifyError) -> [NotifySession] {
        try await sessions { "\(unescaped: Self.select) ORDER BY created, id" }
    }

    /// See ``NotifyStorage/touch(id:at:)``.
    public func touch(id: String, at date: Date) async throws(NotifyError) {
        try await run("write") {
            _ = try await client.query(
                "UPDATE session SET last_seen = \(date.timeIntervalSince1970) WHERE id = \(id)",
                logger: logger
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
        let hash = Data(tokenHash)
        let previous = Data(previous)
        try await run("write") {
            _ = try await client.query(
                """
                UPDATE session SET token_hash = \(hash), previous_token_hash = \(previous),
                expires = \(expires.timeIntervalSince1970) WHERE id = \(id) AND revoked = FALSE
                """,
                logger: logger
            )
        }
    }

    /// See ``NotifyStorage/forgetPreviousToken(id:)``.
    public func forgetPreviousToken(id: String) async throws(NotifyError) {
        try await run("write") {
            _ = try await client.query(
                "UPDATE session SET previous_token_hash = NULL WHERE id = \(id)",
                logger: logger
            )
        }
    }

    private func count(_ query: () throws -> PostgresQuery) async throws(NotifyError) -> Int {
        try await run("write") {
            var count = 0
            for try await _ in try await client.query(try query(), logger: logger).decode(String.self) { count += 1 }
            return count
        }
    }

    /// See ``NotifyStorage/forgetPushEndpoint(id:)``.
    public func forgetPushEndpoint(id: String) async throws(NotifyError) {
        try await run("write") {
            _ = try await client.query("UPDATE session SET push_endpoint = NULL WHERE id = \(id)", logger: logger)
        }
    }

    /// See ``NotifyStorage/revoke(id:)``.
    public func revoke(id: String) async throws(NotifyError) -> Bool {
        let changed = try await count { "UPDATE session SET revoked = TRUE WHERE id = \(id) RETURNING id" }
        _ = try await count { "DELETE FROM pending_message WHERE session_id = \(id) RETURNING id" }
        return changed > 0
    }

    /// See ``NotifyStorage/enqueue(_:)``; also notifies every listening instance, once per session, when the
    /// transaction commits.
    public func enqueue(_ messages: [PendingMessage]) async throws(NotifyError) {
        guard !messages.isEmpty else { return }
        try await run("write") {
            try await client.withConnection { connection in
                _ = try await connection.query("BEGIN", logger: logger)
                do {
                    for message in messages {
                        let body = Data(message.body)
                        _ = try await connection.query(
                            """
                            INSERT INTO pending_message (id, session_id, body, created, expires, holds_key)
                            VALUES (\(message.id), \(message.sessionID), \(body),
                                \(message.created.timeIntervalSince1970), \(message.expires.timeIntervalSince1970),
                                \(message.holdsKey))
                            """,
                            logger: logger
                        )
                    }
                    for session in Set(messages.map(\.sessionID)).sorted() {
                        _ = try await connection.query("SELECT pg_notify(\(Self.channel), \(session))", logger: logger)
                    }
                    _ = try await connection.query("COMMIT", logger: logger)
                } catch {
                    _ = try? await connection.query("ROLLBACK", logger: logger)
                    throw error
                }
            }
        }
    }

    /// See ``NotifyStorage/pending(sessionID:now:limit:)``.
    public func pending(sessionID: String, now: Date, limit: Int) async throws(NotifyError) -> [PendingMessage] {
        let limit = max(0, limit)
        return try await run("read") {
            let rows = try await client.query(
                """
                SELECT id, session_id, body, created, expires FROM pending_message
                WHERE session_id = \(sessionID) AND expires > \(now.timeIntervalSince1970)
                ORDER BY created, id LIMIT \(limit)
                """,
                logger: logger
            )
            var result: [PendingMessage] = []
            for try await (id, session, body, created, expires) in rows.decode(
                (String, String, Data, Double, Double).self
            ) {
                result.append(
                    PendingMessage(
                        id: id,
                        sessionID: session,
                        body: [UInt8](body),
                        created: Date(timeIntervalSince1970: created),
                        expires: Date(timeIntervalSince1970: expires)
                    )
                )
            }
            return result
        }
    }

    /// See ``NotifyStorage/ack(sessionID:ids:)``.
    public func ack(sessionID: String, ids: [String]) async throws(NotifyError) -> Int {
        try await count {
            "DELETE FROM pending_message WHERE session_id = \(sessionID) AND id = ANY(\(ids)) RETURNING id"
        }
    }

    /// See ``NotifyStorage/liveSessionCount(now:)``.
    public func liveSessionCount(now: Date) async throws(NotifyError) -> Int {
        try await run("read") {
            let rows = try await client.query(
                "SELECT COUNT(*) FROM session WHERE revoked = FALSE AND expires > \(now.timeIntervalSince1970)",
                logger: logger
            )
            var total = 0
            for try await value in rows.decode(Int64.self) { total = Int(value) }
            return total
        }
    }

    /// See ``NotifyStorage/pendingCounts(sessionIDs:now:)``: one query for all of them.
    public func pendingCounts(sessionIDs: [String], now: Date) async throws(NotifyError) -> [String: Int] {
        guard !sessionIDs.isEmpty else { return [:] }
        return try await run("read") {
            let rows = try await client.query(
                """
                SELECT session_id, COUNT(*) FROM pending_message
                WHERE session_id = ANY(\(sessionIDs)) AND expires > \(now.timeIntervalSince1970) GROUP BY session_id
                """,
                logger: logger
            )
            var counts = Dictionary(uniqueKeysWithValues: sessionIDs.map { ($0, 0) })
            for try await (id, count) in rows.decode((String, Int64).self) { counts[id] = Int(count) }
            return counts
        }
    }

    /// See ``NotifyStorage/pendingCount(sessionID:now:)``.
    public func pendingCount(sessionID: String, now: Date) async throws(NotifyError) -> Int {
        try await run("read") {
            let rows = try await client.query(
                """
                SELECT COUNT(*) FROM pending_message
                WHERE session_id = \(sessionID) AND expires > \(now.timeIntervalSince1970)
                """,
                logger: logger
            )
            var total = 0
            for try await value in rows.decode(Int64.self) { total = Int(value) }
            return total
        }
    }

    /// See ``NotifyStorage/deleteKeyPushes(sessionID:)``.
    public func deleteKeyPushes(sessionID: String) async throws(NotifyError) -> Int {
        try await count { "DELETE FROM pending_message WHERE session_id = \(sessionID) AND holds_key RETURNING id" }
    }

    /// See ``NotifyStorage/purgeExpired(now:)``.
    public func purgeExpired(now: Date) async throws(NotifyError) -> Int {
        try await count { "DELETE FROM pending_message WHERE expires <= \(now.timeIntervalSince1970) RETURNING id" }
    }

    /// See ``EscrowRecords/insertEscrowUser(user:publicKey:sealedPrivateKey:)``.
    public func insertEscrowUser(
        user: String,
        publicKey: [UInt8],
        sealedPrivateKey: [UInt8]
    ) async throws(NotifyError) -> [UInt8] {
        let (key, sealed) = (Data(publicKey), Data(sealedPrivateKey))
        return try await run("write") {
            _ = try await client.query(
                """
                INSERT INTO escrow_user ("user", public_key, sealed_private_key) VALUES (\(user), \(key), \(sealed))
                ON CONFLICT ("user") DO NOTHING
                """,
                logger: logger
            )
            let rows = try await client.query(
                #"SELECT public_key FROM escrow_user WHERE "user" = \#(user)"#,
                logger: logger
            )
            var stored = publicKey
            for try await value in rows.decode(Data.self) { stored = [UInt8](value) }
            return stored
        }
    }

    /// See ``EscrowRecords/sealedEscrowPrivateKey(user:)``.
    public func sealedEscrowPrivateKey(user: String) async throws(NotifyError) -> [UInt8]? {
        try await run("read") {
            let rows = try await client.query(
                #"SELECT sealed_private_key FROM escrow_user WHERE "user" = \#(user)"#,
                logger: logger
            )
            var sealed: [UInt8]?
            for try await value in rows.decode(Data.self) { sealed = [UInt8](value) }
            return sealed
        }
    }

    /// See ``EscrowRecords/putEscrowedKEK(sessionID:user:sealed:expires:)``.
    public func putEscrowedKEK(
        sessionID: String,
        user: String,
        sealed: [UInt8],
        expires: Int64
    ) async throws(NotifyError) {
        let sealed = Data(sealed)
        try await run("write") {
            _ = try await client.query(
                """
                INSERT INTO escrow_kek (session_id, "user", sealed_kek, expires)
                VALUES (\(sessionID), \(user), \(sealed), \(expires))
                ON CONFLICT (session_id) DO UPDATE SET "user" = EXCLUDED."user", sealed_kek = EXCLUDED.sealed_kek,
                    expires = EXCLUDED.expires
                """,
                logger: logger
            )
        }
    }

    /// See ``EscrowRecords/escrowedKEK(sessionID:now:)``.
    public func escrowedKEK(
        sessionID: String,
        now: Int64
    ) async throws(NotifyError) -> (
        sealed: [UInt8], expires: Int64
    )? {
        try await run("read") {
            let rows = try await client.query(
                "SELECT sealed_kek, expires FROM escrow_kek WHERE session_id = \(sessionID) AND expires > \(now)",
                logger: logger
            )
            var found: (sealed: [UInt8], expires: Int64)?
            for try await (sealed, expires) in rows.decode((Data, Int64).self) { found = ([UInt8](sealed), expires) }
            return found
        }
    }

    /// See ``EscrowRecords/escrowedKEKs(sessionIDs:now:)``: one query for all of them.
    public func escrowedKEKs(
        sessionIDs: [String],
        now: Int64
    ) async throws(NotifyError) -> [String: (sealed: [UInt8], expires: Int64)] {
        guard !sessionIDs.isEmpty else { return [:] }
        return try await run("read") {
            let rows = try await client.query(
                """
                SELECT session_id, sealed_kek, expires FROM escrow_kek
                WHERE session_id = ANY(\(sessionIDs)) AND expires > \(now)
                """,
                logger: logger
            )
            var found: [String: (sealed: [UInt8], expires: Int64)] = [:]
            for try await (id, sealed, expires) in rows.decode((String, Data, Int64).self) {
                found[id] = ([UInt8](sealed), expires)
            }
            return found
        }
    }

    /// See ``EscrowRecords/deleteEscrowedKEK(sessionID:)``.
    public func deleteEscrowedKEK(sessionID: String) async throws(NotifyError) {
        _ = try await count { "DELETE FROM escrow_kek WHERE session_id = \(sessionID) RETURNING session_id" }
    }

    /// See ``EscrowRecords/purgeEscrowedKEKs(now:)``.
    public func purgeEscrowedKEKs(now: Int64) async throws(NotifyError) -> Int {
        try await count { "DELETE FROM escrow_kek WHERE expires <= \(now) RETURNING session_id" }
    }

    /// Listens on the wake-up channel and calls `wake` with the session id of every message any instance queues,
    /// until the task is cancelled.
    ///
    /// - Throws: `NotifyError.storage` when the listening connection fails.
    public func listen(_ wake: @escaping @Sendable (String) async -> Void) async throws(NotifyError) {
        try await run("listen") {
            try await client.withConnection { connection in
                for try await notification in try await connection.listen(Self.channel) {
                    await wake(notification.payload)
                }
            }
        }
    }
}

/// Wakes this instance's long polls when any instance on the same PostgreSQL database queues a push
/// (`LISTEN coffer_notify`); reconnects after a failure until the service shuts down.
public struct PostgresWakeService: Service {
    /// The shared database.
    public let storage: PostgresNotifyStorage
    /// The service whose waiters are woken.
    public let service: NotifyService

    /// Creates the listener.
    public init(storage: PostgresNotifyStorage, service: NotifyService) {
        self.storage = storage
        self.service = service
    }

    /// Listens until graceful shutdown or cancellation.
    public func run() async throws {
        let signal = service.signal
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                try await cancelWhenGracefulShutdown {
                    try await storage.listen { sessionID in await signal.wake(sessionID: sessionID) }
                }
            } catch {
                if Task.isCancelled || Task.isShuttingDownGracefully { return }
                service.logger.error("the PostgreSQL wake-up listener failed: \(error)")
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }
}
