import CofferNotify
import Foundation
import GRDB
import Testing

@Suite struct MigrationTests {
    /// A database as version 1 of the schema left it (FORMAT.md "Database v1"), written by hand so the test does
    /// not depend on the migrator it checks.
    @Test func aVersion1DatabaseOpensAndKeepsItsSessionsAndMessages() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("coffer-notify-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("notify.sqlite").path
        let hash = Array(repeating: UInt8(7), count: 32)
        let key = [UInt8(4)] + Array(repeating: UInt8(9), count: 64)
        do {
            let queue = try DatabaseQueue(path: path)
            try await queue.write { db in
                try db.execute(
                    sql: """
                        CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
                        INSERT INTO grdb_migrations VALUES ('v1');
                        CREATE TABLE session (
                            id TEXT PRIMARY KEY NOT NULL, user TEXT NOT NULL, device_name TEXT NOT NULL,
                            token_hash BLOB NOT NULL UNIQUE, created REAL NOT NULL, last_seen REAL NOT NULL,
                            expires REAL NOT NULL, revoked INTEGER NOT NULL DEFAULT 0,
                            push_public_key BLOB NOT NULL UNIQUE, push_auth_secret BLOB NOT NULL);
                        CREATE INDEX session_user ON session(user);
                        CREATE TABLE pending_message (
                            id TEXT PRIMARY KEY NOT NULL,
                            session_id TEXT NOT NULL REFERENCES session(id) ON DELETE CASCADE,
                            body BLOB NOT NULL, created REAL NOT NULL, expires REAL NOT NULL);
                        CREATE INDEX pending_message_session ON pending_message(session_id, created);
                        """
                )
                try db.execute(
                    sql: "INSERT INTO session VALUES ('s1', 'alice', 'phone', ?, 1.0e9, 1.0e9, 4.0e9, 0, ?, ?)",
                    arguments: [Data(hash), Data(key), Data(repeating: 1, count: 16)]
                )
                try db.execute(
                    sql: "INSERT INTO pending_message VALUES ('m1', 's1', ?, 1.0e9, 4.0e9)",
                    arguments: [Data(repeating: 2, count: 4096)]
                )
            }
        }
        let storage = try SQLiteNotifyStorage(path: path, masterKey: testMasterKey)
        let session = try #require(try await storage.session(tokenHash: hash))
        #expect(session.id == "s1")
        #expect(session.user == "alice")
        #expect(session.pushPublicKey == key)
        #expect(session.pushEndpoint == nil)
        let pending = try await storage.pending(sessionID: "s1", now: Date(timeIntervalSince1970: 2e9), limit: 10)
        #expect(pending.map(\.id) == ["m1"])
        #expect(pending.first?.body == Array(repeating: 2, count: 4096))
    }
}
