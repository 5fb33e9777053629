import CofferCrypto
import CofferKeychain
import CofferKeymaker
import CofferNotify
import CofferNotifyClient
import CofferPush
import CofferTesting
import Crypto
import Foundation
import Testing

@Suite struct FastSyncEscrowFormatTests {
    @Test func aKEKSealedByTheDeviceOpensOnlyForItsSessionAndExpiry() throws {
        let escrow = Curve25519.KeyAgreement.PrivateKey()
        let kek = SymmetricKey(size: .bits256)
        let upload = try FastSyncEscrowFormat.seal(
            kek: kek,
            to: Array(escrow.publicKey.rawRepresentation),
            sessionID: "s1",
            expires: 2_000_000_000
        )
        #expect(try FastSyncEscrowFormat.open(upload, with: escrow, sessionID: "s1") == kek)
        #expect(throws: CofferPushError.authenticationFailed) {
            try FastSyncEscrowFormat.open(upload, with: escrow, sessionID: "s2")
        }
        var later = upload
        later.expires += 1
        #expect(throws: CofferPushError.authenticationFailed) {
            try FastSyncEscrowFormat.open(later, with: escrow, sessionID: "s1")
        }
        #expect(throws: CofferPushError.authenticationFailed) {
            try FastSyncEscrowFormat.open(upload, with: Curve25519.KeyAgreement.PrivateKey(), sessionID: "s1")
        }
    }
}

@Suite struct FastSyncTests {
    /// Registers a session on `live`, turns FastSync on for `lifetime`, and returns what the test needs.
    func setUp(
        _ client: NotifyClient,
        lifetime: TimeInterval
    ) async throws -> (
        keymaker: Keymaker, keychain: InMemoryKeychain, keys: WebPush.UserAgentKeys, token: NotifyClient.Token,
        record: FastSync.Record
    ) {
        let keymaker = try await Fixtures.unlockedKeymaker()
        let keychain = InMemoryKeychain()
        let keys = WebPush.UserAgentKeys()
        let token = try await client.register(user: "alice", password: "alice-pw", deviceName: "d", keys: keys)
        let store = PushSessionStore(keychain: keychain, account: "alice")
        try store.saveKeys(keys)
        try store.saveSession(
            server: client.server,
            sessionID: token.sessionID,
            expires: token.expires,
            deviceName: "d",
            token: token.token,
            key: await keymaker.mainKey(for: .userRequest).subkey(PushSessionStore.tokenSubkey)
        )
        let session = try #require(try store.loadSession())
        let record = try await FastSync.enable(
            mainKey: await keymaker.mainKey(for: .userRequest),
            keychain: keychain,
            account: "alice",
            session: session,
            token: token.token,
            lifetime: lifetime
        )
        return (keymaker, keychain, keys, token, record)
    }

