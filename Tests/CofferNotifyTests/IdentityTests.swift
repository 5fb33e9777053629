import CofferIMAP
import CofferNotify
import CofferPush
import Foundation
import GRDB
import Hummingbird
import HummingbirdTesting
import PostgresNIO
import Testing

/// Issue 24, finding 2: one canonical user. A case variant of the name is the same user (its sessions are listed,
/// revoked and pushed to with the user's own); old rows are migrated; every other session can be revoked at once.
@Suite struct IdentityTests {
    @Test func aCaseVariantOfTheUserNameIsTheSameUser() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        try await harness.application.test(.router) { client in
            let own = try await client.register(Device().registration(user: "alice", password: "alice-pw"))
            // Before the fix this was checked with the mail server as typed and stored as "ALICE": a hidden session.
            let variant = try await client.register(
                Device().registration(user: "ALICE", password: "alice-pw", name: "variant")
            )
            #expect(try await harness.storage.session(id: variant.sessionID)?.user == "alice")
            let listed = try await client.execute(uri: "/v1/sessions", method: .get, headers: bearer(own.token)) {
                try decode(SessionList.self, $0.body).sessions.map(\.id)
            }
            #expect(Set(listed) == [own.sessionID, variant.sessionID])
            // An event for any spelling reaches both.
            let queued = try await harness.service.handle(
                DovecotEvent(user: "Alice", folder: "INBOX", uid: 1, from: "a@example.org", subject: "hi")
            )
            #expect(queued == 2)
            try await client.execute(
                uri: "/v1/sessions/\(variant.sessionID)",
                method: .delete,
                headers: bearer(own.token)
            ) { #expect($0.status == .noContent) }
            try await client.execute(uri: "/v1/sessions", method: .get, headers: bearer(variant.token)) {
                #expect($0.status == .unauthorized)
            }
        }
    }

