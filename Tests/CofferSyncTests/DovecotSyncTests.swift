import CofferCrypto
import CofferIMAP
import CofferStore
import CofferTesting
import Foundation
import Testing

@testable import CofferSync

/// Syncs against a private live Dovecot and compares with what imaplib sees there.
@Suite(.serialized) struct DovecotSyncTests {
    /// A world with the server's account added; the syncer streams large bodies in small chunks.
    func setUp(_ server: SyncDovecot) async throws -> (SyncWorld, Syncer, Int64) {
        let world = try await SyncWorld()
        let syncer = Syncer(
            store: world.store,
            batchSize: 2,
            limits: .init(streamBodyThreshold: 4096, chunkSize: 1000),
            timeout: .seconds(60)
        )
        let account = try await world.store.addServerAccount(try server.account())
        return (world, syncer, account)
    }

    /// The store's INBOX locations against imaplib's INBOX: same UIDs, same sizes, flags as the server has them.
    func expectMatches(_ world: SyncWorld, _ server: SyncDovecot, account: Int64) async throws {
        let reference = try await server.messages()
        let folder = try #require(try await world.store.syncFolder(accountID: account, name: "INBOX"))
        let locations = try await world.store.syncLocations(folderID: folder.id)
        #expect(locations.map(\.uid) == reference.map(\.uid))
        for (location, theirs) in zip(locations, reference) {
            let detail = try await world.store.message(location.messageID)
            #expect(detail.summary.size == theirs.body.count, "UID \(location.uid): a different size")
            #expect(location.localFlags == Syncer.flags(theirs.flags), "UID \(location.uid): different flags")
        }
        #expect(try await world.store.count() == reference.count)
    }

    @Test func firstSyncMatchesTheServerAndASecondFetchesNothingThenOnlyNewMail() async throws {
        let server = try await SyncDovecot.start()
        defer { server.stop() }
        let markers = ["syncalpha", "syncbravo", "synccharlie"]
        try await server.deliver(SyncMail.message(markers[0]))
        try await server.deliver(SyncMail.attachment(markers[1]))
        try await server.deliver(SyncMail.nonASCII)
        try await server.deliver(
            SyncMail.message(markers[2], extraBody: String(repeating: "line of text\r\n", count: 2000))
        )
        let (world, syncer, account) = try await setUp(server)

        let first = try await syncer.sync(accountID: account)
        #expect(first.fetched == 4)
        #expect(first.deleted == 0)
        try await expectMatches(world, server, account: account)
        let withAttachment = try #require(try await world.store.search(markers[1]).first)
        #expect(try await world.store.attachments(of: withAttachment.id).count == 1)
        #expect(try await world.store.search("canaryumlautword").count == 1)

        let second = try await syncer.sync(accountID: account)
        #expect(
            second
                == {
                    var s = SyncSummary()
                    s.folders = 1
                    return s
                }()
        )

        try await server.deliver(SyncMail.message("syncdelta"))
        let third = try await syncer.sync(accountID: account)
        #expect(third.fetched == 1)
        try await expectMatches(world, server, account: account)

