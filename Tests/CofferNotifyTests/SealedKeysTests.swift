import CofferCrypto
import CofferNotify
import CofferPush
import Foundation
import GRDB
import Testing

/// Bytes of `needle` anywhere in the files of `folder` (database, WAL, shared memory).
func folderContains(_ folder: URL, _ needle: [UInt8]) throws -> Bool {
    let names = try FileManager.default.contentsOfDirectory(atPath: folder.path)
    for name in names {
        let data = try [UInt8](Data(contentsOf: folder.appendingPathComponent(name)))
        if data.count >= needle.count,
            (0...(data.count - needle.count)).contains(where: { start in
                data[start..<(start + needle.count)].elementsEqual(needle)
            })
        {
            return true
        }
    }
    return false
}

@Suite struct SealedKeysTests {
    func folder() throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("coffer-notify-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    func session(id: String, keys: WebPush.UserAgentKeys) -> NotifySession {
        let date = Date()
        return NotifySession(
            id: id,
            user: "alice",
            deviceName: "phone",
            tokenHash: SessionToken().hash,
            created: date,
            lastSeen: date,
            expires: date + 3600,
            pushPublicKey: keys.subscription.publicKeyBytes,
            pushAuthSecret: keys.authSecret.withUnsafeBytes { Array($0) }
        )
    }

    /// Canary scan: neither the auth secret nor the public key of any session is in the database files.
    @Test func pushKeysAreNotInTheDatabaseFiles() async throws {
        let folder = try folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let storage = try SQLiteNotifyStorage(
            path: folder.appendingPathComponent("n.sqlite").path,
            masterKey: testMasterKey
        )
        var canaries: [[UInt8]] = []
        for index in 0..<5 {
            let keys = WebPush.UserAgentKeys()
            try await storage.createSession(session(id: "s\(index)", keys: keys))
            canaries.append(keys.authSecret.withUnsafeBytes { Array($0) })
            canaries.append(keys.subscription.publicKeyBytes)
        }
        let read = try #require(try await storage.session(id: "s3"))
        #expect(read.pushAuthSecret == canaries[6])
        #expect(read.pushPublicKey == canaries[7])
        for canary in canaries { #expect(try !folderContains(folder, canary)) }
    }

    @Test func aReusedPublicKeyIsStillRefusedWhenSealed() async throws {
        let folder = try folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let storage = try SQLiteNotifyStorage(
            path: folder.appendingPathComponent("n.sqlite").path,
            masterKey: testMasterKey
        )
        let keys = WebPush.UserAgentKeys()
        try await storage.createSession(session(id: "a", keys: keys))
        await #expect(throws: NotifyError.pushKeyInUse) {
            try await storage.createSession(session(id: "b", keys: keys))
        }
    }

    @Test func anotherMasterKeyCannotOpenTheKeys() async throws {
        let folder = try folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("n.sqlite").path
        do {
            let storage = try SQLiteNotifyStorage(path: path, masterKey: testMasterKey)
            try await storage.createSession(session(id: "a", keys: WebPush.UserAgentKeys()))
        }
        let other = try SQLiteNotifyStorage(
            path: path,
            masterKey: SecretBytes(copying: Array(repeating: UInt8(1), count: 32))
        )
        await #expect(throws: NotifyError.self) { _ = try await other.session(id: "a") }
    }

    @Test func aRecordMovedToAnotherSessionDoesNotOpen() throws {
        let sealer = try SessionKeySealer(masterKey: testMasterKey)
        let keys = WebPush.UserAgentKeys()
        let record = try sealer.seal(
            publicKey: keys.subscription.publicKeyBytes,
            authSecret: keys.authSecret.withUnsafeBytes { Array($0) },
            sessionID: "a"
        )
        #expect(record.count == 1 + 12 + 81 + 16)
        #expect(try sealer.open(record, sessionID: "a").publicKey == keys.subscription.publicKeyBytes)
        #expect(throws: NotifyError.self) { try sealer.open(record, sessionID: "b") }
        var flipped = record
        flipped[20] ^= 1
        #expect(throws: NotifyError.self) { try sealer.open(flipped, sessionID: "a") }
        var otherVersion = record
        otherVersion[0] = 2
        #expect(throws: NotifyError.self) { try sealer.open(otherVersion, sessionID: "a") }
        #expect(throws: NotifyError.self) { try SessionKeySealer(masterKey: SecretBytes(copying: [1, 2, 3])) }
    }

    /// A version 2 database (clear keys) is migrated: its sessions still work and no clear key is left in the file.
    @Test func aVersion2DatabaseIsSealedOnOpenAndLeavesNoClearKey() async throws {
        let folder = try folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("notify.sqlite").path
        let keys = WebPush.UserAgentKeys()
        let publicKey = keys.subscription.publicKeyBytes
        let secret = keys.authSecret.withUnsafeBytes { Array($0) }
        let hash = Array(repeating: UInt8(7), count: 32)
        do {
            var configuration = Configuration()
            configuration.journalMode = .wal
            let pool = try DatabasePool(path: path, configuration: configuration)
            try await pool.write { db in
                try db.execute(
                    sql: """
                        CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
                        INSERT INTO grdb_migrations VALUES ('v1'), ('v2');
                        CREATE TABLE session (
                            id TEXT PRIMARY KEY NOT NULL, user TEXT NOT NULL, device_name TEXT NOT NULL,
                            token_hash BLOB NOT NULL UNIQUE, created REAL NOT NULL, last_seen REAL NOT NULL,
                            expires REAL NOT NULL, revoked INTEGER NOT NULL DEFAULT 0,
                            push_public_key BLOB NOT NULL UNIQUE, push_auth_secret BLOB NOT NULL,
                            push_endpoint TEXT);
                        CREATE INDEX session_user ON session(user);
                        CREATE TABLE pending_message (
                            id TEXT PRIMARY KEY NOT NULL,
                            session_id TEXT NOT NULL REFERENCES session(id) ON DELETE CASCADE,
                            body BLOB NOT NULL, created REAL NOT NULL, expires REAL NOT NULL);
                        CREATE INDEX pending_message_session ON pending_message(session_id, created);
                        """
                )
                try db.execute(
                    sql: "INSERT INTO session VALUES ('s1', 'alice', 'phone', ?, 1.0e9, 1.0e9, 4.0e9, 0, ?, ?, "
                        + "'https://push.example/x')",
                    arguments: [Data(hash), Data(publicKey), Data(secret)]
                )
                try db.execute(
                    sql: "INSERT INTO pending_message VALUES ('m1', 's1', ?, 1.0e9, 4.0e9)",
                    arguments: [Data(repeating: 2, count: 4096)]
                )
            }
        }
        #expect(try folderContains(folder, secret))
        do {
            let storage = try SQLiteNotifyStorage(path: path, masterKey: testMasterKey)
            let session = try #require(try await storage.session(tokenHash: hash))
            #expect(session.pushPublicKey == publicKey)
            #expect(session.pushAuthSecret == secret)
            #expect(session.pushEndpoint == "https://push.example/x")
            let pending = try await storage.pending(sessionID: "s1", now: Date(timeIntervalSince1970: 2e9), limit: 9)
            #expect(pending.map(\.id) == ["m1"])
            await #expect(throws: NotifyError.pushKeyInUse) {
                try await storage.createSession(session)
            }
        }
        #expect(try !folderContains(folder, secret))
        #expect(try !folderContains(folder, publicKey))
    }
}
