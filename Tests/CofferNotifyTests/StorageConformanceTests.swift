import CofferNotify
import CofferPush
import Crypto
import Foundation
import Logging
import PostgresNIO
import Testing

/// The storage engines the conformance suite runs on: SQLite always, PostgreSQL when `COFFER_TEST_POSTGRES`
/// (`HOST:PORT` of a cluster with the trust user `coffer`, made by scripts/postgres.sh) is set.
enum Engine: String, CustomTestStringConvertible, Sendable {
    case sqlite, postgres

    static let postgresAddress = ProcessInfo.processInfo.environment["COFFER_TEST_POSTGRES"]
    static let all: [Engine] = [.sqlite] + (postgresAddress == nil ? [] : [.postgres])
    var testDescription: String { rawValue }

    static var quietLogger: Logger {
        var logger = Logger(label: "coffer-notify-tests")
        logger.logLevel = .critical
        return logger
    }

    static func configuration(database: String) throws -> PostgresClient.Configuration {
        let address = try #require(postgresAddress)
        let parts = address.split(separator: ":")
        let port = try #require(parts.count == 2 ? Int(parts[1]) : nil)
        return PostgresClient.Configuration(
            host: String(parts[0]),
            port: port,
            username: "coffer",
            password: nil,
            database: database,
            tls: .disable
        )
    }

    /// A fresh, empty database on the test cluster.
    static func freshPostgresDatabase() async throws -> PostgresClient.Configuration {
        let name = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let admin = PostgresClient(
            configuration: try configuration(database: "postgres"),
            backgroundLogger: quietLogger
        )
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await admin.run() }
            try await admin.query("CREATE DATABASE \(unescaped: name)", logger: quietLogger)
            group.cancelAll()
        }
        return try configuration(database: name)
    }

    /// A fresh storage of this engine and its FastSync escrow records; `close` releases them.
    func make() async throws -> (
        storage: any NotifyStorage, escrow: any EscrowRecords, close: @Sendable () -> Void
    ) {
        switch self {
        case .sqlite:
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("coffer-notify-\(UUID())")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            let storage = try SQLiteNotifyStorage(
                path: folder.appendingPathComponent("n.sqlite").path,
                masterKey: testMasterKey
            )
            let escrow = try SQLiteEscrowRecords(path: folder.appendingPathComponent("escrow.sqlite").path)
            return (storage, escrow, { try? FileManager.default.removeItem(at: folder) })
        case .postgres:
            let storage = try await PostgresNotifyStorage(
                configuration: try await Self.freshPostgresDatabase(),
                masterKey: testMasterKey,
                logger: Self.quietLogger
            )
            return (storage, storage, { storage.shutdown() })
        }
    }
}

@Suite struct StorageConformanceTests {
    let date = Date(timeIntervalSince1970: 1_800_000_000)

    func session(
        _ id: String,
        user: String = "alice",
        key: [UInt8]? = nil,
        token: SessionToken = SessionToken()
    )
        -> NotifySession
    {
        NotifySession(
            id: id,
            user: user,
            deviceName: "phone \(id) <b>",
            tokenHash: token.hash,
            created: date,
            lastSeen: date,
            expires: date.addingTimeInterval(3600),
            pushPublicKey: key ?? WebPush.UserAgentKeys().subscription.publicKeyBytes,
            pushAuthSecret: (0..<16).map { UInt8($0) },
            pushEndpoint: id == "s1" ? "https://push.example/s1" : nil
        )
    }

    @Test(arguments: Engine.all)
    func sessionsRoundTripAndAreFoundByTokenHashOrIdOnly(engine: Engine) async throws {
        let (storage, _, close) = try await engine.make()
        defer { close() }
        let token = SessionToken()
        let stored = session("s1", token: token)
        try await storage.createSession(stored)
        try await storage.createSession(session("s2", user: "bob"))
        #expect(try await storage.session(tokenHash: token.hash) == stored)
        #expect(try await storage.session(tokenHash: SessionToken().hash) == nil)
        #expect(try await storage.session(id: "s1") == stored)
        #expect(try await storage.session(id: "nope") == nil)
        #expect(try await storage.sessions(user: "alice") == [stored])
        #expect(try await storage.allSessions().map(\.id) == ["s1", "s2"])
        try await storage.touch(id: "s1", at: date + 10)
        #expect(try await storage.session(id: "s1")?.lastSeen == date + 10)
        let fresh = SessionToken()
        try await storage.replaceToken(id: "s1", tokenHash: fresh.hash, previous: token.hash, expires: date + 7200)
        // The previous token finds the session until it is forgotten; the new one always does.
        #expect(try await storage.session(tokenHash: token.hash)?.previousTokenHash == token.hash)
        #expect(try await storage.session(tokenHash: fresh.hash)?.expires == date + 7200)
        #expect(try await storage.session(tokenHash: fresh.hash)?.tokenHash == fresh.hash)
        try await storage.forgetPreviousToken(id: "s1")
        #expect(try await storage.session(tokenHash: token.hash) == nil)
        #expect(try await storage.session(tokenHash: fresh.hash)?.previousTokenHash == nil)
        #expect(try await storage.liveSessionCount(now: date) == 2)
        #expect(try await storage.revoke(id: "s2"))
        #expect(try await storage.liveSessionCount(now: date) == 1)
        #expect(try await storage.liveSessionCount(now: date + 7201) == 0)
        // A gone Web Push subscription: the endpoint goes, the session stays.
        #expect(try await storage.session(id: "s1")?.pushEndpoint == "https://push.example/s1")
        try await storage.forgetPushEndpoint(id: "s1")
        #expect(try await storage.session(id: "s1")?.pushEndpoint == nil)
        #expect(try await storage.session(id: "s1")?.revoked == false)
    }