    func nextPush(
        _ client: NotifyClient,
        _ token: String,
        _ keys: WebPush.UserAgentKeys
    ) async throws
        -> PushMessage
    {
        let messages = try await client.stream(token: token, wait: 5)
        let first = try #require(messages.first)
        try await client.ack(token: token, ids: messages.map(\.id))
        return try PushHandler.open(try #require(Base64URL.decode(first.body)), keys: keys)
    }

    @Test func aPushCarriesTheKEKThatUnwrapsTheMainKeyUntilItExpires() async throws {
        let live = try LiveService()
        let service = live.service
        let clock = live.clock
        try await live.run { client in
            let world = try await setUp(client, lifetime: 3600)
            #expect(try await client.kekExpiry(token: world.token.token) == world.record.expires)
            _ = try await service.handle(DovecotEvent(user: "alice", folder: "INBOX", uid: 1, from: "a", subject: "b"))
            let push = try await nextPush(client, world.token.token, world.keys)
            #expect(push.v == 2)
            let key = try #require(push.fastSync)
            #expect(key.expires == world.record.expires)
            let record = try #require(try FastSync.load(keychain: world.keychain, account: "alice"))
            let mainKey = try FastSync.unwrap(
                record: record,
                kek: key.kek,
                kekExpires: key.expires,
                sessionID: world.token.sessionID
            )
            // The unwrapped bytes are the MainKey: a Keymaker made from them derives the same subkeys.
            let copy = try await Fixtures.unlockedKeymaker(mainKey: mainKey.withUnsafeBytes { Array($0) })
            #expect(
                try await copy.mainKey(for: .userRequest).subkey("x").id
                    == world.keymaker.mainKey(for: .userRequest).subkey("x").id
            )

            // The device refuses an expired record by its own clock, even with the right key.
            #expect(throws: NotifyClientError.fastSyncExpired) {
                try FastSync.unwrap(
                    record: record,
                    kek: key.kek,
                    kekExpires: key.expires,
                    sessionID: world.token.sessionID,
                    now: Date().addingTimeInterval(3601)
                )
            }
            // A key for another expiry or session, or a wrong key, opens nothing.
            #expect(throws: NotifyClientError.self) {
                try FastSync.unwrap(
                    record: record,
                    kek: key.kek,
                    kekExpires: key.expires + 1,
                    sessionID: record.sessionID
                )
            }
            #expect(throws: NotifyClientError.self) {
                try FastSync.unwrap(record: record, kek: key.kek, kekExpires: key.expires, sessionID: "other")
            }
            #expect(throws: NotifyClientError.self) {
                try FastSync.unwrap(
                    record: record,
                    kek: Base64URL.encode([UInt8](repeating: 1, count: 32)),
                    kekExpires: key.expires,
                    sessionID: record.sessionID
                )
            }

            // Past the expiry on the service's clock: no key in the push, and the escrow row is gone.
            clock.shift(3601)
            _ = try await service.handle(DovecotEvent(user: "alice", folder: "INBOX", uid: 2, from: "a", subject: "b"))
            let late = try await nextPush(client, world.token.token, world.keys)
            #expect(late.fastSync == nil)
            #expect(late.v == 1)
        }
    }

    @Test func offAndRevocationDeleteTheEscrowedKey() async throws {
        let live = try LiveService()
        let service = live.service
        try await live.run { client in
            let world = try await setUp(client, lifetime: 600)
            try await client.deleteKEK(token: world.token.token)
            #expect(try await client.kekExpiry(token: world.token.token) == nil)
            _ = try await service.handle(DovecotEvent(user: "alice", folder: "INBOX", uid: 1, from: "a", subject: "b"))
            #expect(try await nextPush(client, world.token.token, world.keys).fastSync == nil)

            let again = try await setUp(client, lifetime: 600)
            let escrow = try #require(service.escrow)
            let session = try #require(try await service.storage.session(id: again.token.sessionID))
            #expect(try await escrow.kek(for: session, now: Date()) != nil)
            try await client.revoke(sessionID: again.token.sessionID, token: again.token.token)
            #expect(try await escrow.kekExpiry(sessionID: again.token.sessionID, now: Date()) == nil)
        }
    }

    @Test func theServiceRefusesAnExpiryPastSevenDaysOrInThePast() async throws {
        let live = try LiveService()
        try await live.run { client in
            let keys = WebPush.UserAgentKeys()
            let token = try await client.register(user: "alice", password: "alice-pw", deviceName: "d", keys: keys)
            let publicKey = try await client.fastSyncKey(token: token.token)
            let now = Int64(Date().timeIntervalSince1970)
            for expires in [now - 10, now + 7 * 24 * 3600 + 60] {
                let upload = try FastSyncEscrowFormat.seal(
                    kek: SymmetricKey(size: .bits256),
                    to: publicKey,
                    sessionID: token.sessionID,
                    expires: expires
                )
                await #expect(throws: NotifyClientError.unexpectedStatus(400, "the FastSync key upload")) {
                    try await client.putKEK(token: token.token, upload: upload)
                }
            }
            // Sealed for another session: refused.
            let upload = try FastSyncEscrowFormat.seal(
                kek: SymmetricKey(size: .bits256),
                to: publicKey,
                sessionID: "another-session",
                expires: now + 60
            )
            await #expect(throws: NotifyClientError.unexpectedStatus(400, "the FastSync key upload")) {
                try await client.putKEK(token: token.token, upload: upload)
            }
            #expect(try await client.kekExpiry(token: token.token) == nil)
        }
    }
}
