import CofferTesting
import Foundation
import Testing

/// `coffer compose --sign --encrypt` through the binary against Dovecot's submission service, and the message as
/// it arrived in the recipient's Maildir checked by the real GnuPG (`gpg`) and Sequoia (`sq`): they decrypt it and
/// verify Alice's signature; a signed-only message verifies under `gpg --verify` and `sq verify` over its signed
/// part (and fails once a byte of it changes); a recipient without a key stops the send before anything is queued;
/// Alice's Sent copy reads back decrypted and verified; the text never travels in clear.
@Suite(.serialized) struct OpenPGPSendCLITests {
    typealias Server = SendCLITests.Server
    static let canary = "Pangolincanary42"
    static let body = "Dear Bob,\n\nthe vault word is \(canary).\n\nAlice\n"

    /// gpg and sq in a private home (GNUPGHOME, sq's HOME), the gpg agent killed at the end.
    final class Oracle {
        let folder = TemporaryDirectory(prefix: "coffer-pgp-send-oracle")
        var gnupg: String { folder.path + "/gnupg" }

        init() throws {
            for tool in ["gpg", "sq"] {
                try #require(
                    FileManager.default.isExecutableFile(atPath: "/usr/bin/\(tool)"),
                    "\(tool) is missing: run scripts/setup.sh"
                )
            }
            try FileManager.default.createDirectory(
                atPath: gnupg,
                withIntermediateDirectories: false,
                attributes: [.posixPermissions: 0o700]
            )
        }

        deinit { _ = try? run("gpgconf", ["--homedir", gnupg, "--kill", "all"]) }

        /// Runs `/usr/bin/<tool>`; its status and output.
        func run(_ tool: String, _ arguments: [String], input: [UInt8] = []) throws -> CLIRunner.Result {
            let inputPath = folder.path + "/stdin-\(UUID().uuidString)"
            try Data(input).write(to: URL(fileURLWithPath: inputPath))
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/" + tool)
            process.arguments =
                tool == "gpg" ? ["--batch", "--no-tty", "--pinentry-mode", "loopback"] + arguments : arguments
            process.environment = ["GNUPGHOME": gnupg, "HOME": folder.path, "PATH": "/usr/bin:/bin", "LANG": "C"]
            process.standardInput = FileHandle(forReadingAtPath: inputPath)
            let stdout = Pipe()
            let stderr = Pipe()
            process.standardOutput = stdout
            process.standardError = stderr
            try process.run()
            let out = stdout.fileHandleForReading.readDataToEndOfFile()
            let err = stderr.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return CLIRunner.Result(
                status: process.terminationStatus,
                stdout: String(decoding: out, as: UTF8.self),
                stderr: String(decoding: err, as: UTF8.self)
            )
        }