    @Test(arguments: Engine.all)
    func aPushKeyIsNeverRegisteredTwice(engine: Engine) async throws {
        let (storage, _, close) = try await engine.make()
        defer { close() }
        let key = WebPush.UserAgentKeys().subscription.publicKeyBytes
        try await storage.createSession(session("s1", key: key))
        await #expect(throws: NotifyError.pushKeyInUse) {
            try await storage.createSession(session("s2", user: "bob", key: key))
        }
        #expect(try await storage.revoke(id: "s1"))
        await #expect(throws: NotifyError.pushKeyInUse) { try await storage.createSession(session("s3", key: key)) }
        #expect(try await storage.session(id: "s3") == nil)
    }

    @Test(arguments: Engine.all)
    func pendingAckRevokeAndPurge(engine: Engine) async throws {
        let (storage, _, close) = try await engine.make()
        defer { close() }
        try await storage.createSession(session("s1"))
        try await storage.createSession(session("s2"))
        try await storage.enqueue(
            [("m1", "s1", 0.0), ("m2", "s1", 1.0), ("m3", "s2", 0.0)].map { id, owner, offset in
                PendingMessage(
                    id: id,
                    sessionID: owner,
                    body: Array(repeating: UInt8(id.count), count: 4096),
                    created: date + offset,
                    expires: date + 60
                )
            }
        )
        #expect(try await storage.pending(sessionID: "s1", now: date, limit: 1).map(\.id) == ["m1"])
        #expect(try await storage.pending(sessionID: "s1", now: date, limit: 10).first?.body.count == 4096)
        #expect(try await storage.ack(sessionID: "s2", ids: ["m1"]) == 0)
        #expect(try await storage.ack(sessionID: "s1", ids: ["m1", "nope"]) == 1)
        #expect(try await storage.pending(sessionID: "s1", now: date, limit: 10).map(\.id) == ["m2"])
        #expect(try await storage.pending(sessionID: "s1", now: date + 61, limit: 10).isEmpty)
        #expect(try await storage.revoke(id: "s1"))
        #expect(try await storage.pending(sessionID: "s1", now: date, limit: 10).isEmpty)
        #expect(try await storage.purgeExpired(now: date + 61) == 1)
        #expect(try await storage.revoke(id: "unknown") == false)
        // One transaction: a batch with a message for no session stores none of them.
        try await storage.createSession(session("s3"))
        await #expect(throws: NotifyError.self) {
            try await storage.enqueue([
                PendingMessage(id: "m8", sessionID: "s3", body: [1], created: date, expires: date + 60),
                PendingMessage(id: "m9", sessionID: "no-session", body: [1], created: date, expires: date + 60),
            ])
        }
        #expect(try await storage.pending(sessionID: "s3", now: date, limit: 10).isEmpty)
    }

    @Test(arguments: Engine.all)
    func pendingCountsAndEscrowedKEKsOfSeveralSessionsReadAtOnceMatchTheOneByOneReads(engine: Engine) async throws {
        let (storage, records, close) = try await engine.make()
        defer { close() }
        for id in ["s1", "s2", "s3"] { try await storage.createSession(session(id)) }
        let queued = [("m1", "s1", 60.0), ("m2", "s1", 60.0), ("m3", "s1", 5.0), ("m4", "s2", 60.0)]
        try await storage.enqueue(
            queued.map { PendingMessage(id: $0.0, sessionID: $0.1, body: [1], created: date, expires: date + $0.2) }
        )
        let ids = ["s1", "s2", "s3", "unknown"]
        let counts = try await storage.pendingCounts(sessionIDs: ids, now: date + 10)
        #expect(counts == ["s1": 2, "s2": 1, "s3": 0, "unknown": 0])
        for id in ids { #expect(try await storage.pendingCount(sessionID: id, now: date + 10) == counts[id]) }
        #expect(try await storage.pendingCounts(sessionIDs: [], now: date).isEmpty)

        let now: Int64 = 1_800_000_000
        try await records.putEscrowedKEK(sessionID: "s1", user: "alice", sealed: [1, 1], expires: now + 100)
        try await records.putEscrowedKEK(sessionID: "s2", user: "alice", sealed: [2, 2], expires: now + 5)
        let found = try await records.escrowedKEKs(sessionIDs: ids, now: now + 10)
        // s2's KEK expired, s3 has none: both absent.
        #expect(found.keys.sorted() == ["s1"])
        #expect(found["s1"]?.sealed == [1, 1])
        #expect(found["s1"]?.expires == now + 100)
        #expect(try await records.escrowedKEK(sessionID: "s1", now: now + 10)?.sealed == found["s1"]?.sealed)
        #expect(try await records.escrowedKEKs(sessionIDs: ["s2"], now: now).keys.sorted() == ["s2"])
        #expect(try await records.escrowedKEKs(sessionIDs: [], now: now).isEmpty)
    }

    @Test(arguments: Engine.all)
    func escrowRecordsKeepTheFirstUserKeyReplaceAKEKAndExpire(engine: Engine) async throws {
        let (_, records, close) = try await engine.make()
        defer { close() }
        let now: Int64 = 1_800_000_000
        #expect(try await records.sealedEscrowPrivateKey(user: "alice") == nil)
        #expect(try await records.insertEscrowUser(user: "alice", publicKey: [1], sealedPrivateKey: [2]) == [1])
        // A second instance racing to make the user's key gets the first one back.
        #expect(try await records.insertEscrowUser(user: "alice", publicKey: [3], sealedPrivateKey: [4]) == [1])
        #expect(try await records.sealedEscrowPrivateKey(user: "alice") == [2])
        #expect(try await records.sealedEscrowPrivateKey(user: "bob") == nil)

        try await records.putEscrowedKEK(sessionID: "s1", user: "alice", sealed: [5], expires: now + 60)
        try await records.putEscrowedKEK(sessionID: "s1", user: "alice", sealed: [6], expires: now + 120)
        try await records.putEscrowedKEK(sessionID: "s2", user: "alice", sealed: [7], expires: now + 10)
        let replaced = try await records.escrowedKEK(sessionID: "s1", now: now)
        #expect(replaced?.sealed == [6])
        #expect(replaced?.expires == now + 120)
        #expect(try await records.escrowedKEK(sessionID: "s3", now: now) == nil)
        // At its expiry a KEK is no longer returned, and the purge deletes it.
        #expect(try await records.escrowedKEK(sessionID: "s2", now: now + 10) == nil)
        #expect(try await records.escrowedKEK(sessionID: "s2", now: now + 9) != nil)
        #expect(try await records.purgeEscrowedKEKs(now: now + 10) == 1)
        #expect(try await records.purgeEscrowedKEKs(now: now + 10) == 0)
        #expect(try await records.purgeEscrowedKEKs(now: now + 120) == 1)
        #expect(try await records.escrowedKEK(sessionID: "s1", now: now) == nil)
        try await records.putEscrowedKEK(sessionID: "s1", user: "alice", sealed: [8], expires: now + 60)
        try await records.deleteEscrowedKEK(sessionID: "s1")
        #expect(try await records.escrowedKEK(sessionID: "s1", now: now) == nil)
    }
}

