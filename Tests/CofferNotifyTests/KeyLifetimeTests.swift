import CofferNotify
import CofferPush
import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import Testing

/// Issue 24, finding 5: a push never outlives the FastSync key it carries.
@Suite struct KeyLifetimeTests {
    /// A service with the FastSync escrow on the harness's folder and a clock the test moves.
    static func service(_ harness: Harness, clock: Clock, webPush: WebPushSender? = nil) throws -> NotifyService {
        var logger = Logger(label: "coffer-notify-tests")
        logger.logLevel = .warning
        var service = NotifyService(
            storage: harness.storage,
            authenticator: FakeAuthenticator(passwords: ["alice": "alice-pw"]),
            settings: NotifyService.Settings(eventSecret: Harness.eventSecret),
            logger: logger,
            webPush: webPush,
            now: { clock.now }
        )
        service.escrow = try FastSyncEscrow(
            records: try SQLiteEscrowRecords(path: harness.folder.appendingPathComponent("escrow.sqlite").path),
            masterKey: testMasterKey
        )
        return service
    }

    static func escrowKey(
        _ service: NotifyService,
        _ session: NotifySession,
        clock: Clock,
        lifetime: Int64
    ) async throws -> Int64 {
        let publicKey = try await service.escrow!.publicKey(user: session.user)
        let expires = Int64(clock.now.timeIntervalSince1970) + lifetime
        let upload = try FastSyncEscrowFormat.seal(
            kek: SymmetricKey(size: .bits256),
            to: publicKey,
            sessionID: session.id,
            expires: expires
        )
        try await service.escrow!.put(upload, for: session, now: clock.now)
        return expires
    }

    static func event(_ uid: UInt32) -> DovecotEvent {
        DovecotEvent(user: "alice", folder: "INBOX", uid: uid, from: "a@example.org", subject: "s")
    }

    @Test func aPushCarryingTheKeyExpiresWithIt() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        let clock = Clock()
        let service = try Self.service(harness, clock: clock)
        let device = Device()
        let (session, _) = try await device.registerAlice(with: service)
        let expires = try await Self.escrowKey(service, session, clock: clock, lifetime: 3600)
        #expect(try await service.handle(Self.event(1)) == 1)
        let queued = try await harness.storage.pending(sessionID: session.id, now: clock.now, limit: 10)
        let pending = try #require(queued.first)
        // Before the fix: 7 days, whatever the key's expiry.
        #expect(pending.expires == Date(timeIntervalSince1970: TimeInterval(expires)))
        let opened = try JSONDecoder().decode(PushMessage.self, from: Data(try device.keys.open(pending.body)))
        #expect(opened.fastSync?.expires == expires)
        clock.advance(3605)
        #expect(try await service.pending(for: session, wait: .zero).isEmpty)
        #expect(try await harness.storage.purgeExpired(now: clock.now) == 1)
    }

    @Test func deletingTheKeyDeletesThePushesThatCarryIt() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        let clock = Clock()
        let service = try Self.service(harness, clock: clock)
        try await Application(router: NotifyAPI.router(service: service)).test(.router) { client in
            let device = Device()
            let registered = try await client.register(device.registration(user: "alice", password: "alice-pw"))
            let session = try #require(try await harness.storage.session(id: registered.sessionID))
            // One push before the key (it carries none), one after.
            #expect(try await service.handle(Self.event(1)) == 1)
            _ = try await Self.escrowKey(service, session, clock: clock, lifetime: 3600)
            #expect(try await service.handle(Self.event(2)) == 1)
            #expect(try await harness.storage.pending(sessionID: session.id, now: clock.now, limit: 10).count == 2)
            try await client.execute(uri: "/v1/fastsync/kek", method: .delete, headers: bearer(registered.token)) {
                #expect($0.status == .noContent)
            }
            let left = try await harness.storage.pending(sessionID: session.id, now: clock.now, limit: 10)
            #expect(left.count == 1)
            let opened = try JSONDecoder().decode(
                PushMessage.self,
                from: Data(try device.keys.open(try #require(left.first).body))
            )
            #expect(opened.uid == 1)
            #expect(opened.fastSync == nil)
        }
    }

    /// The Web Push `TTL` a push service is given ends with the key too: a push service never keeps a key after its
    /// expiry. Before, the TTL was the 7 days of every push.
    @Test func theWebPushTTLOfAPushCarryingTheKeyIsAtMostTheKeysLifetime() async throws {
        let received = Received()
        try await Application(router: received.router()).test(.live) { pushService in
            let port = try #require(pushService.port)
            let harness = try Harness()
            defer { harness.remove() }
            let clock = Clock()
            let signer = try VAPID.Signer(privateKey: P256.Signing.PrivateKey(), subject: "mailto:ops@coffer.test")
            let service = try Self.service(
                harness,
                clock: clock,
                webPush: WebPushSender(signer: signer, policy: PushEndpointPolicy(allowLoopbackForTests: true))
            )
            let keyedDevice = Device()
            let plainDevice = Device()
            var sessions: [String: NotifySession] = [:]
            for (name, device) in [("keyed", keyedDevice), ("plain", plainDevice)] {
                sessions[name] = try await service.register(
                    user: "alice",
                    password: "alice-pw",
                    deviceName: name,
                    pushPublicKey: device.keys.subscription.publicKeyBytes,
                    pushAuthSecret: device.keys.authSecret.withUnsafeBytes { Array($0) },
                    pushEndpoint: "http://127.0.0.1:\(port)/push/\(name)",
                    client: ClientOrigin(address: "192.0.2.1")
                ).session
            }
            let expires = try await Self.escrowKey(
                service,
                try #require(sessions["keyed"]),
                clock: clock,
                lifetime: 120
            )
            #expect(try await service.handle(Self.event(1)) == 2)
            await service.deliveries.drain()

            let pushes = await received.pushes
            #expect(pushes.map(\.path).sorted() == ["/push/keyed", "/push/plain"])
            let keyed = try #require(pushes.first { $0.path == "/push/keyed" })
            let plain = try #require(pushes.first { $0.path == "/push/plain" })
            let keyedTTL = try #require(Int(keyed.headers["ttl"] ?? ""), "no TTL: \(keyed.headers)")
            #expect(keyedTTL > 0 && keyedTTL <= 120, "the push carrying a 120 s key was given TTL \(keyedTTL)")
            // The push without a key keeps the service's message lifetime.
            let lifetime = Int(NotifyService.Settings(eventSecret: Harness.eventSecret).messageLifetime)
            #expect(Int(plain.headers["ttl"] ?? "") == lifetime)
            let opened = try JSONDecoder().decode(
                PushMessage.self,
                from: Data(try keyedDevice.keys.open(keyed.body))
            )
            #expect(opened.fastSync?.expires == expires)
            let other = try JSONDecoder().decode(
                PushMessage.self,
                from: Data(try plainDevice.keys.open(plain.body))
            )
            #expect(other.fastSync == nil)
        }
    }
}