        // Canary: no unique word of any message is in Coffer's files.
        try world.store.close()
        let files = world.root.allFiles()
        #expect(files.contains { $0.hasSuffix(MailStore.databaseName) })
        for file in files {
            let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: file)))
            for word in markers + ["syncdelta", "canaryumlautword", "bob@coffer.test", SyncDovecot.password] {
                #expect(!ByteSearch.contains(Array(word.utf8), in: bytes), "\(word) is in \(file)")
            }
        }
    }

    /// The issue's live test: a subscribed folder with a non-ASCII name holding an attachment, non-ASCII headers
    /// and two 10 MB messages (a 10 MB attachment and 10 MB of text) matches what imaplib reads there, byte for byte
    /// where the store gives bytes back, and no word of it is in Coffer's files afterwards.
    @Test func aFolderWithAttachmentsNonASCIIHeadersAndTenMegabyteMessagesMatchesTheServer() async throws {
        let server = try await SyncDovecot.start()
        defer { server.stop() }
        let wire = "Anh&AOQ-nge"
        var random = SystemRandomNumberGenerator()
        let blob = (0..<7_600_000).map { _ in UInt8.random(in: 0...255, using: &random) }
        let encoded = Data(blob).base64EncodedString(options: [.lineLength76Characters, .endLineWithCarriageReturn])
            .replacingOccurrences(of: "\r", with: "\r\n")
        let bigAttachment = Array(
            ("From: carol@coffer.test\r\nTo: alice@coffer.test\r\nSubject: bigattachword\r\nMIME-Version: 1.0\r\n"
                + "Message-ID: <bigattach@coffer.test>\r\nContent-Type: multipart/mixed; boundary=\"b1\"\r\n\r\n"
                + "--b1\r\nContent-Type: text/plain\r\n\r\nTen megabytes attached.\r\n--b1\r\n"
                + "Content-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=\"big.bin\"\r\n"
                + "Content-Transfer-Encoding: base64\r\n\r\n" + encoded + "\r\n--b1--\r\n").utf8
        )
        let lines = (0..<160_000).map { "line \($0) of a long letter that goes on and on and on and on.\r\n" }
        let bigText = SyncMail.message("bigtextword", extraBody: lines.joined() + "bigtextendword\r\n")
        #expect(bigAttachment.count > 10_000_000 && bigText.count > 10_000_000)
        let messages = [SyncMail.attachment("smallattachword"), SyncMail.nonASCII, bigAttachment, bigText]
        let files = TemporaryDirectory(prefix: "coffer-sync-big")
        for (index, message) in messages.enumerated() {
            try Data(message).write(to: URL(fileURLWithPath: "\(files.path)/\(index).eml"))
        }
        try await server.python(
            """
            imap.create(\(String(reflecting: wire)))
            imap.subscribe(\(String(reflecting: wire)))
            for index in range(\(messages.count)):
                with open(\(String(reflecting: files.path)) + "/%d.eml" % index, "rb") as f:
                    imap.append(\(String(reflecting: wire)), None, None, f.read())
            """
        )
        let (world, syncer, account) = try await setUp(server)
        let summary = try await syncer.sync(accountID: account)
        #expect(summary.folders == 2 && summary.fetched == 4)

        let reference = try await server.messages(wire)
        let folder = try #require(try await world.store.syncFolder(accountID: account, name: "Anhänge"))
        let locations = try await world.store.syncLocations(folderID: folder.id)
        #expect(locations.map(\.uid) == reference.map(\.uid))
        #expect(reference.map(\.body) == messages)
        for (location, theirs) in zip(locations, reference) {
            let detail = try await world.store.message(location.messageID)
            #expect(detail.summary.size == theirs.body.count, "UID \(location.uid): a different size")
            #expect(location.localFlags == Syncer.flags(theirs.flags))
        }
        let big = try #require(try await world.store.search("bigattachword").first)
        let attachment = try #require(try await world.store.attachments(of: big.id).first)
        #expect(try await world.store.attachmentContent(attachment.id).content == blob)
        let umlaut = try #require(try await world.store.search("canaryumlautword").first)
        #expect(umlaut.subject == "Grüße aus Köln")
        // The search index keeps a message's first words only; the whole text is there.
        let text = try #require(try await world.store.search("bigtextword").first)
        let textBody = try await world.store.message(text.id).textBody ?? ""
        #expect(textBody.hasSuffix("bigtextendword\r\n") || textBody.hasSuffix("bigtextendword\n"))
        #expect(textBody.utf8.count > 10_000_000)

        try world.store.close()
        let canaries =
            ["smallattachword", "canaryumlautword", "bigattachword", "bigtextword", "bigtextendword", "Anhänge", wire]
            + [String(encoded.dropFirst(400_000).prefix(60))]
        for file in world.root.allFiles() {
            let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: file)))
            for word in canaries {
                #expect(!ByteSearch.contains(Array(word.utf8), in: bytes), "\(word) is in \(file)")
            }
        }
    }

    @Test func expungesDeleteLocallyAndSeenTravelsBothWays() async throws {
        let server = try await SyncDovecot.start()
        defer { server.stop() }
        for marker in ["one", "two", "three"] { try await server.deliver(SyncMail.message("flags\(marker)")) }
        let (world, syncer, account) = try await setUp(server)
        #expect(try await syncer.sync(accountID: account).fetched == 3)

        // Server side: UID 1 expunged, UID 2 marked \Seen and \Flagged.
        try await server.python(
            """
            imap.select("INBOX")
            imap.uid("STORE", "1", "+FLAGS", "(\\\\Deleted)")
            imap.uid("STORE", "2", "+FLAGS", "(\\\\Seen \\\\Flagged)")
            imap.expunge()
            """
        )
        // Local side: UID 3 read here.
        let folder = try #require(try await world.store.syncFolder(accountID: account, name: "INBOX"))
        let third = try #require(try await world.store.syncLocations(folderID: folder.id).first { $0.uid == 3 })
        try await world.store.setFlags(third.messageID, adding: .seen)

        let summary = try await syncer.sync(accountID: account)
        #expect(summary.deleted == 1)
        #expect(summary.flagsPulled == 1)
        #expect(summary.flagsPushed == 1)
        #expect(try await world.store.search("flagsone").isEmpty)
        let reference = try await server.messages()
        #expect(reference.map(\.uid) == [2, 3])
        #expect(reference.first { $0.uid == 3 }?.flags.contains("\\Seen") == true)
        try await expectMatches(world, server, account: account)
        let second = try await world.store.syncLocations(folderID: folder.id).first { $0.uid == 2 }
        #expect(second?.localFlags == [.seen, .flagged])
        // Nothing left to do.
        let again = try await syncer.sync(accountID: account)
        #expect(again.deleted == 0 && again.flagsPulled == 0 && again.flagsPushed == 0 && again.fetched == 0)
    }

    @Test func aUIDValidityChangeForgetsTheFolderAndFetchesItAgain() async throws {
        let server = try await SyncDovecot.start()
        defer { server.stop() }
        let append = { (marker: String) in
            let literal = String(decoding: SyncMail.message(marker), as: UTF8.self)
            try await server.python("imap.append(\"Work\", None, None, \(String(reflecting: literal)).encode())")
        }
        try await server.python("imap.create(\"Work\")")
        try await append("workone")
        try await append("worktwo")
        let (world, syncer, account) = try await setUp(server)
        #expect(try await syncer.sync(accountID: account, folders: ["Work"]).fetched == 2)
        let before = try #require(try await world.store.syncFolder(accountID: account, name: "Work"))

        // Recreated with other mail: a new UIDVALIDITY, and UID 1 now names another message.
        try await server.python("imap.delete(\"Work\")\nimap.create(\"Work\")")
        try await append("workthree")
        let summary = try await syncer.sync(accountID: account, folders: ["Work"])
        #expect(summary.resynced == 1)
        #expect(summary.deleted == 2)
        #expect(summary.fetched == 1)
        let after = try #require(try await world.store.syncFolder(accountID: account, name: "Work"))
        #expect(after.uidValidity != before.uidValidity)
        #expect(try await world.store.count() == 1)
        #expect(try await world.store.search("workthree").count == 1)
        #expect(try await world.store.search("workone").isEmpty)
    }

    @Test func aWrongPinIsRefusedAndNothingIsWritten() async throws {
        let server = try await SyncDovecot.start()
        defer { server.stop() }
        try await server.deliver(SyncMail.message("pinned"))
        let world = try await SyncWorld()
        let syncer = Syncer(store: world.store, timeout: .seconds(60))
        // Certificate B's key and the backup: a valid chain, but not the key the server uses (A).
        let account = try await world.store.addServerAccount(
            try server.account(pins: [server.pin("b"), server.pin("backup")])
        )
        do {
            _ = try await syncer.sync(accountID: account)
            Issue.record("a sync through a wrong pin succeeded")
        } catch {
            guard case .imap(.transport(let sentence)) = error else {
                Issue.record("expected a transport error, got \(error)")
                return
            }
            #expect(sentence.contains(SyncDovecot.name))
        }
        #expect(try await world.store.count() == 0)
        #expect(try await world.store.syncFolders(accountID: account).isEmpty)
    }

    /// A pin failure goes to the account's report URL (an https collector on loopback, trusted through the account's
    /// CA bundle and not pinned), once: the same failure again within the day is not sent twice.
    @Test func aPinFailureIsReportedToTheAccountsReportURLOnce() async throws {
        let server = try await SyncDovecot.start()
        defer { server.stop() }
        let collector = try ReportCollector(
            certificate: "\(server.certs)/a-chain.pem",
            key: "\(server.certs)/a.key"
        )
        defer { collector.stop() }
        let world = try await SyncWorld()
        let syncer = Syncer(store: world.store, timeout: .seconds(60))
        var settings = try server.account(pins: [server.pin("b"), server.pin("backup")])
        settings.endpoint.pinReportURL = "https://localhost:\(collector.port)/pin-reports?app=coffer"
        let account = try await world.store.addServerAccount(settings)
        for _ in 0..<2 {
            await #expect(throws: SyncError.self) { _ = try await syncer.sync(accountID: account) }
        }
        let lines = collector.received()
        try #require(lines.count == 1, "\(lines)")
        #expect(lines[0].path == "/pin-reports?app=coffer")
        let report = try #require(
            try JSONSerialization.jsonObject(with: Data(lines[0].body.utf8)) as? [String: Any]
        )
        #expect(report["hostname"] as? String == SyncDovecot.name)
        #expect(report["noted-hostname"] as? String == SyncDovecot.name)
        #expect(report["port"] as? Int == server.server.imapsPort)
        #expect(report["validation-result"] as? String == "pinMismatch")
        #expect(report["enforce-pinning"] as? Bool == true)
        #expect(report["v"] as? Int == 1)
        let known = try #require(report["known-pins"] as? [String])
        #expect(Set(known) == Set(try [server.pin("b"), server.pin("backup")].map { "pin-sha256=\"\($0)\"" }))
        let served = try #require(report["served-chain-pins"] as? [String])
        #expect(served.first == "pin-sha256=\"\(try server.pin("a"))\"")
        #expect(!lines[0].body.contains(SyncDovecot.password))
    }

    /// An account record whose pins expired (record v4's `pinExpires`): the wrong pins no longer refuse, the sync
    /// completes, and the mismatch is reported as not enforced.
    @Test func anAccountWhosePinsExpiredSyncsAndReportsTheMismatch() async throws {
        let server = try await SyncDovecot.start()
        defer { server.stop() }
        try await server.deliver(SyncMail.message("expiredpins"))
        let collector = try ReportCollector(
            certificate: "\(server.certs)/a-chain.pem",
            key: "\(server.certs)/a.key"
        )
        defer { collector.stop() }
        let world = try await SyncWorld()
        let syncer = Syncer(store: world.store, timeout: .seconds(60))
        var settings = try server.account(pins: [server.pin("b"), server.pin("backup")])
        settings.endpoint.pinReportURL = "https://localhost:\(collector.port)/expired"
        settings.endpoint.pinExpires = Date(timeIntervalSinceNow: -86_400)
        let account = try await world.store.addServerAccount(settings)
        #expect(
            try await world.store.serverAccounts().first?.server.endpoint.pinExpires == settings.endpoint.pinExpires
        )
        #expect(
            try await syncer.checkLogin(settings) == "the pins have expired and did not match: reported, not enforced"
        )
        _ = try await syncer.sync(accountID: account)
        #expect(try await world.store.count() == 1)
        let lines = collector.received()
        try #require(lines.count == 1, "\(lines)")
        let report = try #require(
            try JSONSerialization.jsonObject(with: Data(lines[0].body.utf8)) as? [String: Any]
        )
        #expect(report["enforce-pinning"] as? Bool == false)
        #expect(report["validation-result"] as? String == "pinMismatch")
    }

    @Test func aLockedKeymakerRefusesBeforeConnecting() async throws {
        let world = try await SyncWorld()
        // No server runs at this port: a locked sync must not get as far as trying it.
        let account = try await world.store.addServerAccount(
            ServerAccount(host: "mail.coffer.test", port: 9, username: "u", password: "p", connectAddress: "127.0.0.1")
        )
        await world.keymaker.lock()
        await #expect(throws: SyncError.locked) { try await Syncer(store: world.store).sync(accountID: account) }
    }
}

