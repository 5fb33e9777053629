import CofferNotify
import CofferPush
import Foundation
import Testing

@Suite struct StorageTests {
    func session(
        _ id: String,
        user: String = "alice",
        key: [UInt8]? = nil,
        token: SessionToken = SessionToken()
    )
        -> NotifySession
    {
        let date = Date(timeIntervalSince1970: 1_800_000_000)
        return NotifySession(
            id: id,
            user: user,
            deviceName: "phone \(id)",
            tokenHash: token.hash,
            created: date,
            lastSeen: date,
            expires: date.addingTimeInterval(3600),
            pushPublicKey: key ?? WebPush.UserAgentKeys().subscription.publicKeyBytes,
            pushAuthSecret: Array(repeating: 7, count: 16)
        )
    }

    @Test func sessionsRoundTripAndAreFoundByTokenHashOnly() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        let token = SessionToken()
        let stored = session("s1", token: token)
        try await harness.storage.createSession(stored)
        #expect(try await harness.storage.session(tokenHash: token.hash) == stored)
        #expect(try await harness.storage.session(tokenHash: SessionToken().hash) == nil)
        #expect(try await harness.storage.session(id: "s1") == stored)
        #expect(try await harness.storage.sessions(user: "bob").isEmpty)
    }

    @Test func aPushKeyUsedByAnotherSessionIsRefusedEvenAfterRevocation() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        let key = WebPush.UserAgentKeys().subscription.publicKeyBytes
        try await harness.storage.createSession(session("s1", key: key))
        await #expect(throws: NotifyError.pushKeyInUse) {
            try await harness.storage.createSession(session("s2", user: "bob", key: key))
        }
        #expect(try await harness.storage.revoke(id: "s1"))
        await #expect(throws: NotifyError.pushKeyInUse) {
            try await harness.storage.createSession(session("s3", key: key))
        }
    }

    @Test func revocationDeletesPendingMessagesAndAckOnlyTouchesTheOwnSession() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        try await harness.storage.createSession(session("s1"))
        try await harness.storage.createSession(session("s2"))
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        try await harness.storage.enqueue(
            [("m1", "s1"), ("m2", "s1"), ("m3", "s2")].map { id, owner in
                PendingMessage(id: id, sessionID: owner, body: [1, 2, 3], created: now, expires: now + 60)
            }
        )
        #expect(try await harness.storage.ack(sessionID: "s2", ids: ["m1"]) == 0)
        #expect(try await harness.storage.ack(sessionID: "s1", ids: ["m1", "nope"]) == 1)
        #expect(try await harness.storage.pending(sessionID: "s1", now: now, limit: 10).map(\.id) == ["m2"])
        #expect(try await harness.storage.pending(sessionID: "s1", now: now + 61, limit: 10).isEmpty)
        #expect(try await harness.storage.revoke(id: "s1"))
        #expect(try await harness.storage.pending(sessionID: "s1", now: now, limit: 10).isEmpty)
        #expect(try await harness.storage.purgeExpired(now: now + 61) == 1)
        #expect(try await harness.storage.revoke(id: "unknown") == false)
    }

    @Test func tokensParseOnlyInTheirOwnFormAndNeverPrintThemselves() {
        let token = SessionToken()
        #expect(SessionToken(text: token.text)?.hash == token.hash)
        #expect(SessionToken(text: String(token.text.dropLast())) == nil)
        #expect(SessionToken(text: "cnt1_") == nil)
        #expect(SessionToken(text: "Bearer " + token.text) == nil)
        #expect(!"\(token)".contains(token.text.dropFirst(5)))
        #expect(token.text.count == 5 + 43)
    }
}
