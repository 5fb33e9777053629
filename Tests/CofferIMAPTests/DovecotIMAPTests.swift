import CofferTesting
import CofferTransport
import Foundation
import Testing

@testable import CofferIMAP

/// The shared test Dovecot, with the IMAP tests' helpers.
typealias LiveDovecot = TestServers.PinnedDovecot

extension TestServers.PinnedDovecot {
    /// The configuration pinned to certificate A and the backup key (or to `pinned`), on the IMAPS port or, for
    /// STARTTLS, on the plain IMAP port.
    func configuration(
        security: IMAPSecurity = .implicitTLS,
        pinned: [String] = ["a", "backup"]
    ) throws -> IMAPConfiguration {
        let pins = try pinned.map { key in
            guard let pin = SPKIPin(base64: try self.pin(key)) else { throw TestSetupError(reason: "bad pin \(key)") }
            return pin
        }
        let policy = try PinPolicy(hosts: [HostPinPolicy(host: Self.name, pins: pins)])
        return IMAPConfiguration(
            tls: PinnedTLSConfiguration(
                serverName: Self.name,
                port: security == .startTLS ? server.imapPort : server.imapsPort,
                connectAddress: "127.0.0.1",
                trustRoots: .caBundle(path: "\(certs)/ca.pem"),
                pinPolicy: policy,
                timeout: .seconds(60)
            ),
            security: security,
            // Small thresholds so the attachment message is streamed in chunks.
            limits: .init(streamBodyThreshold: 4096, chunkSize: 1000)
        )
    }

    /// Python's imaplib, as the reference: every INBOX message's UID, flags and exact bytes (base64).
    func imaplibMessages() async throws -> [(uid: UInt32, flags: [String], body: [UInt8])] {
        let script = """
            import base64, json, ssl, sys, imaplib, re
            sys.path.insert(0, \(String(reflecting: TestServers.repoRoot.appendingPathComponent("Tests/servers").path)))
            import dovecot
            info = dovecot.load(\(String(reflecting: server.dir)))
            ctx = ssl.create_default_context(cafile=\(String(reflecting: "\(certs)/ca.pem")))
            out = []
            with dovecot.IMAPS(info["imaps_port"], \(String(reflecting: Self.name)), ctx) as imap:
                imap.login(\(String(reflecting: Self.user)), \(String(reflecting: Self.password)))
                imap.select("INBOX", readonly=True)
                _, data = imap.uid("SEARCH", None, "ALL")
                for uid in data[0].split():
                    _, parts = imap.uid("FETCH", uid, "(FLAGS BODY.PEEK[])")
                    flags = re.search(rb"FLAGS \\(([^)]*)\\)", parts[0][0]).group(1).decode().split()
                    out.append({"uid": int(uid), "flags": flags, "body": base64.b64encode(parts[0][1]).decode()})
                imap.logout()
            print(json.dumps(out))
            """
        let result = try await awaitWaiting { try runCommand(["/usr/bin/env", "python3", "-c", script]) }
        guard result.code == 0, let line = result.output.split(separator: "\n").last,
            let list = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [[String: Any]]
        else { throw TestSetupError(reason: "imaplib failed: \(result.output)") }
        return list.compactMap { item in
            guard let uid = item["uid"] as? Int, let flags = item["flags"] as? [String],
                let body = (item["body"] as? String).flatMap({ Data(base64Encoded: $0) })
            else { return nil }
            return (UInt32(uid), flags, Array(body))
        }
    }
}

enum TestMail {
    static let plain = Array(
        ("From: Bob <bob@coffer.test>\r\nTo: alice@coffer.test\r\nSubject: plain one\r\n"
            + "Message-ID: <plain@coffer.test>\r\n\r\nHello Alice.\r\n").utf8
    )
    static let nonASCII = Array(
        ("From: =?UTF-8?Q?J=C3=BCrgen?= <j@coffer.test>\r\nTo: alice@coffer.test\r\n"
            + "Subject: =?UTF-8?B?R3LDvMOfZSBhdXMgS8O2bG4=?=\r\nX-Raw: Grüße\r\nMIME-Version: 1.0\r\n"
            + "Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n"
            + "Schöne Grüße, 東京.\r\n").utf8
    )
    static func attachment() -> [UInt8] {
        var random = SystemRandomNumberGenerator()
        let blob = (0..<30000).map { _ in UInt8.random(in: 0...255, using: &random) }
        let base64 = Data(blob).base64EncodedString(options: [.lineLength76Characters, .endLineWithCarriageReturn])
            .replacingOccurrences(of: "\r", with: "\r\n")
        let text =
            "From: carol@coffer.test\r\nTo: alice@coffer.test\r\nSubject: with attachment\r\nMIME-Version: 1.0\r\n"
            + "Content-Type: multipart/mixed; boundary=\"b1\"\r\n\r\n--b1\r\nContent-Type: text/plain\r\n\r\n"
            + "See attached.\r\n--b1\r\nContent-Type: application/octet-stream\r\n"
            + "Content-Disposition: attachment; filename=\"blob.bin\"\r\nContent-Transfer-Encoding: base64\r\n\r\n"
            + base64 + "\r\n--b1--\r\n"
        return Array(text.utf8)
    }
}

