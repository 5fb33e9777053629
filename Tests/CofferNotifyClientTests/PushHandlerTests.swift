import CofferCrypto
import CofferKeychain
import CofferNotifyClient
import CofferPush
import CofferTesting
import Foundation
import Testing

@Suite struct PushHandlerTests {
    static let message = Array(
        #"{"folder":"INBOX","from":"Canary Sender <c@example.org>","subject":"Canary subject 7f3a","type":"new-mail","uid":7,"uidValidity":1,"v":1}"#
            .utf8
    )

    @Test func opensAPushSealedToThisSession() throws {
        let keys = WebPush.UserAgentKeys()
        let body = try WebPush.seal(Self.message, to: keys.subscription)
        #expect(body.count == WebPush.standardBodyLength)
        let push = try PushHandler.open(body, keys: keys)
        #expect(push.subject == "Canary subject 7f3a")
        #expect(push.uid == 7)
        #expect(push.line == "New mail in INBOX from Canary Sender <c@example.org>: Canary subject 7f3a")
    }

    @Test func refusesAPushForAnotherSessionsKey() throws {
        let mine = WebPush.UserAgentKeys()
        let other = WebPush.UserAgentKeys()
        let body = try WebPush.seal(Self.message, to: other.subscription)
        #expect(throws: NotifyClientError.pushNotForThisSession) { try PushHandler.open(body, keys: mine) }
    }

    @Test func refusesASessionKeyWithAnotherAuthSecret() throws {
        let mine = WebPush.UserAgentKeys()
        let sameKeyOtherSecret = try WebPush.Subscription(
            publicKey: mine.subscription.publicKeyBytes,
            authSecret: [UInt8](repeating: 7, count: 16)
        )
        let body = try WebPush.seal(Self.message, to: sameKeyOtherSecret)
        #expect(throws: NotifyClientError.pushNotForThisSession) { try PushHandler.open(body, keys: mine) }
    }

    @Test(arguments: [0, 20, 86, 200, 4000, 4095])
    func refusesATamperedBody(at offset: Int) throws {
        let keys = WebPush.UserAgentKeys()
        var body = try WebPush.seal(Self.message, to: keys.subscription)
        body[offset] ^= 0x01
        #expect(throws: NotifyClientError.self) { try PushHandler.open(body, keys: keys) }
        #expect(throws: NotifyClientError.pushNotForThisSession) {
            var cut = try WebPush.seal(Self.message, to: keys.subscription)
            cut.removeLast(offset % 50 + 1)
            _ = try PushHandler.open(cut, keys: keys)
        }
    }

    @Test(arguments: [
        #"{"v":3,"type":"new-mail"}"#, #"{"v":1,"type":"new-mail","fastSync":{"kek":"AA","expires":1}}"#,
        #"{"v":1,"type":"something-else"}"#, #"not json"#, #"{"type":"new-mail"}"#,
    ])
    func refusesContentThatIsNotAVersionOnePush(_ text: String) throws {
        let keys = WebPush.UserAgentKeys()
        let body = try WebPush.seal(Array(text.utf8), to: keys.subscription)
        #expect {
            try PushHandler.open(body, keys: keys)
        } throws: { error in
            guard case .malformedPush = error as? NotifyClientError else { return false }
            return true
        }
    }

    @Test func theShownLineHoldsNoControlCharacters() throws {
        let keys = WebPush.UserAgentKeys()
        let text = #"{"v":1,"type":"new-mail","from":"a\u001b[2Jb","subject":"x\ny\u0007z"}"#
        let push = try PushHandler.open(WebPush.seal(Array(text.utf8), to: keys.subscription), keys: keys)
        #expect(!push.line.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F })
        #expect(push.line.contains("a[2Jb"))
    }

    @Test func aBodyOnStandardInputMayBeRawOrBase64URL() throws {
        let keys = WebPush.UserAgentKeys()
        let body = try WebPush.seal(Self.message, to: keys.subscription)
        #expect(PushHandler.body(fromInput: body) == body)
        #expect(PushHandler.body(fromInput: Array((Base64URL.encode(body) + "\n").utf8)) == body)
    }
}

