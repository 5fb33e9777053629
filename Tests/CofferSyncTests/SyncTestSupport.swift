import CofferIMAP
import CofferKeychain
import CofferKeymaker
import CofferStore
import CofferTesting
import CofferTransport
import Foundation

@testable import CofferSync

/// An unlocked Keymaker over an in-memory keychain and a store in a temporary folder.
struct SyncWorld {
    let root = TemporaryDirectory(prefix: "coffer-sync-test")
    let clock = TestClock()
    let keymaker: Keymaker
    let store: MailStore

    init() async throws {
        keymaker = try await Fixtures.unlockedKeymaker(clock: clock)
        store = try MailStore(folder: "\(root.path)/store", keys: keymaker)
    }
}

/// The shared test Dovecot, with the sync tests' helpers.
typealias SyncDovecot = TestServers.PinnedDovecot

extension TestServers.PinnedDovecot {
    /// The account record for this server, pinned to certificate A and the backup key.
    func account(pins: [String]? = nil) throws -> ServerAccount {
        ServerAccount(
            host: Self.name,
            port: server.imapsPort,
            username: Self.user,
            password: Self.password,
            pins: try pins ?? [pin("a"), pin("backup")],
            caFile: "\(certs)/ca.pem",
            connectAddress: "127.0.0.1"
        )
    }

    /// Runs Python with `imap` logged in as alice (imaplib over the test CA); returns the last line printed.
    @discardableResult
    func python(_ body: String) async throws -> String {
        let indented = body.split(separator: "\n", omittingEmptySubsequences: false).map { "    " + $0 }
            .joined(separator: "\n")
        let script = """
            import base64, json, ssl, sys, imaplib, re
            sys.path.insert(0, \(String(reflecting: TestServers.repoRoot.appendingPathComponent("Tests/servers").path)))
            import dovecot
            info = dovecot.load(\(String(reflecting: server.dir)))
            ctx = ssl.create_default_context(cafile=\(String(reflecting: "\(certs)/ca.pem")))
            with dovecot.IMAPS(info["imaps_port"], \(String(reflecting: Self.name)), ctx) as imap:
                imap.login(\(String(reflecting: Self.user)), \(String(reflecting: Self.password)))
            \(indented)
                imap.logout()
            """
        let result = try await awaitWaiting { try runCommand(["/usr/bin/env", "python3", "-c", script]) }
        guard result.code == 0 else { throw TestSetupError(reason: "imaplib failed: \(result.output)") }
        return String(result.output.split(separator: "\n").last ?? "")
    }

    /// Every message of `folder` as imaplib sees it: UID, flags and exact bytes.
    func messages(_ folder: String = "INBOX") async throws -> [(uid: UInt32, flags: [String], body: [UInt8])] {
        let line = try await python(
            """
            imap.select(\(String(reflecting: folder)), readonly=True)
            _, data = imap.uid("SEARCH", None, "ALL")
            out = []
            for uid in data[0].split():
                _, parts = imap.uid("FETCH", uid, "(FLAGS BODY.PEEK[])")
                flags = re.search(rb"FLAGS \\(([^)]*)\\)", parts[0][0]).group(1).decode().split()
                out.append({"uid": int(uid), "flags": flags, "body": base64.b64encode(parts[0][1]).decode()})
            print(json.dumps(out))
            """
        )
        guard let list = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [[String: Any]] else {
            throw TestSetupError(reason: "imaplib printed no list: \(line)")
        }
        return list.compactMap { item in
            guard let uid = item["uid"] as? Int, let flags = item["flags"] as? [String],
                let body = (item["body"] as? String).flatMap({ Data(base64Encoded: $0) })
            else { return nil }
            return (UInt32(uid), flags, Array(body))
        }
    }
}

enum SyncMail {
    /// A message with a unique marker word in its subject and body.
    static func message(_ marker: String, extraBody: String = "") -> [UInt8] {
        Array(
            ("From: Bob <bob@coffer.test>\r\nTo: alice@coffer.test\r\nSubject: note \(marker)\r\n"
                + "Message-ID: <\(marker)@coffer.test>\r\nDate: Mon, 1 Jan 2024 10:00:00 +0000\r\n\r\n"
                + "Body word \(marker).\r\n\(extraBody)").utf8
        )
    }

    static let nonASCII = Array(
        ("From: =?UTF-8?Q?J=C3=BCrgen?= <j@coffer.test>\r\nTo: alice@coffer.test\r\n"
            + "Subject: =?UTF-8?B?R3LDvMOfZSBhdXMgS8O2bG4=?=\r\nMessage-ID: <umlaut@coffer.test>\r\nMIME-Version: 1.0\r\n"
            + "Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n"
            + "Schöne Grüße, 東京 canaryumlautword.\r\n").utf8
    )

    static func attachment(_ marker: String) -> [UInt8] {
        var random = SystemRandomNumberGenerator()
        let blob = (0..<30000).map { _ in UInt8.random(in: 0...255, using: &random) }
        let base64 = Data(blob).base64EncodedString(options: [.lineLength76Characters, .endLineWithCarriageReturn])
            .replacingOccurrences(of: "\r", with: "\r\n")
        let text =
            "From: carol@coffer.test\r\nTo: alice@coffer.test\r\nSubject: attached \(marker)\r\nMIME-Version: 1.0\r\n"
            + "Message-ID: <\(marker)@coffer.test>\r\n"
            + "Content-Type: multipart/mixed; boundary=\"b1\"\r\n\r\n--b1\r\nContent-Type: text/plain\r\n\r\n"
            + "See attached \(marker).\r\n--b1\r\nContent-Type: application/octet-stream\r\n"
            + "Content-Disposition: attachment; filename=\"blob.bin\"\r\nContent-Transfer-Encoding: base64\r\n\r\n"
            + base64 + "\r\n--b1--\r\n"
        return Array(text.utf8)
    }
}
