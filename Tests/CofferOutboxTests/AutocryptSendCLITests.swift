import CofferTesting
import Foundation
import Testing

/// Autocrypt Level 1 end to end, through the binary against Dovecot submission relaying through Postfix: the
/// `Autocrypt` header of what Alice's Coffer sends, as it arrived in Bob's Maildir, read by Python's `email` package
/// and its keydata imported by `gpg`; Bob's header (written as a gpg user's Autocrypt client would, with his gpg
/// certificate) imported into Alice's Coffer; with both sides `mutual`, Alice's next message to Bob is encrypted
/// without --encrypt and gpg decrypts it with Bob's key, which Alice never imported explicitly; `--no-encrypt` sends it
/// in clear.
@Suite(.serialized) struct AutocryptSendCLITests {
    typealias Server = SendCLITests.Server
    typealias Oracle = OpenPGPSendCLITests.Oracle
    static let canary = "Ocelotcanary42"

    /// The unfolded `Autocrypt` field of `message` as Python's `email` package (policy.default) reads it.
    static func pythonAutocrypt(_ message: [UInt8], oracle: Oracle) throws -> String {
        let path = try oracle.file(message, name: "delivered-\(UUID().uuidString).eml")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "python3", "-c",
            "import email, email.policy, sys\n"
                + "m = email.message_from_binary_file(open(sys.argv[1], 'rb'), policy=email.policy.default)\n"
                + "v = m.get_all('Autocrypt') or []\nassert len(v) == 1, len(v)\nprint(' '.join(str(v[0]).split()))",
            path,
        ]
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "python3 found no single Autocrypt field")
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The value of attribute `name` in an Autocrypt field's value.
    static func attribute(_ name: String, in value: String) -> String? {
        for part in value.split(separator: ";") {
            let trimmed = part.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix(name + "=") { return String(trimmed.dropFirst(name.count + 1)) }
        }
        return nil
    }

    @Test func theHeaderTravelsAndAMutualPeerGetsEncryptedMailByDefault() async throws {
        let server = try await Server.start()
        defer { server.stop() }
        let oracle = try Oracle()
        let alice = try await SendCLITests.home(server, user: Server.sender, submission: true)
        let generated = try await alice.run(["key", "generate", "--user-id", "Alice <\(Server.sender.address)>"])
        try #require(generated.status == 0, "\(generated.stderr)")
        let aliceKey = String(try #require(generated.stdout.split(separator: "\t").first))
        #expect(try await alice.run(["key", "autocrypt"]).stdout.contains("prefer-encrypt: nopreference"))
        let set = try await alice.run(["key", "autocrypt", "--prefer-encrypt", "mutual"])
        #expect(set.status == 0 && set.stdout.contains("prefer-encrypt: mutual"), "\(set.stdout) \(set.stderr)")
        let body = try oracle.file(Array("the word is \(Self.canary)\n".utf8), name: "body.txt")

        // 1. Bob has no state yet: the message goes in clear, with Alice's header.
        let first = try await alice.run([
            "compose", "--to", Server.recipient.address, "--subject", "First hello", "--body-file", body, "--send",
        ])
        #expect(first.status == 0, "\(first.stdout) \(first.stderr)")
        #expect(!first.stdout.contains("Encrypted"), "\(first.stdout)")
        let delivered = try await OpenPGPSendCLITests.delivered(
            server,
            user: Server.recipient.user,
            subject: "First hello"
        )
        #expect(String(decoding: delivered, as: UTF8.self).contains(Self.canary))
        let value = try Self.pythonAutocrypt(delivered, oracle: oracle)
        #expect(Self.attribute("addr", in: value) == Server.sender.address.lowercased(), "\(value.prefix(120))")
        #expect(Self.attribute("prefer-encrypt", in: value) == "mutual")
        let keyData = try #require(
            Self.attribute("keydata", in: value).flatMap {
                Data(base64Encoded: $0.replacingOccurrences(of: " ", with: ""))
            }
        )
        let imported = try oracle.run("gpg", ["--status-fd", "1", "--import"], input: Array(keyData))
        #expect(imported.status == 0 && imported.stdout.contains("IMPORT_OK"), "\(imported.stderr)")
        #expect(imported.stdout.contains(aliceKey), "\(imported.stdout)")

        // 2. Bob (gpg) writes back with his own header, prefer-encrypt=mutual; Alice's Coffer imports it.
        let made = try oracle.run(
            "gpg",
            [
                "--passphrase", "", "--quick-gen-key", "Bob <\(Server.recipient.address)>", "future-default", "default",
                "never",
            ]
        )
        try #require(made.status == 0, "\(made.stderr)")
        let bobKeyData = try exportBinary(oracle)
        let folded = bobKeyData.base64EncodedString(options: .lineLength64Characters)
            .replacingOccurrences(of: "\r\n", with: "\r\n ")
        let reply =
            "From: Bob <\(Server.recipient.address)>\r\nTo: Alice <\(Server.sender.address)>\r\nSubject: Re: First hello\r\n"
            + "Date: \(Self.rfc5322(Date().addingTimeInterval(-60)))\r\nMessage-ID: <bob-reply@coffer.test>\r\n"
            + "Autocrypt: addr=\(Server.recipient.address); prefer-encrypt=mutual; keydata=\r\n \(folded)\r\n"
            + "Content-Type: text/plain\r\n\r\nHello Alice\r\n"
        let replyPath = try oracle.file(Array(reply.utf8), name: "reply.eml")
        let importedReply = try await alice.run(["import", replyPath])
        #expect(importedReply.status == 0, "\(importedReply.stderr)")
        // Bob's key was never imported explicitly.
        #expect(!(try await alice.run(["key", "list"]).stdout.contains("Correspondents")))

        // 3. Both mutual, Bob's key known: encrypted without --encrypt, and gpg decrypts it with Bob's key.
        let second = try await alice.run([
            "compose", "--to", Server.recipient.address, "--subject", "Second hello", "--body-file", body, "--send",
        ])
        #expect(second.status == 0, "\(second.stdout) \(second.stderr)")
        #expect(second.stdout.contains("Encrypted (Autocrypt"), "\(second.stdout)")
        let sealed = try await OpenPGPSendCLITests.delivered(
            server,
            user: Server.recipient.user,
            subject: "Second hello"
        )
        let sealedText = String(decoding: sealed, as: UTF8.self)
        #expect(sealedText.contains("Content-Type: multipart/encrypted;"), "\(sealedText.prefix(600))")
        #expect(!sealedText.contains(Self.canary), "the text travelled in clear")
        #expect(sealedText.contains("Autocrypt: addr="))
        let armored = try OpenPGPSendCLITests.slice(
            sealed,
            from: "-----BEGIN PGP MESSAGE-----",
            to: "-----END PGP MESSAGE-----",
            inclusive: true
        )
        let decrypted = try oracle.run(
            "gpg",
            ["--status-fd", "2", "--decrypt", try oracle.file(armored, name: "m.asc")]
        )
        #expect(decrypted.status == 0, "\(decrypted.stderr)")
        #expect(decrypted.stderr.contains("[GNUPG:] GOODMDC"), "\(decrypted.stderr)")
        #expect(decrypted.stdout.contains("the word is \(Self.canary)"), "\(decrypted.stdout)")

        // 4. --no-encrypt: in clear, and said so.
        let third = try await alice.run([
            "compose", "--to", Server.recipient.address, "--subject", "Third hello", "--body-file", body, "--send",
            "--no-encrypt",
        ])
        #expect(third.status == 0, "\(third.stdout) \(third.stderr)")
        #expect(third.stdout.contains("Not encrypted (--no-encrypt)"), "\(third.stdout)")
        let clear = try await OpenPGPSendCLITests.delivered(server, user: Server.recipient.user, subject: "Third hello")
        #expect(String(decoding: clear, as: UTF8.self).contains(Self.canary))
    }

    @Test func aSetupMessageIsSentToTheUsersOwnAddress() async throws {
        let server = try await Server.start()
        defer { server.stop() }
        let oracle = try Oracle()
        let alice = try await SendCLITests.home(server, user: Server.sender, submission: true)
        let generated = try await alice.run(["key", "generate", "--user-id", "Alice <\(Server.sender.address)>"])
        try #require(generated.status == 0, "\(generated.stderr)")
        let file = oracle.folder.path + "/setup.eml"
        let made = try await alice.run(["key", "autocrypt", "--setup-message", file, "--send"])
        #expect(made.status == 0, "\(made.stdout) \(made.stderr)")
        #expect(made.stdout.contains("sent to your own address"), "\(made.stdout)")
        let delivered = try await OpenPGPSendCLITests.delivered(
            server,
            user: Server.sender.user,
            subject: "Autocrypt Setup Message"
        )
        let text = String(decoding: delivered, as: UTF8.self)
        #expect(text.contains("\r\nAutocrypt-Setup-Message: v1\r\n"), "\(text.prefix(800))")
        #expect(text.contains("application/autocrypt-setup"))
        #expect(!text.contains("PRIVATE KEY"))
    }

    /// Bob's certificate in binary form, as gpg exports it.
    private func exportBinary(_ oracle: Oracle) throws -> Data {
        let path = oracle.folder.path + "/bob.pgp"
        let exported = try oracle.run("gpg", ["--output", path, "--export", Server.recipient.address])
        try #require(exported.status == 0, "\(exported.stderr)")
        return try Data(contentsOf: URL(fileURLWithPath: path))
    }

    /// `date` as an RFC 5322 Date field value, in UTC.
    static func rfc5322(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "EEE, d MMM yyyy HH:mm:ss '+0000'"
        return formatter.string(from: date)
    }
}