        /// `bytes` in a new file of the folder; its path.
        func file(_ bytes: [UInt8], name: String) throws -> String {
            let path = folder.path + "/" + name
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            return path
        }
    }

    /// Alice (with submission and a key Coffer generated) and Bob's key made by gpg, each side holding the other's
    /// certificate; Alice's fingerprint, Bob's, and the paths of Alice's certificate and Bob's secret key for sq.
    static func parties(
        _ server: Server,
        oracle: Oracle
    ) async throws -> (
        alice: CLIRunner, aliceKey: String, bobKey: String, aliceCert: String, bobSecret: String
    ) {
        let alice = try await SendCLITests.home(server, user: Server.sender, submission: true)
        let generated = try await alice.run(["key", "generate", "--user-id", "Alice <\(Server.sender.address)>"])
        try #require(generated.status == 0, "\(generated.stderr)")
        let aliceKey = String(try #require(generated.stdout.split(separator: "\t").first))
        let aliceCert = try await alice.run(["key", "export", "--public"]).stdout
        try #require(try oracle.run("gpg", ["--import"], input: Array(aliceCert.utf8)).status == 0)
        let made = try oracle.run(
            "gpg",
            [
                "--passphrase", "", "--quick-gen-key", "Bob <\(Server.recipient.address)>", "future-default", "default",
                "never",
            ]
        )
        try #require(made.status == 0, "\(made.stderr)")
        let listing = try oracle.run("gpg", ["--with-colons", "--list-keys", "--", Server.recipient.address]).stdout
        let line = try #require(listing.split(separator: "\n").first { $0.hasPrefix("fpr:") })
        let bobKey = String(
            try #require(line.split(separator: ":", omittingEmptySubsequences: false).dropFirst(9).first)
        )
        let bobCert = try oracle.run("gpg", ["--armor", "--export", bobKey]).stdout
        let imported = try await alice.run(["key", "import", try oracle.file(Array(bobCert.utf8), name: "bob.asc")])
        try #require(imported.status == 0, "\(imported.stderr)")
        let bobSecret = try oracle.run("gpg", ["--armor", "--export-secret-keys", bobKey]).stdout
        return (
            alice, aliceKey, bobKey, try oracle.file(Array(aliceCert.utf8), name: "alice.asc"),
            try oracle.file(Array(bobSecret.utf8), name: "bob-secret.asc")
        )
    }

    /// The bytes of the message with `subject` delivered to `user`'s Maildir, waiting for the relay.
    static func delivered(_ server: Server, user: String, subject: String) async throws -> [UInt8] {
        let root = "\(server.dir)/mail/\(user)"
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            for folder in ["new", "cur"] {
                let path = "\(root)/\(folder)"
                for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] {
                    let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: "\(path)/\(name)")))
                    // Dovecot keeps LF line ends; the message travelled with CRLF, the form that was signed.
                    if bytes.firstRange(of: Array("Subject: \(subject)".utf8)) != nil {
                        return Array(
                            String(decoding: bytes, as: UTF8.self).replacingOccurrences(of: "\n", with: "\r\n").utf8
                        )
                    }
                }
            }
            try await Task.sleep(for: .milliseconds(200))
        }
        Issue.record("no message \(subject) arrived for \(user)")
        return []
    }

    /// The text between the first `start` and the `end` after it (both included when `inclusive`).
    static func slice(_ bytes: [UInt8], from start: String, to end: String, inclusive: Bool) throws -> [UInt8] {
        let open = try #require(bytes.firstRange(of: Array(start.utf8)), "no \(start)")
        let rest = bytes[open.upperBound...]
        let close = try #require(rest.firstRange(of: Array(end.utf8)), "no \(end)")
        return Array(inclusive ? bytes[open.lowerBound..<close.upperBound] : bytes[open.upperBound..<close.lowerBound])
    }

    @Test func aSignedAndEncryptedMessageIsReadByGnuPGAndSequoiaAndItsSentCopyByCoffer() async throws {
        let server = try await Server.start()
        defer { server.stop() }
        let oracle = try Oracle()
        let (alice, aliceKey, bobKey, aliceCert, bobSecret) = try await Self.parties(server, oracle: oracle)
        let bodyPath = try oracle.file(Array(Self.body.utf8), name: "body.txt")
        let attachment = try oracle.file(Array("attached figures \(Self.canary)\n".utf8), name: "figures.txt")

        // A recipient without a key: refused before anything is queued, naming the address.
        let refused = try await alice.run([
            "compose", "--to", Server.recipient.address, "--cc", "carol@coffer.test", "--subject", "Nokey plan",
            "--body-file", bodyPath, "--encrypt", "--send",
        ])
        #expect(refused.status == 1, "\(refused.stdout)")
        #expect(refused.stderr.contains("no OpenPGP key for carol@coffer.test"), "\(refused.stderr)")
        #expect(!refused.stderr.contains(Server.recipient.address), "\(refused.stderr)")
        #expect(try await alice.run(["outbox"]).stdout.contains("The outbox is empty."))

        let sent = try await alice.run([
            "compose", "--to", Server.recipient.address, "--subject", "Sealed plan", "--body-file", bodyPath,
            "--attach", attachment, "--sign", "--encrypt", "--send",
        ])
        #expect(sent.status == 0, "\(sent.stdout) \(sent.stderr)")
        let message = try await Self.delivered(server, user: Server.recipient.user, subject: "Sealed plan")
        let text = String(decoding: message, as: UTF8.self)
        #expect(text.contains("Content-Type: multipart/encrypted;"), "\(text)")
        #expect(text.contains("protocol=\"application/pgp-encrypted\""))
        #expect(text.contains("Content-Type: application/pgp-encrypted\r\n"))
        #expect(text.contains("\r\n\r\nVersion: 1\r\n"))
        #expect(!text.contains(Self.canary) && !text.contains("vault word"), "the text travelled in clear")
        let armored = try Self.slice(
            message,
            from: "-----BEGIN PGP MESSAGE-----",
            to: "-----END PGP MESSAGE-----",
            inclusive: true
        )
        let ciphertext = try oracle.file(armored, name: "message.asc")

        // GnuPG: decrypts with Bob's key, Alice's signature good and valid, the MDC checked.
        let gpg = try oracle.run("gpg", ["--status-fd", "2", "--decrypt", ciphertext])
        #expect(gpg.status == 0, "\(gpg.stderr)")
        #expect(gpg.stderr.contains("[GNUPG:] GOODSIG"), "\(gpg.stderr)")
        #expect(gpg.stderr.contains("[GNUPG:] VALIDSIG \(aliceKey)"), "\(gpg.stderr)")
        #expect(gpg.stderr.contains("[GNUPG:] GOODMDC"), "\(gpg.stderr)")
        #expect(gpg.stderr.contains(String(bobKey.suffix(16))) || gpg.stderr.contains("ENC_TO"), "\(gpg.stderr)")
        // The plaintext is the MIME entity: text and attachment (quoted-printable and base64 as written).
        #expect(gpg.stdout.hasPrefix("Content-Type: multipart/mixed;"), "\(gpg.stdout)")
        #expect(gpg.stdout.contains("the vault word is \(Self.canary)."), "\(gpg.stdout)")
        #expect(gpg.stdout.contains("filename=figures.txt") || gpg.stdout.contains("filename=\"figures.txt\""))

        // Sequoia: the same, with Bob's secret key and Alice's certificate as files.
        let sq = try oracle.run(
            "sq",
            ["decrypt", "--recipient-key", bobSecret, "--signer-cert", aliceCert, ciphertext]
        )
        #expect(sq.status == 0, "\(sq.stderr)")
        #expect(sq.stdout.contains("the vault word is \(Self.canary)."), "\(sq.stdout)")
        #expect(sq.stderr.contains("Good signature from"), "\(sq.stderr)")
        #expect(sq.stderr.contains(String(aliceKey.suffix(16))), "\(sq.stderr)")

        // A changed byte of the ciphertext: neither gives the text.
        var tampered = armored
        let index = tampered.count / 2
        tampered[index] = tampered[index] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        let bad = try oracle.run("gpg", ["--decrypt", try oracle.file(tampered, name: "tampered.asc")])
        #expect(bad.status != 0 && !bad.stdout.contains(Self.canary), "\(bad.stdout)")

        // Alice's Sent copy is what was sent, encrypted to her key too: it reads back decrypted and verified.
        let sentList = try await alice.run(["list", "--label", "Sent"]).stdout
        let line = try #require(sentList.split(separator: "\n").first { $0.contains("Sealed plan") }, "\(sentList)")
        let id = String(try #require(line.split(separator: "\t").first))
        let shown = try await alice.run(["show", id]).stdout
        #expect(
            shown.contains("OpenPGP: encrypted, signed by Alice <\(Server.sender.address)> (\(aliceKey)), verified"),
            "\(shown)"
        )
        #expect(shown.contains("the vault word is \(Self.canary)."), "\(shown)")
        #expect(CanaryScanner.occurrences(of: [Array(Self.canary.utf8)], under: [alice.home.path]).isEmpty)
    }

    @Test func aSignedMessageVerifiesUnderGnuPGAndSequoiaAndNotOnceChanged() async throws {
        let server = try await Server.start()
        defer { server.stop() }
        let oracle = try Oracle()
        let (alice, aliceKey, _, aliceCert, _) = try await Self.parties(server, oracle: oracle)
        let bodyPath = try oracle.file(
            Array("Signed, not sealed: Grüße, and a line with trailing space \nend\n".utf8),
            name: "body.txt"
        )
        let sent = try await alice.run([
            "compose", "--to", Server.recipient.address, "--subject", "Signed note", "--body-file", bodyPath, "--sign",
            "--send",
        ])
        #expect(sent.status == 0, "\(sent.stdout) \(sent.stderr)")
        let message = try await Self.delivered(server, user: Server.recipient.user, subject: "Signed note")
        let text = String(decoding: message, as: UTF8.self)
        #expect(text.contains("Content-Type: multipart/signed; micalg=pgp-sha256;"), "\(text)")
        #expect(text.contains("protocol=\"application/pgp-signature\""))
        // The signed part: between the first delimiter line and the CRLF before the next (RFC 3156 section 5).
        let boundaryLine = try Self.slice(message, from: "boundary=\"", to: "\"", inclusive: false)
        let delimiter = "--" + String(decoding: boundaryLine, as: UTF8.self)
        let signed = try Self.slice(message, from: delimiter + "\r\n", to: "\r\n" + delimiter, inclusive: false)
        let signature = try Self.slice(
            message,
            from: "-----BEGIN PGP SIGNATURE-----",
            to: "-----END PGP SIGNATURE-----",
            inclusive: true
        )
        let part = try oracle.file(signed, name: "part.eml")
        let sig = try oracle.file(signature, name: "part.asc")
        let gpg = try oracle.run("gpg", ["--status-fd", "2", "--verify", sig, part])
        #expect(gpg.status == 0 && gpg.stderr.contains("[GNUPG:] VALIDSIG \(aliceKey)"), "\(gpg.stderr)")
        let sq = try oracle.run("sq", ["verify", "--signer-cert", aliceCert, "--detached", sig, part])
        #expect(sq.status == 0 && sq.stderr.contains("Good signature from"), "\(sq.stderr)")

        // One byte of the signed part changed: both refuse it.
        var changed = signed
        let index = try #require(changed.firstRange(of: Array("Signed, not".utf8))).lowerBound
        changed[index] = UInt8(ascii: "s")
        let other = try oracle.file(changed, name: "changed.eml")
        let gpgBad = try oracle.run("gpg", ["--status-fd", "2", "--verify", sig, other])
        #expect(gpgBad.status != 0 && gpgBad.stderr.contains("[GNUPG:] BADSIG"), "\(gpgBad.stderr)")
        let sqBad = try oracle.run("sq", ["verify", "--signer-cert", aliceCert, "--detached", sig, other])
        #expect(sqBad.status != 0, "\(sqBad.stderr)")

        // Alice's Sent copy is the signed message, and her signature over it checks out.
        let sentList = try await alice.run(["list", "--label", "Sent"]).stdout
        let line = try #require(sentList.split(separator: "\n").first { $0.contains("Signed note") }, "\(sentList)")
        let shown = try await alice.run(["show", String(try #require(line.split(separator: "\t").first))]).stdout
        #expect(
            shown.contains(
                "OpenPGP: not encrypted; signed by Alice <\(Server.sender.address)> (\(aliceKey)), verified"
            ),
            "\(shown)"
        )

        // Without a key of her own, --sign is refused before anything is queued.
        let bare = try await SendCLITests.home(server, user: Server.sender, submission: true)
        let noKey = try await bare.run([
            "compose", "--to", Server.recipient.address, "--subject", "x", "--sign", "--send",
        ])
        #expect(noKey.status == 1 && noKey.stderr.contains("need an OpenPGP key of yours"), "\(noKey.stderr)")
        #expect(try await bare.run(["outbox"]).stdout.contains("The outbox is empty."))
    }
}