/// Two services on one PostgreSQL database: an event handled by one wakes a long poll held by the other, and a key
/// escrowed through one rides the pushes of the other.
@Suite struct TwoInstanceTests {
    actor Woken {
        var ids: [String] = []
        func add(_ id: String) { ids.append(id) }
    }

    /// Two storages on one fresh database, each with its service and FastSync escrow (in that database).
    static func instances() async throws -> (
        PostgresNotifyStorage, PostgresNotifyStorage, NotifyService, NotifyService
    ) {
        let configuration = try await Engine.freshPostgresDatabase()
        var pairs: [(PostgresNotifyStorage, NotifyService)] = []
        for _ in 0..<2 {
            let storage = try await PostgresNotifyStorage(
                configuration: configuration,
                masterKey: testMasterKey,
                logger: Engine.quietLogger
            )
            var service = NotifyService(
                storage: storage,
                authenticator: FakeAuthenticator(passwords: ["alice": "alice-pw"]),
                settings: NotifyService.Settings(eventSecret: Harness.eventSecret)
            )
            service.escrow = try FastSyncEscrow(records: storage, masterKey: testMasterKey)
            pairs.append((storage, service))
        }
        return (pairs[0].0, pairs[1].0, pairs[0].1, pairs[1].1)
    }

    @Test(.enabled(if: Engine.postgresAddress != nil, "set COFFER_TEST_POSTGRES (scripts/postgres.sh start)"))
    func anEventOnOneInstanceWakesAStreamWaiterOnTheOther() async throws {
        let (storageA, storageB, serviceA, serviceB) = try await Self.instances()
        defer {
            storageA.shutdown()
            storageB.shutdown()
        }
        let device = Device()
        let (session, _) = try await serviceB.register(
            user: "alice",
            password: "alice-pw",
            deviceName: "phone",
            pushPublicKey: device.keys.subscription.publicKeyBytes,
            pushAuthSecret: device.keys.authSecret.withUnsafeBytes { Array($0) },
            client: ClientOrigin(address: "127.0.0.1")
        )
        let woken = Woken()
        let listener = Task {
            try await storageB.listen { id in
                await woken.add(id)
                await serviceB.signal.wake(sessionID: id)
            }
        }
        defer { listener.cancel() }
        // Wait until B listens: a probe queued (and acked) through A reaches B's listener.
        for _ in 0..<300 {
            let probe = UUID().uuidString
            try await storageA.enqueue([
                PendingMessage(id: probe, sessionID: session.id, body: [0], created: .now, expires: .now + 60)
            ])
            _ = try await storageA.ack(sessionID: session.id, ids: [probe])
            if await !woken.ids.isEmpty { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        try #require(await !woken.ids.isEmpty, "B's listener never heard A")
        let poll = Task { try await serviceB.pending(for: session, wait: .seconds(30)) }
        func waiters() -> Double? {
            serviceB.metrics.registry.emitToString().split(separator: "\n")
                .first { $0.hasPrefix("notify_stream_waiters ") }.flatMap { Double($0.split(separator: " ")[1]) }
        }
        while waiters() != 1 { try await Task.sleep(for: .milliseconds(20)) }
        let before = await woken.ids.count
        let queued = try await serviceA.handle(
            DovecotEvent(user: "alice", folder: "INBOX", uid: 9, from: "a@example.org", subject: "over there")
        )
        #expect(queued == 1)
        let messages = try await poll.value
        #expect(messages.count == 1)
        let opened = try device.keys.open(messages[0].body)
        #expect(String(decoding: opened, as: UTF8.self).contains("over there"))
        #expect(await woken.ids.dropFirst(before).contains(session.id))
    }

    @Test(.enabled(if: Engine.postgresAddress != nil, "set COFFER_TEST_POSTGRES (scripts/postgres.sh start)"))
    func aFastSyncKeyEscrowedThroughOneInstanceRidesThePushesOfTheOther() async throws {
        let (storageA, storageB, serviceA, serviceB) = try await Self.instances()
        defer {
            storageA.shutdown()
            storageB.shutdown()
        }
        let device = Device()
        let (session, _) = try await serviceA.register(
            user: "alice",
            password: "alice-pw",
            deviceName: "phone",
            pushPublicKey: device.keys.subscription.publicKeyBytes,
            pushAuthSecret: device.keys.authSecret.withUnsafeBytes { Array($0) },
            client: ClientOrigin(address: "127.0.0.1")
        )
        // Both instances hand out the same user key, whichever is asked first.
        let publicKey = try await serviceB.escrow!.publicKey(user: "alice")
        #expect(try await serviceA.escrow!.publicKey(user: "alice") == publicKey)
        let kek = SymmetricKey(size: .bits256)
        let expires = Int64(Date().timeIntervalSince1970) + 600
        let upload = try FastSyncEscrowFormat.seal(kek: kek, to: publicKey, sessionID: session.id, expires: expires)
        try await serviceA.escrow!.put(upload, for: session, now: Date())

        #expect(
            try await serviceB.handle(DovecotEvent(user: "alice", folder: "INBOX", uid: 3, from: "a", subject: "b"))
                == 1
        )
        let queued = try await storageA.pending(sessionID: session.id, now: Date(), limit: 10)
        let message = try JSONDecoder().decode(
            PushMessage.self,
            from: Data(try device.keys.open(try #require(queued.first).body))
        )
        #expect(message.fastSync?.expires == expires)
        #expect(message.fastSync?.kek == kek.withUnsafeBytes { Base64URL.encode($0) })

        // A revocation through B deletes what A stored.
        try await serviceB.revoke(id: session.id, by: session)
        #expect(try await serviceA.escrow!.kekExpiry(sessionID: session.id, now: Date()) == nil)
    }
}