@Suite struct PushSessionStoreTests {
    @Test func theKeyIsReadableWhileTheDeviceIsLockedAfterFirstUnlockButNotAfterReboot() throws {
        let device = TestDeviceState()
        let keychain = InMemoryKeychain(state: device)
        let store = PushSessionStore(keychain: keychain, account: "alice")
        let keys = WebPush.UserAgentKeys()
        try store.saveKeys(keys)
        device.lock()
        let loaded = try store.loadKeys()
        #expect(loaded.subscription == keys.subscription)
        device.reboot()
        #expect(throws: NotifyClientError.self) { try store.loadKeys() }
    }

    @Test func anotherAccountHasNoKey() throws {
        let keychain = InMemoryKeychain()
        try PushSessionStore(keychain: keychain, account: "alice").saveKeys(WebPush.UserAgentKeys())
        #expect(throws: NotifyClientError.notRegistered) {
            try PushSessionStore(keychain: keychain, account: "bob").loadKeys()
        }
    }

    @Test func theTokenOpensOnlyWithTheMainKeySubkeyItWasSealedUnder() throws {
        let keychain = InMemoryKeychain()
        let store = PushSessionStore(keychain: keychain, account: "alice")
        let key = try EnvelopeKey(SecretBytes(randomCount: 32))
        let server = try NotifyServer(url: "http://127.0.0.1:8790")
        try store.saveSession(
            server: server,
            sessionID: "s1",
            expires: Date(timeIntervalSince1970: 2_000_000_000),
            deviceName: "laptop",
            token: "cnt1_secret-token-canary",
            key: key
        )
        let record = try #require(try store.loadSession())
        #expect(record.server == server)
        #expect(!record.sealedToken.contains("secret-token-canary"))
        #expect(try store.token(of: record, key: key) == "cnt1_secret-token-canary")
        let other = try EnvelopeKey(SecretBytes(randomCount: 32))
        #expect(throws: NotifyClientError.self) { try store.token(of: record, key: other) }
        var moved = record
        moved.sessionID = "s2"
        #expect(throws: NotifyClientError.self) { try store.token(of: moved, key: key) }
        #expect(throws: NotifyClientError.self) {
            try PushSessionStore(keychain: keychain, account: "bob").token(of: record, key: key)
        }
    }

    @Test func deleteRemovesKeyAndRecordAndKeepsOnlyTheReason() throws {
        let keychain = InMemoryKeychain()
        let store = PushSessionStore(keychain: keychain, account: "alice")
        try store.saveKeys(WebPush.UserAgentKeys())
        try store.saveSession(
            server: NotifyServer(url: "http://localhost:1"),
            sessionID: "s1",
            expires: Date(),
            deviceName: "d",
            token: "t",
            key: EnvelopeKey(SecretBytes(randomCount: 32))
        )
        try store.delete(reason: "the service revoked the session")
        #expect(throws: NotifyClientError.notRegistered) { try store.loadKeys() }
        #expect(try store.loadSession() == nil)
        #expect(store.endedReason() == "the service revoked the session")
    }
}

@Suite struct NotifyServerTests {
    @Test(arguments: [
        ("https://notify.example.org", "notify.example.org", 443, true),
        ("https://notify.example.org:8443/", "notify.example.org", 8443, true),
        ("http://127.0.0.1:8790", "127.0.0.1", 8790, false),
        ("https://[2001:db8::1]:9000", "2001:db8::1", 9000, true),
        ("http://localhost", "localhost", 80, false),
    ])
    func parses(_ url: String, _ host: String, _ port: Int, _ tls: Bool) throws {
        let server = try NotifyServer(url: url)
        #expect(server.host == host)
        #expect(server.port == port)
        #expect(server.tls == tls)
    }

    @Test(arguments: [
        "http://notify.example.org", "http://10.0.0.1:8790", "ftp://x", "https://", "https://a:0", "https://a:70000",
        "https://user@host", "https://host/path", "https://host:port", "notify.example.org",
    ])
    func refuses(_ url: String) {
        #expect(throws: NotifyClientError.self) { try NotifyServer(url: url) }
    }

    @Test func needsTwoValidPins() {
        let pin = Data(repeating: 1, count: 32).base64EncodedString()
        #expect(throws: NotifyClientError.self) { try NotifyServer(url: "https://a", pins: [pin]) }
        #expect(throws: NotifyClientError.self) { try NotifyServer(url: "https://a", pins: [pin, "nope"]) }
        #expect(throws: Never.self) { try NotifyServer(url: "https://a", pins: [pin, pin]) }
    }
}