    /// On the binary and a real Dovecot, which logs `ALICE` in as `alice`: a registration under a case variant writes
    /// the canonical name into the METADATA entry by which Dovecot's push driver names the user. The binary before
    /// the fix wrote `user=ALICE`, and the next mail to alice was queued only for that hidden session.
    @Test func aCaseVariantRegistrationLeavesTheCanonicalUserInDovecotsMetadata() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: NotifyBinary.path), "build coffer-notify first")
        let dovecot = try await NotifyDovecot.start()
        defer { dovecot.stop() }
        let server = try await LiveNotify(arguments: try dovecot.serveArguments())
        defer { server.stop() }
        let variant = NotifyDovecot.user.uppercased()
        #expect(variant != NotifyDovecot.user)
        let status = try await ClientOriginTests.register(
            server,
            user: variant,
            password: NotifyDovecot.password,
            from: "127.0.0.9"
        )
        #expect(status == 201)
        let imap = try await IMAPClient.connect(try dovecot.configuration())
        try await imap.login(user: NotifyDovecot.user, password: NotifyDovecot.password)
        let entries = try await imap.getMetadata(mailbox: "", entries: [IMAPMailAuthenticator.dovecotPushEntry])
        await imap.logout()
        let values = entries.map { String(decoding: $0.value ?? [], as: UTF8.self) }
        #expect(values == ["user=\(NotifyDovecot.user)"])
    }

    @Test func theCanonicalFormIsNFCAndLowercase() {
        #expect(MailUser.canonical("USER1") == "user1")
        #expect(MailUser.canonical("Ren\u{0065}\u{0301}@Example.ORG") == "ren\u{00e9}@example.org")
        #expect(MailUser.canonical("ren\u{00e9}") == MailUser.canonical("RENE\u{0301}"))
    }

    @Test func revokeOthersEndsEverySessionButTheCallers() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        try await harness.application.test(.router) { client in
            let keep = try await client.register(Device().registration(user: "alice", password: "alice-pw"))
            let lost = try await client.register(Device().registration(user: "alice", password: "alice-pw"))
            let stolen = try await client.register(Device().registration(user: "Alice", password: "alice-pw"))
            let bob = try await client.register(Device().registration(user: "bob", password: "bob-pw"))
            let (status, body) = try await client.execute(
                uri: "/v1/sessions/revoke-others",
                method: .post,
                headers: bearer(keep.token)
            ) { ($0.status, $0.body) }
            #expect(status == .ok)
            #expect(try decode(CountResponse.self, body).count == 2)
            for token in [lost.token, stolen.token] {
                try await client.execute(uri: "/v1/sessions", method: .get, headers: bearer(token)) {
                    #expect($0.status == .unauthorized)
                }
            }
            for token in [keep.token, bob.token] {
                try await client.execute(uri: "/v1/sessions", method: .get, headers: bearer(token)) {
                    #expect($0.status == .ok)
                }
            }
        }
    }

    @Test func theAccountPageRevokesEverySessionOfTheUser() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        try await harness.application.test(.router) { client in
            let one = try await client.register(Device().registration(user: "alice", password: "alice-pw"))
            let two = try await client.register(Device().registration(user: "ALICE", password: "alice-pw"))
            let bob = try await client.register(Device().registration(user: "bob", password: "bob-pw"))
            let (browser, csrf) = try await client.signIn(user: "Alice", password: "alice-pw")
            try await client.execute(uri: "/account", method: .get, headers: browser.headers) { response in
                let page = String(buffer: response.body)
                #expect(page.contains("s-\(one.sessionID)"))
                #expect(page.contains("s-\(two.sessionID)"))
                #expect(page.contains("/account/revoke-all"))
            }
            // Without the CSRF token nothing happens.
            try await client.execute(
                uri: "/account/revoke-all",
                method: .post,
                headers: browser.headers,
                body: ByteBuffer(string: "csrf=nope")
            ) { #expect($0.status == .forbidden) }
            #expect(try await harness.storage.session(id: one.sessionID)?.revoked == false)
            try await client.execute(
                uri: "/account/revoke-all",
                method: .post,
                headers: browser.headers,
                body: ByteBuffer(string: "csrf=\(csrf)")
            ) { #expect($0.status == .seeOther) }
            #expect(try await harness.storage.session(id: one.sessionID)?.revoked == true)
            #expect(try await harness.storage.session(id: two.sessionID)?.revoked == true)
            #expect(try await harness.storage.session(id: bob.sessionID)?.revoked == false)
        }
    }

    /// A database whose rows were written before v5 (the schema is v4's; only the names differ): reopening runs v5.
    @Test func migrationV5GivesOldRowsTheCanonicalName() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("coffer-notify-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("notify.sqlite").path
        do {
            let storage = try SQLiteNotifyStorage(path: path, masterKey: testMasterKey)
            let date = Date()
            for (id, user) in [("s1", "user1"), ("s2", "USER1"), ("s3", "Bob")] {
                try await storage.createSession(
                    NotifySession(
                        id: id,
                        user: user,
                        deviceName: "phone",
                        tokenHash: SessionToken().hash,
                        created: date,
                        lastSeen: date,
                        expires: date + 3600,
                        pushPublicKey: WebPush.UserAgentKeys().subscription.publicKeyBytes,
                        pushAuthSecret: Array(repeating: 1, count: 16)
                    )
                )
            }
        }
        let queue = try DatabaseQueue(path: path)
        try await queue.write { db in try db.execute(sql: "DELETE FROM grdb_migrations WHERE identifier = 'v5'") }
        try queue.close()
        let storage = try SQLiteNotifyStorage(path: path, masterKey: testMasterKey)
        #expect(try await storage.sessions(user: "user1").map(\.id) == ["s1", "s2"])
        #expect(try await storage.sessions(user: "USER1").isEmpty)
        #expect(try await storage.sessions(user: "bob").map(\.id) == ["s3"])
    }

    @Test func escrowMigrationKeepsTheCanonicalUsersKey() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("coffer-notify-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("escrow.sqlite").path
        do {
            let records = try SQLiteEscrowRecords(path: path)
            _ = try await records.insertEscrowUser(user: "user1", publicKey: [1], sealedPrivateKey: [1])
            _ = try await records.insertEscrowUser(user: "USER1", publicKey: [2], sealedPrivateKey: [2])
            _ = try await records.insertEscrowUser(user: "Bob", publicKey: [3], sealedPrivateKey: [3])
            try await records.putEscrowedKEK(sessionID: "s2", user: "USER1", sealed: [9], expires: 4_000_000_000)
        }
        let queue = try DatabaseQueue(path: path)
        try await queue.write { db in
            try db.execute(sql: "DELETE FROM grdb_migrations WHERE identifier = 'escrow-v2'")
        }
        let records = try SQLiteEscrowRecords(path: path)
        #expect(try await records.sealedEscrowPrivateKey(user: "user1") == [1])
        #expect(try await records.sealedEscrowPrivateKey(user: "USER1") == nil)
        #expect(try await records.sealedEscrowPrivateKey(user: "bob") == [3])
        #expect(try await records.sealedEscrowPrivateKey(user: "Bob") == nil)
        let users = try await queue.read { db in try String.fetchAll(db, sql: "SELECT user FROM escrow_kek") }
        #expect(users == ["user1"])
        try queue.close()
    }

    /// PostgreSQL's version 6: a database left at version 5 with case variants gets canonical names on open.
    @Test(.enabled(if: Engine.postgresAddress != nil)) func postgresVersion6GivesOldRowsTheCanonicalName() async throws
    {
        let configuration = try await Engine.freshPostgresDatabase()
        let first = try await PostgresNotifyStorage(
            configuration: configuration,
            masterKey: testMasterKey,
            logger: Engine.quietLogger
        )
        let date = Date()
        for (id, user) in [("p1", "user1"), ("p2", "USER1")] {
            try await first.createSession(
                NotifySession(
                    id: id,
                    user: user,
                    deviceName: "phone",
                    tokenHash: SessionToken().hash,
                    created: date,
                    lastSeen: date,
                    expires: date + 3600,
                    pushPublicKey: WebPush.UserAgentKeys().subscription.publicKeyBytes,
                    pushAuthSecret: Array(repeating: 1, count: 16)
                )
            )
        }
        _ = try await first.insertEscrowUser(user: "USER1", publicKey: [2], sealedPrivateKey: [2])
        first.shutdown()
        let admin = PostgresClient(configuration: configuration, backgroundLogger: Engine.quietLogger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await admin.run() }
            try await admin.query("UPDATE notify_schema SET version = 5", logger: Engine.quietLogger)
            group.cancelAll()
        }
        let second = try await PostgresNotifyStorage(
            configuration: configuration,
            masterKey: testMasterKey,
            logger: Engine.quietLogger
        )
        defer { second.shutdown() }
        #expect(try await second.sessions(user: "user1").map(\.id).sorted() == ["p1", "p2"])
        #expect(try await second.sessions(user: "USER1").isEmpty)
        #expect(try await second.sealedEscrowPrivateKey(user: "user1") == [2])
        #expect(try await second.sealedEscrowPrivateKey(user: "USER1") == nil)
    }

    @Test(.enabled(if: Engine.postgresAddress != nil, "set COFFER_TEST_POSTGRES (scripts/postgres.sh start)"))
    func aVersion7PostgreSQLDatabaseGetsTheExpiryIndexOfVersion8() async throws {
        let configuration = try await Engine.freshPostgresDatabase()
        func schema() async throws -> (version: Int?, indexed: Bool) {
            let admin = PostgresClient(configuration: configuration, backgroundLogger: Engine.quietLogger)
            return try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await admin.run() }
                defer { group.cancelAll() }
                var version: Int?
                for try await value in try await admin.query(
                    "SELECT MAX(version) FROM notify_schema",
                    logger: Engine.quietLogger
                ).decode(Int?.self) { version = value }
                var indexed = false
                for try await _ in try await admin.query(
                    "SELECT indexname FROM pg_indexes WHERE indexname = 'pending_message_expiry'",
                    logger: Engine.quietLogger
                ).decode(String.self) { indexed = true }
                return (version, indexed)
            }
        }
        func open() async throws {
            try await PostgresNotifyStorage(
                configuration: configuration,
                masterKey: testMasterKey,
                logger: Engine.quietLogger
            ).shutdown()
        }
        try await open()
        #expect(try await schema() == (8, true))
        // Back to version 7: no index.
        let admin = PostgresClient(configuration: configuration, backgroundLogger: Engine.quietLogger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await admin.run() }
            try await admin.query("DROP INDEX pending_message_expiry", logger: Engine.quietLogger)
            try await admin.query("UPDATE notify_schema SET version = 7", logger: Engine.quietLogger)
            group.cancelAll()
        }
        #expect(try await schema() == (7, false))
        try await open()
        #expect(try await schema() == (8, true))
    }
}
