import CofferNotify
import CofferPush
import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

@Suite struct EventTests {
    static let subject = "Canary subject 7f3a9 quarterly numbers"
    static let sender = "Canary Sender <canary-4be1@example.org>"

    static func event(user: String = "alice", subject: String = subject) -> ByteBuffer {
        // What Dovecot's ox driver POSTs (push-notification-driver-ox.c), snippet and unseen included.
        ByteBuffer(
            string: """
                {"user":"\(user)","event":"messageNew","folder":"INBOX","imap-uidvalidity":1700000000,\
                "imap-uid":42,"from":"\(sender.replacingOccurrences(of: "\"", with: "\\\""))",\
                "subject":"\(subject)","snippet":"canary snippet","unseen":3}
                """
        )
    }

    @Test func anEventBecomesOnePaddedSealedMessagePerLiveSessionThatOnlyItsDeviceOpens() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        let phone = Device()
        let laptop = Device()
        let bobDevice = Device()
        try await harness.application.test(.router) { client in
            let phoneSession = try await client.register(phone.registration(user: "alice", password: "alice-pw"))
            let laptopSession = try await client.register(laptop.registration(user: "alice", password: "alice-pw"))
            let bobSession = try await client.register(bobDevice.registration(user: "bob", password: "bob-pw"))
            try await client.execute(
                uri: "/v1/events/dovecot",
                method: .put,
                headers: basic("dovecot", Harness.eventSecret),
                body: Self.event()
            ) { response in
                #expect(response.status == .ok)
                let decoded = try decode(CountResponse.self, response.body)
                #expect(decoded.count == 2)
            }
            for (device, session) in [(phone, phoneSession), (laptop, laptopSession)] {
                let stream = try await client.execute(uri: "/v1/stream", method: .get, headers: bearer(session.token)) {
                    try decode(StreamResponse.self, $0.body)
                }
                #expect(stream.messages.count == 1)
                let first = try #require(stream.messages.first)
                let body = try #require(Base64URL.decode(first.body))
                #expect(body.count == 4096)
                let plaintext = try device.keys.open(body)
                let message = try JSONDecoder().decode(PushMessage.self, from: Data(plaintext))
                #expect(message.subject == Self.subject)
                #expect(message.from == Self.sender)
                #expect(message.folder == "INBOX")
                #expect(message.uid == 42)
                #expect(message.uidValidity == 1_700_000_000)
                #expect(!String(decoding: plaintext, as: UTF8.self).contains("snippet"))
                // Another device's keys cannot open it.
                #expect(throws: CofferPushError.self) { try bobDevice.keys.open(body) }
            }
            try await client.execute(uri: "/v1/stream", method: .get, headers: bearer(bobSession.token)) {
                let decoded = try decode(StreamResponse.self, $0.body)
                #expect(decoded.messages.isEmpty)
            }
        }
    }

    @Test func ackDeletesOnlyTheCallersMessages() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        try await harness.application.test(.router) { client in
            let phone = try await client.register(Device().registration(user: "alice", password: "alice-pw"))
            let laptop = try await client.register(Device().registration(user: "alice", password: "alice-pw"))
            for _ in 0..<2 {
                try await client.execute(
                    uri: "/v1/events/dovecot",
                    method: .post,
                    headers: basic("dovecot", Harness.eventSecret),
                    body: Self.event()
                ) { #expect($0.status == .ok) }
            }
            let phoneIDs = try await client.execute(uri: "/v1/stream", method: .get, headers: bearer(phone.token)) {
                try decode(StreamResponse.self, $0.body).messages.map(\.id)
            }
            #expect(phoneIDs.count == 2)
            // The laptop acking the phone's ids deletes nothing.
            try await client.execute(
                uri: "/v1/stream/ack",
                method: .post,
                headers: bearer(laptop.token),
                body: json(["ids": phoneIDs])
            ) {
                let decoded = try decode(CountResponse.self, $0.body)
                #expect(decoded.count == 0)
            }
            try await client.execute(
                uri: "/v1/stream/ack",
                method: .post,
                headers: bearer(phone.token),
                body: json(["ids": [phoneIDs[0]]])
            ) {
                let decoded = try decode(CountResponse.self, $0.body)
                #expect(decoded.count == 1)
            }
            try await client.execute(uri: "/v1/stream", method: .get, headers: bearer(phone.token)) {
                let decoded = try decode(StreamResponse.self, $0.body)
                #expect(decoded.messages.map(\.id) == [phoneIDs[1]])
            }
            try await client.execute(uri: "/v1/stream", method: .get, headers: bearer(laptop.token)) {
                let decoded = try decode(StreamResponse.self, $0.body)
                #expect(decoded.messages.count == 2)
            }
        }
    }

    @Test func aLongPollIsWokenByAnEvent() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        let device = Device()
        try await harness.application.test(.router) { client in
            let session = try await client.register(device.registration(user: "alice", password: "alice-pw"))
            async let polled = client.execute(uri: "/v1/stream?wait=30", method: .get, headers: bearer(session.token)) {
                try decode(StreamResponse.self, $0.body)
            }
            // Whether the poll starts before the event (and is woken) or after it (and finds it), it gets it.
            try await client.execute(
                uri: "/v1/events/dovecot",
                method: .post,
                headers: basic("dovecot", Harness.eventSecret),
                body: Self.event()
            ) { #expect($0.status == .ok) }
            let messages = try await polled.messages
            #expect(messages.count == 1)
            try await client.execute(uri: "/v1/stream?wait=31", method: .get, headers: bearer(session.token)) {
                #expect($0.status == .badRequest)
            }
        }
    }

    @Test func aLongPollOfARevokedSessionEndsWith401() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        try await harness.application.test(.router) { client in
            let phone = try await client.register(Device().registration(user: "alice", password: "alice-pw"))
            let laptop = try await client.register(Device().registration(user: "alice", password: "alice-pw"))
            async let polled = client.execute(uri: "/v1/stream?wait=30", method: .get, headers: bearer(phone.token)) {
                $0.status
            }
            try await client.execute(
                uri: "/v1/sessions/\(phone.sessionID)",
                method: .delete,
                headers: [.authorization: "bEaReR \(laptop.token)"]
            ) { #expect($0.status == .noContent) }
            // Waiting when the revocation came (woken, then refused) or arriving after it: 401 either way.
            #expect(try await polled == .unauthorized)
        }
    }

    @Test(arguments: [
        ["dovecot": "wrong-secret"], ["dovecot": "dovecot-event-secret-for-test"], ["dovecot": ""], [:],
    ])
    func eventsWithoutTheSecretAreRefusedAndQueueNothing(credentials: [String: String]) async throws {
        let harness = try Harness()
        defer { harness.remove() }
        try await harness.application.test(.router) { client in
            let session = try await client.register(Device().registration(user: "alice", password: "alice-pw"))
            var headers: HTTPFields = jsonHeaders
            if let (user, password) = credentials.first { headers = basic(user, Array(password.utf8)) }
            try await client.execute(uri: "/v1/events/dovecot", method: .post, headers: headers, body: Self.event()) {
                #expect($0.status == .unauthorized)
            }
            // A session token is not the event secret either.
            try await client.execute(
                uri: "/v1/events/dovecot",
                method: .post,
                headers: bearer(session.token),
                body: Self.event()
            ) { #expect($0.status == .unauthorized) }
            try await client.execute(uri: "/v1/stream", method: .get, headers: bearer(session.token)) {
                let decoded = try decode(StreamResponse.self, $0.body)
                #expect(decoded.messages.isEmpty)
            }
        }
    }

    @Test func revokedSessionsGetNoPushes() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        try await harness.application.test(.router) { client in
            let phone = try await client.register(Device().registration(user: "alice", password: "alice-pw"))
            let laptop = try await client.register(Device().registration(user: "alice", password: "alice-pw"))
            try await client.execute(
                uri: "/v1/sessions/\(phone.sessionID)",
                method: .delete,
                headers: bearer(laptop.token)
            ) { #expect($0.status == .noContent) }
            try await client.execute(
                uri: "/v1/events/dovecot",
                method: .post,
                headers: basic("dovecot", Harness.eventSecret),
                body: Self.event()
            ) {
                let decoded = try decode(CountResponse.self, $0.body)
                #expect(decoded.count == 1)
            }
        }
        let revoked = try #require(try await harness.storage.allSessions().first { $0.revoked })
        #expect(try await harness.storage.pending(sessionID: revoked.id, now: Date(), limit: 10).isEmpty)
    }

    @Test func aLongSubjectIsCutToFitAndEveryBodyIsTheSameLength() throws {
        let keys = WebPush.UserAgentKeys()
        var lengths: Set<Int> = []
        for subject in ["", "short", String(repeating: "long ", count: 2000), String(repeating: "\u{1}", count: 900)] {
            let message = PushMessage(
                event: DovecotEvent(user: "alice", folder: "INBOX", uid: 1, from: "a@b", subject: subject)
            )
            let body = try message.seal(to: keys.subscription)
            lengths.insert(body.count)
            let opened = try JSONDecoder().decode(PushMessage.self, from: Data(try keys.open(body)))
            #expect(subject.hasPrefix(opened.subject ?? "-"))
        }
        #expect(lengths == [4096])
    }

    @Test func theDatabaseHoldsNoSubjectSenderOrTokenInTheClear() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        let tokens = try await harness.application.test(.router) { client in
            var tokens: [String] = []
            for _ in 0..<3 {
                let session = try await client.register(Device().registration(user: "alice", password: "alice-pw"))
                tokens.append(session.token)
            }
            for index in 0..<20 {
                try await client.execute(
                    uri: "/v1/events/dovecot",
                    method: .post,
                    headers: basic("dovecot", Harness.eventSecret),
                    body: Self.event(subject: Self.subject + " \(index)")
                ) { #expect($0.status == .ok) }
            }
            return tokens
        }
        let files = try FileManager.default.contentsOfDirectory(atPath: harness.folder.path)
        #expect(files.contains("notify.sqlite"))
        var canaries = ["Canary subject", "7f3a9", "canary-4be1", "Canary Sender", "alice-pw", "canary snippet"].map {
            Data($0.utf8)
        }
        for token in tokens {
            canaries.append(Data(token.dropFirst(5).utf8))
            canaries.append(Data(try #require(Base64URL.decode(token.dropFirst(5)))))
        }
        for file in files {
            let bytes = try Data(contentsOf: harness.folder.appendingPathComponent(file))
            for (index, canary) in canaries.enumerated() {
                #expect(bytes.range(of: canary) == nil, "\(file) holds canary \(index)")
            }
        }
    }
}