@Suite(.serialized) struct DovecotIMAPTests {
    @Test func fetchesWhatImaplibFetchesAndStoresSeenAndIdleSeesADelivery() async throws {
        let server = try await LiveDovecot.start()
        defer { server.stop() }
        for message in [TestMail.plain, TestMail.attachment(), TestMail.nonASCII] { try await server.deliver(message) }

        let client = try await IMAPClient.connect(try server.configuration())
        let greeting = await client.capabilities
        #expect(!greeting.isEmpty)
        try await client.login(user: LiveDovecot.user, password: LiveDovecot.password)
        let capabilities = await client.capabilities
        print("Dovecot capabilities after login: \(capabilities.sorted().joined(separator: " "))")
        #expect(capabilities.contains("IMAP4REV1"))
        let enabled = try await client.enable(["CONDSTORE", "QRESYNC"])
        #expect(enabled.contains("CONDSTORE"))

        let listing = try await client.list()
        #expect(listing.contains { $0.name == "INBOX" })
        let status = try await client.status("INBOX", items: ["MESSAGES", "UIDNEXT", "UIDVALIDITY"])
        #expect(status["MESSAGES"] == 3)

        let inbox = try await client.select("INBOX")
        #expect(inbox.exists == 3)
        #expect(inbox.uidValidity != nil)
        #expect(inbox.uidNext == 4)
        #expect(inbox.highestModSeq != nil)
        #expect(!inbox.readOnly)

        let uids = try await client.uidSearch()
        #expect(uids == [1, 2, 3])
        let fetched = try await client.uidFetch("1:*")
        let reference = try await server.imaplibMessages()
        #expect(fetched.map(\.uid) == reference.map(\.uid))
        for (mine, theirs) in zip(fetched, reference) {
            #expect(mine.body == theirs.body, "UID \(mine.uid): the bytes differ from imaplib's")
            #expect(mine.size == UInt64(theirs.body.count))
            #expect(mine.internalDate != nil)
            #expect(mine.modSeq != nil)
        }
        #expect(fetched.count == 3)

        try await client.uidStore("2", .add, flags: ["\\Seen"])
        let after = try await server.imaplibMessages()
        #expect(after.first { $0.uid == 2 }?.flags.contains("\\Seen") == true)
        #expect(after.first { $0.uid == 1 }?.flags.contains("\\Seen") == false)

        try await client.uidStore("1", .add, flags: ["\\Deleted"])
        try await client.uidExpunge("1")
        #expect(try await client.uidSearch() == [2, 3])

        // The harness's Dovecot offers METADATA (the push registration needs it): a server entry round-trips.
        #expect(capabilities.contains("METADATA"))
        try await client.setMetadata(mailbox: "", entries: [(name: "/private/comment", value: Array("coffer".utf8))])
        let read = try await client.getMetadata(mailbox: "", entries: ["/private/comment"])
        #expect(read == [MetadataEntry(name: "/private/comment", value: Array("coffer".utf8))])

        let idleTask = Task { try await client.idle(timeout: .seconds(20)) }
        try await Task.sleep(for: .milliseconds(500))
        try await server.deliver(TestMail.plain)
        let changes = try await idleTask.value
        #expect(changes.contains { if case .exists(3) = $0 { true } else { false } })

        // Nothing changed, so nothing that reports a change arrives. Dovecot may still send its keepalive
        // ("* OK Still here") at any moment: it aligns keepalives per client address, not per IDLE.
        let quiet = try await client.idle(timeout: .milliseconds(300))
        let quietChanges = quiet.filter {
            switch $0 {
            case .exists, .expunge, .fetch, .vanished, .recent: true
            default: false
            }
        }
        #expect(quietChanges.isEmpty)
        await client.logout()
    }

    @Test func authenticatePlainAndAWrongPasswordIsATypedErrorWithoutThePassword() async throws {
        let server = try await LiveDovecot.start()
        defer { server.stop() }
        let client = try await IMAPClient.connect(try server.configuration())
        let wrong = "wrong-password-canary-5521"
        do {
            try await client.login(user: LiveDovecot.user, password: wrong)
            Issue.record("a wrong password logged in")
        } catch {
            guard case .commandFailed(let command, let status, _, _) = error else {
                Issue.record("expected commandFailed, got \(error)")
                return
            }
            #expect(command == "LOGIN")
            #expect(status == "NO")
            #expect(!error.description.contains(wrong))
        }
        try await client.authenticatePlain(user: LiveDovecot.user, password: LiveDovecot.password)
        let inbox = try await client.select("INBOX", readOnly: true)
        #expect(inbox.readOnly)
        await client.logout()
    }

    @Test func cancellingTheTaskEndsAWaitWithCancelledAndClosesTheConnection() async throws {
        let server = try await LiveDovecot.start()
        defer { server.stop() }
        let client = try await IMAPClient.connect(try server.configuration())
        try await client.login(user: LiveDovecot.user, password: LiveDovecot.password)
        _ = try await client.select("INBOX")
        let waiting = Task { try await client.idle(timeout: .seconds(120)) }
        try await Task.sleep(for: .milliseconds(300))
        waiting.cancel()
        await #expect(throws: IMAPError.cancelled) { _ = try await waiting.value }
        await #expect(throws: IMAPError.connectionClosed) { _ = try await client.noop() }
    }

    @Test func aCertificateThatIsNotPinnedIsRefusedBeforeAnyIMAP() async throws {
        let server = try await LiveDovecot.start()
        defer { server.stop() }
        var configuration = try server.configuration()
        let b = try String(contentsOfFile: "\(server.certs)/b.pin", encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let backup = try String(contentsOfFile: "\(server.certs)/backup.pin", encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        configuration.tls.pinPolicy = try PinPolicy(hosts: [
            HostPinPolicy(host: LiveDovecot.name, pins: [SPKIPin(base64: b)!, SPKIPin(base64: backup)!])
        ])
        await #expect {
            _ = try await IMAPClient.connect(configuration)
        } throws: { error in
            guard case .transport(let sentence) = error as? IMAPError else { return false }
            return sentence.contains("refused")
        }
    }
}