/// An https server on loopback that writes down each POST (path and body) and answers 204: the pin report endpoint.
final class ReportCollector: Sendable {
    let port: Int
    private let process: Process
    private let file: String

    init(certificate: String, key: String) throws {
        file = FileManager.default.temporaryDirectory.appendingPathComponent("coffer-reports-\(UUID().uuidString)").path
        let script = """
            import http.server, json, ssl, sys
            class Handler(http.server.BaseHTTPRequestHandler):
                def do_POST(self):
                    body = self.rfile.read(int(self.headers["Content-Length"]))
                    with open(sys.argv[3], "a") as out:
                        out.write(json.dumps({"path": self.path, "body": body.decode()}) + "\\n")
                    self.send_response(204)
                    self.end_headers()
                def log_message(self, *args):
                    pass
            server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(sys.argv[1], sys.argv[2])
            server.socket = context.wrap_socket(server.socket, server_side=True)
            print(server.server_address[1], flush=True)
            server.serve_forever()
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", script, certificate, key, file]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        var line = Data()
        while let byte = try output.fileHandleForReading.read(upToCount: 1), !byte.isEmpty, byte != Data("\n".utf8) {
            line.append(byte)
        }
        guard let port = Int(String(decoding: line, as: UTF8.self)) else {
            process.terminate()
            throw TestSetupError(reason: "the report collector did not start")
        }
        self.port = port
        self.process = process
    }

    /// The requests received so far.
    func received() -> [(path: String, body: String)] {
        let text = (try? String(contentsOfFile: file, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String],
                let path = object["path"], let body = object["body"]
            else { return nil }
            return (path, body)
        }
    }

    func stop() {
        // SIGKILL: the test process may hold SIGTERM blocked, and a child started by Foundation inherits the mask.
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        try? FileManager.default.removeItem(atPath: file)
    }
}
