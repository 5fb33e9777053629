import CofferNotify
import CofferPush
import CofferTransport
import Foundation
import Hummingbird
import HummingbirdTesting
import Testing

/// Fails every check as a mail server that cannot be reached would, with a reason naming its host and address.
struct UnreachableMailServer: MailAuthenticator {
    func verify(user: String, password: String) async throws(NotifyError) {
        throw .mailServerUnavailable("connect to imap.internal.example (10.1.2.3:993) failed: connection refused")
    }
}

/// Issue 24, findings 6 to 10 and the suspected ones: caps, fixed sentences, device names, file modes, the Web Push
/// request target and the loopback check.
@Suite struct HardeningTests {
    static func event(_ uid: UInt32) -> DovecotEvent {
        DovecotEvent(user: "alice", folder: "INBOX", uid: uid, from: "a@example.org", subject: "s")
    }

    @Test func liveSessionsPerUserAreCapped() async throws {
        let harness = try Harness { $0.maximumSessionsPerUser = 3 }
        defer { harness.remove() }
        try await harness.application.test(.router) { client in
            var sessions: [TokenResponse] = []
            for _ in 0..<3 {
                sessions.append(try await client.register(Device().registration(user: "alice", password: "alice-pw")))
            }
            try await client.execute(
                uri: "/v1/sessions",
                method: .post,
                headers: jsonHeaders,
                body: json(Device().registration(user: "ALICE", password: "alice-pw"))
            ) { response in
                #expect(response.status == .conflict)
                #expect(String(buffer: response.body).contains("revoke one"))
            }
            // Bob is not affected; revoking one of Alice's frees a place.
            _ = try await client.register(Device().registration(user: "bob", password: "bob-pw"))
            try await client.execute(
                uri: "/v1/sessions/\(sessions[0].sessionID)",
                method: .delete,
                headers: bearer(sessions[1].token)
            ) { #expect($0.status == .noContent) }
            _ = try await client.register(Device().registration(user: "alice", password: "alice-pw"))
        }
    }

    @Test func aFullQueueTakesNoMorePushes() async throws {
        let harness = try Harness { $0.maximumQueuedPerSession = 3 }
        defer { harness.remove() }
        let device = Device()
        let (session, _) = try await device.registerAlice(with: harness.service)
        var queued: [Int] = []
        for uid in 1...5 { queued.append(try await harness.service.handle(Self.event(UInt32(uid)))) }
        #expect(queued == [1, 1, 1, 0, 0])
        #expect(try await harness.storage.pendingCount(sessionID: session.id, now: Date()) == 3)
    }

    @Test func streamsPerSessionAreCapped() async throws {
        let harness = try Harness { $0.maximumStreamsPerSession = 2 }
        defer { harness.remove() }
        let device = Device()
        let (session, _) = try await device.registerAlice(with: harness.service)
        let service = harness.service
        let polls = (0..<2).map { _ in Task { try await service.pending(for: session, wait: .seconds(30)) } }
        func waiters() -> Double? {
            service.metrics.registry.emitToString().split(separator: "\n")
                .first { $0.hasPrefix("notify_stream_waiters ") }.flatMap { Double($0.split(separator: " ")[1]) }
        }
        while waiters() != 2 { try await Task.sleep(for: .milliseconds(20)) }
        await #expect(throws: NotifyError.tooManyStreams) {
            try await service.pending(for: session, wait: .seconds(30))
        }
        // A fetch that does not wait is not a held stream.
        #expect(try await service.pending(for: session, wait: .zero).isEmpty)
        #expect(try await service.handle(Self.event(1)) == 1)
        for poll in polls { #expect(try await poll.value.count == 1) }
        // Both ended: a new stream is let in.
        #expect(try await service.pending(for: session, wait: .seconds(1)).count == 1)
    }

    @Test func backgroundDeliveriesAreCapped() async throws {
        let tasks = BackgroundTasks()
        let (stream, continuation) = AsyncStream<Void>.makeStream()
        #expect(await tasks.start(limit: 1) { for await _ in stream {} })
        #expect(await tasks.start(limit: 1) {} == false)
        continuation.finish()
        await tasks.drain()
        #expect(await tasks.start(limit: 1) {})
        await tasks.drain()
    }

    @Test func anonymousClientsGetAFixedSentenceWithoutTheMailServersAddress() async throws {
        let harness = try Harness(authenticator: UnreachableMailServer())
        defer { harness.remove() }
        try await harness.application.test(.router) { client in
            try await client.execute(
                uri: "/v1/sessions",
                method: .post,
                headers: jsonHeaders,
                body: json(Device().registration(user: "alice", password: "alice-pw"))
            ) { response in
                let body = String(buffer: response.body)
                #expect(response.status == .badGateway)
                #expect(body.contains("The mail server could not check the credentials"))
                #expect(!body.contains("10.1.2.3"))
                #expect(!body.contains("imap.internal"))
                #expect(!body.contains("993"))
            }
            var browser = Browser()
            let csrf = try await client.execute(uri: "/account", method: .get) { response in
                browser.take(response)
                return try #require(csrfField(String(buffer: response.body)))
            }
            try await client.execute(
                uri: "/account/sign-in",
                method: .post,
                headers: browser.headers,
                body: ByteBuffer(string: "csrf=\(csrf)&user=alice&password=alice-pw")
            ) { response in
                let body = String(buffer: response.body)
                #expect(response.status == .badGateway)
                #expect(!body.contains("10.1.2.3"))
                #expect(!body.contains("imap.internal"))
            }
        }
    }

    @Test(arguments: [
        "\u{1B}[2J", "a\tb", "\u{1B}]0;owned\u{07}", "\u{202E}gnp.exe", "\u{2066}x\u{2069}", "zero\u{200B}width",
        "a" + String(repeating: "\u{0301}", count: 20_000), String(repeating: "é", count: 101),
        String(repeating: "😀", count: 51), "",
    ])
    func deviceNamesWithControlOrDirectionCharactersOrTooManyBytesAreRefused(name: String) async throws {
        let harness = try Harness()
        defer { harness.remove() }
        try await harness.application.test(.router) { client in
            try await client.execute(
                uri: "/v1/sessions",
                method: .post,
                headers: jsonHeaders,
                body: json(Device().registration(user: "alice", password: "alice-pw", name: name))
            ) { #expect($0.status == .badRequest) }
        }
        #expect(try await harness.storage.allSessions().isEmpty)
    }

    @Test func ordinaryDeviceNamesAreAccepted() {
        for name in [
            "Anna's phone", "Téléphone de Zoé", "手机", "📱 work", "laptop (2)", String(repeating: "é", count: 100),
        ] {
            #expect(DeviceName.isAcceptable(name), "\(name)")
        }
    }

    @Test func terminalTextEscapesControlAndDirectionCharacters() {
        #expect(TerminalText.escaped("a\u{1B}[2J\tb") == #"a\u{1B}[2J\u{9}b"#)
        #expect(TerminalText.escaped("\u{202E}x") == #"\u{202E}x"#)
        #expect(TerminalText.escaped(#"back\slash"#) == #"back\\slash"#)
        #expect(TerminalText.escaped("Zoé 📱") == "Zoé 📱")
    }

    @Test func theWebPushRequestTargetKeepsItsEscapes() throws {
        let url = try #require(URL(string: "https://push.example/a%0D%0AX-Evil:%201/b?c=%0A&d=%20"))
        #expect(try WebPushSender.requestTarget(of: url) == "/a%0D%0AX-Evil:%201/b?c=%0A&d=%20")
        // The shared helper is the one both use (it decoded the path before: a line break in the request line).
        #expect(PinnedHTTP.target(of: url) == "/a%0D%0AX-Evil:%201/b?c=%0A&d=%20")
        #expect(PinnedHTTP.target(of: try #require(URL(string: "https://push.example/a%20b"))) == "/a%20b")
        #expect(try WebPushSender.requestTarget(of: try #require(URL(string: "https://push.example"))) == "/")
    }

    @Test func loopbackIsJudgedOnTheParsedAddress() {
        for host in ["127.0.0.1", "127.1.2.3", "::1", "localhost", "LOCALHOST", "::ffff:127.0.0.1"] {
            #expect(Loopback.isLoopback(host: host), "\(host)")
        }
        for host in ["127.evil.example", "127.0.0.1.nip.io", "0.0.0.0", "::", "10.0.0.1", "128.0.0.1", ""] {
            #expect(!Loopback.isLoopback(host: host), "\(host)")
        }
    }
}
