import CofferIMAP
import CofferSMTP
import CofferTesting
import CofferTransport
import Crypto
import Foundation
import NIOConcurrencyHelpers

/// The test Dovecot with submission, with the SMTP tests' helpers.
typealias LiveSubmission = TestServers.SubmissionDovecot

extension TestServers.SubmissionDovecot {
    /// The endpoint of the submissions port (or, for STARTTLS, the submission port), trusting the test CA (or
    /// `caFile`) and pinned to certificate A's key and the backup key (or to `pinned`).
    func endpoint(
        security: ServerEndpoint.Security = .implicitTLS,
        pinned: [String] = ["a", "backup"],
        caFile: String? = nil
    ) throws -> ServerEndpoint {
        ServerEndpoint(
            host: Self.name,
            port: security == .startTLS ? submissionPort : submissionsPort,
            security: security,
            pins: try pinned.map { try pin($0) },
            caFile: caFile ?? "\(certs)/ca.pem",
            connectAddress: "127.0.0.1"
        )
    }

    /// The sender's credentials.
    static var senderCredentials: SMTPCredentials { SMTPCredentials(user: sender.user, password: sender.password) }

    /// An IMAP client logged in as `user` over IMAPS, pinned like the submission endpoint.
    func imap(user: String, password: String) async throws -> IMAPClient {
        let pins = try ["a", "backup"].map { key in
            guard let pin = SPKIPin(base64: try self.pin(key)) else { throw TestSetupError(reason: "bad pin \(key)") }
            return pin
        }
        let client = try await IMAPClient.connect(
            IMAPConfiguration(
                tls: PinnedTLSConfiguration(
                    serverName: Self.name,
                    port: imapsPort,
                    connectAddress: "127.0.0.1",
                    trustRoots: .caBundle(path: "\(certs)/ca.pem"),
                    pinPolicy: try PinPolicy(hosts: [HostPinPolicy(host: Self.name, pins: pins)]),
                    timeout: .seconds(60)
                )
            )
        )
        try await client.login(user: user, password: password)
        return client
    }

    /// The recipient's INBOX, every message's exact bytes, waiting up to `seconds` for `count` messages (the relay
    /// delivers asynchronously after the submission server has answered).
    func recipientInbox(count: Int, seconds: Int = 30) async throws -> [[UInt8]] {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while true {
            let client = try await imap(user: Self.recipient.user, password: Self.recipient.password)
            let selected = try await client.select("INBOX", readOnly: true)
            var bodies: [[UInt8]] = []
            if selected.exists >= count {
                bodies = try await client.uidFetch("1:*").compactMap(\.body)
            }
            await client.logout()
            if bodies.count >= count || ContinuousClock.now > deadline { return bodies }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    /// The number of messages in the recipient's INBOX now.
    func recipientCount() async throws -> UInt32 {
        let client = try await imap(user: Self.recipient.user, password: Self.recipient.password)
        let selected = try await client.select("INBOX", readOnly: true)
        await client.logout()
        return selected.exists
    }

    /// Waits until Dovecot's log has a line holding every one of `words` (it writes asynchronously).
    func waitForLogLine(containing words: [String], seconds: Int = 10) async throws -> String? {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            if let line = log().split(separator: "\n").first(where: { line in words.allSatisfy(line.contains) }) {
                return String(line)
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        return nil
    }
}

extension SMTPTimeouts {
    /// The tests' limits: a minute to connect, as the IMAP tests allow, since certificate checks share two cores with
    /// the other suites' servers.
    static let tests = SMTPTimeouts(connect: .seconds(60), idle: .seconds(120))
}

/// A message body as an async sequence of chunks, from bytes in memory.
struct ChunkedBody: AsyncSequence, Sendable {
    typealias Element = [UInt8]
    let bytes: [UInt8]
    var chunkSize = 7

    struct AsyncIterator: AsyncIteratorProtocol {
        let bytes: [UInt8]
        let chunkSize: Int
        var offset = 0
        mutating func next() async throws -> [UInt8]? {
            guard offset < bytes.count else { return nil }
            let end = Swift.min(bytes.count, offset + chunkSize)
            defer { offset = end }
            return Array(bytes[offset..<end])
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(bytes: bytes, chunkSize: chunkSize) }
}

/// A large message made as it is read: a header, then `lines` base64-like lines of 76 characters, generated from a
/// counter, so neither the test nor the client ever holds it whole. The SHA-256 of every byte handed out is kept.
struct GeneratedBody: AsyncSequence, Sendable {
    typealias Element = [UInt8]
    let header: [UInt8]
    let lines: Int
    let digest = NIOLockedValueBox(SHA256())

    /// The size of the whole message.
    var size: Int { header.count + lines * 78 }

    struct AsyncIterator: AsyncIteratorProtocol {
        let body: GeneratedBody
        var line = -1

        mutating func next() async throws -> [UInt8]? {
            var chunk: [UInt8]
            if line < 0 {
                chunk = body.header
                line = 0
            } else {
                guard line < body.lines else { return nil }
                chunk = []
                chunk.reserveCapacity(78 * 840)
                let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
                let end = Swift.min(body.lines, line + 840)
                while line < end {
                    var state = UInt64(line) &* 0x9E37_79B9_7F4A_7C15
                    for _ in 0..<76 {
                        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                        chunk.append(alphabet[Int(state >> 58)])
                    }
                    chunk.append(0x0D)
                    chunk.append(0x0A)
                    line += 1
                }
            }
            let bytes = chunk
            body.digest.withLockedValue { $0.update(data: bytes) }
            return chunk
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(body: self) }
}

/// Samples this process's resident set size (`/proc/self/statm`) on a thread of its own until stopped.
final class ResidentSetSampler: Sendable {
    private let state = NIOLockedValueBox<(peak: Int, running: Bool)>((0, true))

    init() {
        let state = state
        let thread = Thread {
            while state.withLockedValue({ $0.running }) {
                let rss = ResidentSetSampler.current()
                state.withLockedValue { $0.peak = max($0.peak, rss) }
                usleep(2000)
            }
        }
        state.withLockedValue { $0.peak = Self.current() }
        thread.start()
    }

    /// Stops sampling and returns the peak seen, in bytes.
    func stop() -> Int {
        state.withLockedValue { $0.running = false }
        usleep(10_000)
        return state.withLockedValue { max($0.peak, Self.current()) }
    }

    /// The resident set size now, in bytes.
    static func current() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = text.split(separator: " ")
        return fields.count > 1 ? (Int(fields[1]) ?? 0) * Int(sysconf(Int32(_SC_PAGESIZE))) : 0
    }
}

/// A test message with a Message-ID and a Date, so no server adds or rewrites a header field of it.
func testMessage(subject: String, body: String) -> [UInt8] {
    Array(
        ("From: Alice <alice@coffer.test>\r\nTo: Bob <bob@coffer.test>\r\nSubject: \(subject)\r\n"
            + "Message-ID: <\(UUID().uuidString)@coffer.test>\r\nDate: Thu, 26 Nov 2026 03:00:00 +0000\r\n"
            + "MIME-Version: 1.0\r\nContent-Type: text/plain; charset=us-ascii\r\n\r\n\(body)").utf8
    )
}

extension Array where Element == UInt8 {
    /// Whether these bytes end with `suffix` (a delivered message is the sent one with trace fields in front).
    func hasSuffix(_ suffix: [UInt8]) -> Bool {
        count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix
    }
}
