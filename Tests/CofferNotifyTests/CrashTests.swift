import CofferNotify
import CofferPush
import CofferTesting
import Crypto
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

#if canImport(Glibc)
import Glibc
#endif

/// kill -9 of `coffer-notify serve` in the middle of event bursts, three times: every registration and escrowed
/// FastSync key that was answered survives, every event that was answered reaches the device (or was acked, or its
/// ack was cut by the kill), and no push that the device's ack was answered for comes back.
@Suite(.serialized) struct NotifyCrashTests {
    /// A running `coffer-notify serve` on the crash test's data folder.
    struct Server {
        let process: Process
        let base: String

        static func start(data: URL, logs: URL, dovecot: NotifyDovecot, round: Int) async throws -> Server {
            let output = logs.appendingPathComponent("out-\(round).txt")
            _ = FileManager.default.createFile(atPath: output.path, contents: nil)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: NotifyBinary.path)
            process.arguments = ["serve", "--port", "0", "--data-dir", data.path] + (try dovecot.serveArguments())
            process.standardOutput = try FileHandle(forWritingTo: output)
            process.standardError = FileHandle.nullDevice
            try process.run()
            for _ in 0..<600 {
                let text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
                if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("coffer-notify listening on") }),
                    let port = line.split(separator: ":").last.flatMap({ Int($0) })
                {
                    return Server(process: process, base: "http://127.0.0.1:\(port)")
                }
                try await Task.sleep(for: .milliseconds(100))
            }
            kill(process.processIdentifier, SIGKILL)
            throw TestSetupError(reason: "coffer-notify did not start")
        }

        func killHard() {
            guard process.isRunning else { return }
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    /// The API's JSON: dates in ISO 8601.
    static let decoder: JSONDecoder = {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }()

    /// One HTTP exchange; nil when the connection failed (the server was killed).
    static func exchange(
        _ url: String,
        method: String = "GET",
        headers: [String: String] = [:],
        body: Data? = nil
    ) async -> (status: Int, body: Data)? {
        guard let address = URL(string: url) else { return nil }
        var request = URLRequest(url: address)
        request.httpMethod = method
        request.httpBody = body
        request.timeoutInterval = 30
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        guard let (data, response) = try? await URLSession.shared.data(for: request) else { return nil }
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, data)
    }

    struct Registered: Sendable {
        let device: Device
        let token: String
        let sessionID: String
        let kekExpires: Int64
    }

    /// Registers a device and escrows a KEK for it; nil when the server went away meanwhile.
    static func register(_ base: String) async throws -> Registered? {
        let device = Device()
        let request = device.registration(user: NotifyDovecot.user, password: NotifyDovecot.password)
        guard
            let (status, body) = await exchange(
                "\(base)/v1/sessions",
                method: "POST",
                headers: ["Content-Type": "application/json"],
                body: try JSONEncoder().encode(request)
            )
        else { return nil }
        try #require(status == 201, "registration: \(status) \(String(decoding: body, as: UTF8.self))")
        let token = try decoder.decode(TokenResponse.self, from: body)
        let auth = ["Authorization": "Bearer \(token.token)", "Content-Type": "application/json"]
        guard let (_, keyBody) = await exchange("\(base)/v1/fastsync/key", headers: auth) else { return nil }
        let key = try JSONDecoder().decode(FastSyncKeyResponse.self, from: keyBody)
        let expires = Int64(Date().timeIntervalSince1970) + 3600
        let upload = try FastSyncEscrowFormat.seal(
            kek: SymmetricKey(size: .bits256),
            to: try #require(Base64URL.decode(key.publicKey)),
            sessionID: token.sessionID,
            expires: expires
        )
        guard
            let (status2, _) = await exchange(
                "\(base)/v1/fastsync/kek",
                method: "PUT",
                headers: auth,
                body: try JSONEncoder().encode(upload)
            )
        else { return nil }
        try #require(status2 == 204)
        return Registered(device: device, token: token.token, sessionID: token.sessionID, kekExpires: expires)
    }

    /// What the acking device saw: UIDs whose ack the server answered, and UIDs of events the server answered.
    actor Ledger {
        var acked: Set<UInt32> = []
        /// Acks sent when the server was killed: maybe done, maybe not.
        var unanswered: Set<UInt32> = []
        var answered: Set<UInt32> = []
        var redelivered: [UInt32] = []
        func ack(_ uids: [UInt32]) { acked.formUnion(uids) }
        func ackUnanswered(_ uids: [UInt32]) { unanswered.formUnion(uids) }
        func answer(_ uid: UInt32) { answered.insert(uid) }
        /// Records UIDs seen on the stream that had already been acked.
        func check(_ uids: [UInt32]) { redelivered += uids.filter { acked.contains($0) } }
    }

    /// Reads the device's stream once and acks what came; false when the server went away.
    static func drain(_ base: String, _ device: Registered, ledger: Ledger, wait: Int) async throws -> Bool {
        let auth = ["Authorization": "Bearer \(device.token)", "Content-Type": "application/json"]
        guard let (status, body) = await exchange("\(base)/v1/stream?wait=\(wait)", headers: auth) else {
            return false
        }
        try #require(status == 200)
        let messages = try decoder.decode(StreamResponse.self, from: body).messages
        var uids: [UInt32] = []
        for message in messages {
            let opened = try device.device.keys.open(try #require(Base64URL.decode(message.body)))
            uids.append(try #require(try JSONDecoder().decode(PushMessage.self, from: Data(opened)).uid))
        }
        await ledger.check(uids)
        guard !messages.isEmpty else { return true }
        guard
            let (ackStatus, _) = await exchange(
                "\(base)/v1/stream/ack",
                method: "POST",
                headers: auth,
                body: try JSONEncoder().encode(AckRequest(ids: messages.map(\.id)))
            )
        else {
            await ledger.ackUnanswered(uids)
            return false
        }
        if ackStatus == 200 { await ledger.ack(uids) }
        return true
    }

    @Test func killDashNineDuringEventBurstsLosesNoRegistrationOrKeyAndRepeatsNoAckedPush() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: NotifyBinary.path), "build coffer-notify first")
        let dovecot = try await NotifyDovecot.start()
        defer { dovecot.stop() }
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("coffer-notify-crash-\(UUID())")
        let data = root.appendingPathComponent("data")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        let ledger = Ledger()
        var devices: [Registered] = []
        var nextUID: UInt32 = 1
        var random = SystemRandomNumberGenerator()

        for round in 0..<3 {
            let server = try await Server.start(data: data, logs: root, dovecot: dovecot, round: round)
            defer { server.killHard() }
            // What was answered before the last kill is all still here.
            for device in devices {
                let auth = ["Authorization": "Bearer \(device.token)"]
                let kek = await Self.exchange("\(server.base)/v1/fastsync/kek", headers: auth)
                #expect(kek?.status == 200, "round \(round): the session is gone")
                let status = try kek.map { try JSONDecoder().decode(FastSyncStatusResponse.self, from: $0.body) }
                #expect(status?.expires == device.kekExpires, "round \(round): the escrowed key is gone")
            }
            devices.append(try #require(try await Self.register(server.base)))
            let secret = try Data(contentsOf: data.appendingPathComponent("event-secret"))
            let basic = "Basic " + Data("dovecot:".utf8 + secret).base64EncodedString()
            let first = nextUID
            let base = server.base
            let acker = devices[0]
            // The burst: events one after another, a device reading and acking beside them, a registration (with
            // its IMAP login and escrow) in the middle, and kill -9 at a random moment.
            let events = Task {
                var uid = first
                while true {
                    let body =
                        #"{"user":"\#(NotifyDovecot.user)","event":"messageNew","folder":"INBOX","imap-uid":\#(uid),"subject":"s"}"#
                    guard
                        let (status, _) = await Self.exchange(
                            "\(base)/v1/events/dovecot",
                            method: "PUT",
                            headers: ["Authorization": basic, "Content-Type": "application/json"],
                            body: Data(body.utf8)
                        )
                    else { return uid }
                    if status == 200 { await ledger.answer(uid) }
                    uid += 1
                }
            }
            let reader = Task {
                while try await Self.drain(base, acker, ledger: ledger, wait: 0) {}
            }
            let late = try await Self.register(base)
            // The kill comes at a random moment after at least 5 events of this round were answered (a fixed time
            // could pass with almost none on a loaded machine; one CI run saw 10 events in three rounds).
            let enough = await ledger.answered.count + 5
            let deadline = ContinuousClock.now + .seconds(60)
            while await ledger.answered.count < enough, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            try await Task.sleep(for: .milliseconds(Int.random(in: 0...600, using: &random)))
            server.killHard()
            // A UID whose event got no answer may still have been queued: the next round never reuses it.
            nextUID = await events.value + 1
            try await reader.value
            if let late { devices.append(late) }
        }

        // After the last kill: the device reads what is left. Every answered event is there or was acked, and
        // nothing acked came back.
        let server = try await Server.start(data: data, logs: root, dovecot: dovecot, round: 3)
        defer { server.killHard() }
        var left: [UInt32] = []
        let auth = ["Authorization": "Bearer \(devices[0].token)"]
        while true {
            let answer = try #require(await Self.exchange("\(server.base)/v1/stream", headers: auth))
            let messages = try Self.decoder.decode(StreamResponse.self, from: answer.body).messages
            if messages.isEmpty { break }
            for message in messages {
                let opened = try devices[0].device.keys.open(try #require(Base64URL.decode(message.body)))
                left.append(try #require(try JSONDecoder().decode(PushMessage.self, from: Data(opened)).uid))
            }
            _ = await Self.exchange(
                "\(server.base)/v1/stream/ack",
                method: "POST",
                headers: auth.merging(["Content-Type": "application/json"]) { $1 },
                body: try JSONEncoder().encode(AckRequest(ids: messages.map(\.id)))
            )
        }
        await ledger.check(left)
        let acked = await ledger.acked
        let answered = await ledger.answered
        #expect(answered.count >= 15, "the bursts were too short to mean anything: \(answered.count) events")
        print("NotifyCrashTests: \(answered.count) events answered, \(acked.count) acked, \(left.count) left")
        let redelivered = await ledger.redelivered
        #expect(redelivered.isEmpty, "acked pushes came back: \(redelivered)")
        let unanswered = await ledger.unanswered
        let lost = answered.subtracting(acked).subtracting(left).subtracting(unanswered)
        #expect(lost.isEmpty, "answered events lost: \(lost.sorted())")
        #expect(devices.count >= 4)
    }
}
