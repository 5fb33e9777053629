import CofferCrypto
import CofferKeymaker
import CofferMIME
import CofferTesting
import CofferTransport
import Foundation
import GRDB
import Testing

@testable import CofferStore

/// The store's sync API without a server: migration, locations, expunges, flag merge, accounts.
struct SyncStoreTests {
    func mail(_ uid: UInt32, _ marker: String, flags: MessageFlags = []) -> FetchedMail {
        FetchedMail(uid: uid, bytes: SyncMail.message(marker), flags: flags, label: "INBOX")
    }

    @Test func aV1StoreUpgradesAndKeepsItsMessagesAndAccounts() async throws {
        let world = try await SyncWorld()
        // Keys come from the MainKey, not the folder: another store of the same key seals the v1 rows.
        let keys = try await world.store.keys()
        let folder = "\(world.root.path)/old"
        try SecureFile.makePrivateDirectory(folder)
        let path = "\(folder)/\(MailStore.databaseName)"
        do {
            let queue = try DatabaseQueue(path: path)
            try Schema.migrator.migrate(queue, upTo: "v1")
            // Today's insert also counts the addresses in the address book (v5-outbox), which a v1 file lacks: the
            // prepared messages carry none here.
            let prepared = [
                MailStore.prepare(RawMessage(bytes: SyncMail.message("oldone")), keys: keys, now: 0),
                MailStore.prepare(RawMessage(bytes: SyncMail.message("oldtwo")), keys: keys, now: 0),
            ].map { prepared in
                prepared.map { message in
                    var message = message
                    message.sightings = []
                    return message
                }
            }
            try await queue.write { db in
                // Today's insert also writes v3-summary's cell; a v1 file has no such column, so it is there only
                // for the insert. The rows are then v1 rows: subject and senders in their own cells, no summary.
                // So is v8-openpgp-mail's (NULL for these plain messages).
                // The same for v12-search-fts5's index: its rows become v1's `searchTokens` rows, the same hashes.
                try db.execute(sql: "ALTER TABLE messages ADD COLUMN summary BLOB")
                try db.execute(sql: "ALTER TABLE messages ADD COLUMN openPGP BLOB")
                try db.execute(sql: "CREATE VIRTUAL TABLE searchIndex USING fts5(tokens, tokenize='ascii')")
                _ = try MailStore.insert(prepared, keys: keys, db: db)
                try db.execute(sql: "ALTER TABLE messages DROP COLUMN summary")
                try db.execute(sql: "ALTER TABLE messages DROP COLUMN openPGP")
                for row in try Row.fetchAll(db, sql: "SELECT rowid, tokens FROM searchIndex") {
                    for term in (row["tokens"] as String).split(separator: " ") {
                        try db.execute(
                            sql: "INSERT INTO searchTokens (token, messageID) VALUES (?, ?)",
                            arguments: [Int64(bitPattern: try #require(UInt64(term, radix: 16))), row["rowid"]]
                        )
                    }
                }
                try db.execute(sql: "DROP TABLE searchIndex")
                var writer = CellWriter()
                writer.string("old-user")
                writer.string(nil)
                try AccountRecord(id: 1, details: try keys.seal(writer.bytes, .accountDetails, row: 1)).insert(db)
            }
            let applied = try await queue.read { db in try Schema.migrator.appliedMigrations(db) }
            #expect(applied == ["v1"])
            try queue.close()
        }

        let upgraded = try MailStore(folder: folder, keys: world.keymaker)
        #expect(try await upgraded.count() == 2)
        #expect(try await upgraded.accounts().map(\.username) == ["old-user"])
        #expect(try await upgraded.search("oldtwo").count == 1)
        #expect(try await upgraded.search("oldone").count == 1)
        #expect(try await upgraded.serverAccounts().isEmpty)
        // The new tables work on the upgraded file.
        let synced = try await upgraded.addSyncFolder(accountID: 1, name: "INBOX", uidValidity: 7)
        let outcomes = try await upgraded.storeFetched([mail(1, "oldone"), mail(2, "newthree")], folderID: synced.id)
        #expect(outcomes.count == 2)
        #expect(try await upgraded.count() == 3)
        #expect(try await upgraded.syncLocations(folderID: synced.id).map(\.uid) == [1, 2])
        try upgraded.close()
    }

    @Test func aFetchedDuplicateGetsALocationNotASecondCopyAndExpungesDeleteOnlyUnlocatedMessages() async throws {
        let world = try await SyncWorld()
        let store = world.store
        // A message imported from a file (never located) must survive any sync deletion.
        _ = try await store.importMessage(RawMessage(bytes: SyncMail.message("fromfile")))
        let account = try await store.addServerAccount(
            ServerAccount(host: "h.test", port: 993, username: "u", password: "p")
        )
        let inbox = try await store.addSyncFolder(accountID: account, name: "INBOX", uidValidity: 1)
        let other = try await store.addSyncFolder(accountID: account, name: "Archive", uidValidity: 1)
        _ = try await store.storeFetched([mail(1, "alpha"), mail(2, "beta")], folderID: inbox.id)
        _ = try await store.storeFetched([mail(9, "alpha"), mail(10, "fromfile")], folderID: other.id)
        #expect(try await store.count() == 3)
        // Storing the same batch again (a rerun after a crash) changes nothing.
        _ = try await store.storeFetched([mail(1, "alpha"), mail(2, "beta")], folderID: inbox.id)
        #expect(try await store.count() == 3)
        #expect(try await store.syncFolder(accountID: account, name: "INBOX")?.highestUID == 2)

        // alpha is still in Archive: expunging it from INBOX keeps the message.
        #expect(try await store.deleteLocations(folderID: inbox.id, uids: [1]) == 0)
        #expect(try await store.count() == 3)
        #expect(try await store.deleteLocations(folderID: inbox.id, uids: [2]) == 1)
        #expect(try await store.search("beta").isEmpty)
        // Forgetting Archive deletes alpha and the file-imported message it located too (a located message goes
        // with its last location); a message that was never located stays, below.
        #expect(try await store.forgetSyncFolder(other.id) == 2)
        #expect(try await store.count() == 0)

        _ = try await store.importMessage(RawMessage(bytes: SyncMail.message("keepme")))
        _ = try await store.storeFetched([mail(3, "gamma")], folderID: inbox.id)
        #expect(try await store.removeAccount(account) == 1)
        #expect(try await store.count() == 1)
        #expect(try await store.search("keepme").count == 1)
        #expect(try await store.serverAccounts().isEmpty)
    }

    @Test func serverFlagChangesWinOnlyForTheFlagsTheServerChanged() async throws {
        let world = try await SyncWorld()
        let store = world.store
        let account = try await store.addServerAccount(
            ServerAccount(host: "h.test", port: 993, username: "u", password: "p")
        )
        let inbox = try await store.addSyncFolder(accountID: account, name: "INBOX", uidValidity: 1)
        let outcome = try await store.storeFetched([mail(1, "one", flags: [.flagged])], folderID: inbox.id)
        guard case .imported(let id) = outcome[0] else { throw TestSetupError(reason: "not imported") }
        // Read here: \Seen is a local change waiting to be pushed.
        #expect(try await store.readMessage(id).summary.flags == [.flagged])
        #expect(try await store.message(id).summary.flags == [.seen, .flagged])
        var location = try #require(try await store.syncLocations(folderID: inbox.id).first)
        #expect(location.localFlags == [.seen, .flagged])
        #expect(location.serverFlags == [.flagged])
        // Meanwhile the server unflagged it: that wins, the local \Seen stays.
        #expect(try await store.applyServerFlags(folderID: inbox.id, [1: []]) == 1)
        location = try #require(try await store.syncLocations(folderID: inbox.id).first)
        #expect(location.localFlags == [.seen])
        #expect(location.serverFlags == [])
        // Same server flags again: nothing changes.
        #expect(try await store.applyServerFlags(folderID: inbox.id, [1: []]) == 0)
        try await store.setServerFlags(folderID: inbox.id, [1: [.seen]])
        location = try #require(try await store.syncLocations(folderID: inbox.id).first)
        #expect(location.localFlags == location.serverFlags)
        await #expect(throws: StoreError.messageNotFound(999)) { try await store.setFlags(999, adding: .seen) }
    }

    @Test func aVersion1AccountRecordStillOpensAsImplicitTLS() throws {
        var writer = CellWriter()
        writer.count(1)
        writer.string("imap.example.test")
        writer.count(993)
        writer.string("alice")
        writer.string("secret")
        writer.string(nil)
        writer.string(nil)
        writer.count(0)
        let account = try ServerAccount.decode(writer.bytes)
        #expect(account == ServerAccount(host: "imap.example.test", port: 993, username: "alice", password: "secret"))
        #expect(account.url == "imaps://imap.example.test:993")
        var unknown = CellWriter()
        unknown.count(ServerAccount.recordVersion + 1)
        #expect(throws: CellReader.Malformed.self) { try ServerAccount.decode(unknown.bytes) }
    }

    @Test func aVersion3AccountRecordOpensWithoutAPinExpiry() throws {
        var writer = CellWriter()
        writer.count(3)
        writer.string("imap.example.test")
        writer.count(993)
        writer.string("alice")
        writer.string("secret")
        writer.string(nil)
        writer.string(nil)
        writer.count(2)
        writer.string("pinA")
        writer.string("pinB")
        writer.flag(false)
        writer.string("https://reports.example.test/pins")
        let account = try ServerAccount.decode(writer.bytes)
        #expect(account.endpoint.pinReportURL == "https://reports.example.test/pins")
        #expect(account.endpoint.pinExpires == nil)
        #expect(account.endpoint.pins == ["pinA", "pinB"])
        // The same bytes with a version 4 header lack the expiry field: refused, not guessed.
        var bytes = writer.bytes
        var header = CellWriter()
        header.count(4)
        bytes.replaceSubrange(0..<header.bytes.count, with: header.bytes)
        #expect(throws: CellReader.Malformed.self) { try ServerAccount.decode(bytes) }
    }

    /// Record v5: the submission server, with its own pins and login or the IMAP account's, round-trips sealed; a
    /// v4 record opens without one.
    @Test func aSubmissionServerRoundTripsInTheAccountRecord() async throws {
        let world = try await SyncWorld()
        var server = ServerAccount(host: "imap.example.test", port: 993, username: "alice", password: "imap-secret")
        server.submission = SubmissionServer(
            endpoint: ServerEndpoint(
                host: "smtp.example.test",
                port: 587,
                security: .startTLS,
                pins: ["pinC", "pinD"],
                caFile: "/tmp/smtp-ca.pem",
                connectAddress: "127.0.0.2",
                pinReportURL: "https://reports.example.test/smtp",
                pinExpires: Date(timeIntervalSince1970: 1_900_000_000)
            ),
            address: MailAddress(name: "Alice \"A\" Example", address: "alice@example.test"),
            username: nil,
            password: "smtp-secret-canary-4411"
        )
        #expect(server.submissionLogin == ("alice", "smtp-secret-canary-4411"))
        #expect(server.submission?.url == "submission://smtp.example.test:587")
        _ = try await world.store.addServerAccount(server)
        let stored = try await world.store.serverAccounts()
        #expect(stored.map(\.server) == [server])
        try world.store.close()
        for file in world.root.allFiles() {
            let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: file)))
            #expect(!ByteSearch.contains(Array("smtp-secret-canary-4411".utf8), in: bytes), "in \(file)")
        }
        func record(version: Int, submissionFlag: Bool?) -> [UInt8] {
            var writer = CellWriter()
            writer.count(version)
            writer.string("imap.example.test")
            writer.count(993)
            writer.string("alice")
            writer.string("secret")
            writer.string(nil)
            writer.string(nil)
            writer.count(0)
            writer.flag(false)
            writer.string(nil)
            writer.count(0)
            if let submissionFlag { writer.flag(submissionFlag) }
            return writer.bytes
        }
        #expect(try ServerAccount.decode(record(version: 4, submissionFlag: nil)).submission == nil)
        #expect(try ServerAccount.decode(record(version: 5, submissionFlag: false)).submission == nil)
        // Version 5 with the submission flag set and nothing after it: refused, not guessed.
        #expect(throws: CellReader.Malformed.self) {
            try ServerAccount.decode(record(version: 5, submissionFlag: true))
        }
    }

    @Test func theAccountRecordIsSealedAndRoundTrips() async throws {
        let world = try await SyncWorld()
        let password = "sealed-password-canary-7731"
        let server = ServerAccount(
            host: "imap.example.test",
            port: 1993,
            username: "alice-canary-user",
            password: password,
            pins: ["pinA", "pinB"],
            caFile: "/tmp/ca.pem",
            connectAddress: "127.0.0.1",
            startTLS: true,
            pinReportURL: "https://reports.example.test/pins",
            pinExpires: Date(timeIntervalSince1970: 1_900_000_000.75)
        )
        // Whole seconds, as the record keeps them.
        #expect(server.endpoint.pinExpires == Date(timeIntervalSince1970: 1_900_000_000))
        let id = try await world.store.addServerAccount(server)
        let stored = try await world.store.serverAccounts()
        #expect(stored.count == 1)
        #expect(stored[0].id == id)
        #expect(stored[0].server == server)
        try world.store.close()
        let files = world.root.allFiles()
        #expect(!files.isEmpty)
        for file in files {
            let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: file)))
            #expect(!ByteSearch.contains(Array(password.utf8), in: bytes), "the password is in \(file)")
            #expect(!ByteSearch.contains(Array("alice-canary-user".utf8), in: bytes), "the user is in \(file)")
        }
    }

    @Test func aLockedStoreRefusesEverySyncOperation() async throws {
        let world = try await SyncWorld()
        let account = try await world.store.addServerAccount(
            ServerAccount(host: "h.test", port: 993, username: "u", password: "p")
        )
        let inbox = try await world.store.addSyncFolder(accountID: account, name: "INBOX", uidValidity: 1)
        await world.keymaker.lock()
        await #expect(throws: StoreError.locked) { try await world.store.serverAccounts() }
        await #expect(throws: StoreError.locked) {
            try await world.store.storeFetched([mail(1, "x")], folderID: inbox.id)
        }
        await #expect(throws: StoreError.locked) { try await world.store.syncLocations(folderID: inbox.id) }
        await #expect(throws: StoreError.locked) {
            try await world.store.deleteLocations(folderID: inbox.id, uids: [1])
        }
    }
}
