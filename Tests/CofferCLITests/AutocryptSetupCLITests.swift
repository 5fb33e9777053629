import CofferTesting
import Foundation
import Testing

/// `coffer key autocrypt --setup-message` and `--import-setup` through the binary, with GnuPG as the other client:
/// the Setup Message Coffer writes has Level 1's shape, gpg decrypts its payload with the Setup Code printed once and
/// imports the secret key; another Coffer home imports it (a wrong code refused, nothing stored); a Setup Message
/// gpg made (AES-128, 36-digit code) imports too; neither the code nor the secret key is in any file of the homes.
@Suite struct AutocryptSetupCLITests {
    typealias GnuPG = KeyCLITests.GnuPG

    /// The Setup Code printed by `--setup-message`: the three lines after the announcement, joined by dashes.
    static func code(in output: String) throws -> String {
        let lines = output.split(separator: "\n").map(String.init)
        let index = try #require(lines.firstIndex { $0.hasPrefix("Setup Code") }, "\(output)")
        let code = lines[(index + 1)...].prefix(3).joined(separator: "-")
        try #require(code.count == 44, "\(output)")
        return code
    }

    /// The armored payload of a Setup Message file: its `application/autocrypt-setup` part decoded by Python's
    /// `email` package, then the armored block in it.
    static func payload(_ file: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "python3", "-c",
            "import email, email.policy, sys\n"
                + "m = email.message_from_binary_file(open(sys.argv[1], 'rb'), policy=email.policy.default)\n"
                + "p = [x for x in m.walk() if x.get_content_type() == 'application/autocrypt-setup']\n"
                + "assert len(p) == 1\nsys.stdout.buffer.write(p[0].get_payload(decode=True))",
            file,
        ]
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "python3 found no single application/autocrypt-setup part")
        let message = String(decoding: data, as: UTF8.self)
        let start = try #require(message.range(of: "-----BEGIN PGP MESSAGE-----"))
        let end = try #require(
            message.range(of: "-----END PGP MESSAGE-----", range: start.upperBound..<message.endIndex)
        )
        return String(message[start.lowerBound..<end.upperBound])
    }

    /// The binary packets of an armored block.
    static func dearmored(_ armored: String) throws -> [UInt8] {
        let lines = armored.split(separator: "\n", omittingEmptySubsequences: false).map {
            $0.trimmingCharacters(in: .whitespaces)
        }
        let start = try #require(lines.firstIndex(of: "")) + 1
        let body = lines[start...].prefix { !$0.hasPrefix("=") && !$0.hasPrefix("-----END") }.joined()
        return Array(try #require(Data(base64Encoded: body)))
    }

    /// The id of the one message listed in `cli`'s store.
    static func onlyMessage(_ cli: CLIRunner) async throws -> String {
        let listed = try await cli.run(["list"]).stdout
        let line = try #require(
            listed.split(separator: "\n").first { $0.contains("Autocrypt Setup Message") },
            "\(listed)"
        )
        return String(try #require(line.split(separator: "\t").first))
    }

    @Test func aSetupMessageMadeByCofferOpensInGnuPGAndInAnotherCoffer() async throws {
        let gpg = try GnuPG()
        let alice = try await KeyCLITests.home()
        let generated = try await alice.run(["key", "generate", "--user-id", "Alice <alice@example.org>"])
        try #require(generated.status == 0, "\(generated.stderr)")
        let fingerprint = String(try #require(generated.stdout.split(separator: "\t").first))
        #expect(try await alice.run(["key", "autocrypt", "--prefer-encrypt", "mutual"]).status == 0)
        let file = gpg.folder.path + "/setup.eml"
        let made = try await alice.run(["key", "autocrypt", "--setup-message", file])
        try #require(made.status == 0, "\(made.stderr)")
        let code = try Self.code(in: made.stdout)
        let message = try String(contentsOfFile: file, encoding: .utf8)
        #expect(message.contains("\r\nAutocrypt-Setup-Message: v1\r\n"))
        #expect(message.contains("Content-Type: multipart/mixed;"))
        #expect(message.contains("Content-Type: application/autocrypt-setup"))
        #expect(message.contains("To: alice@example.org") && message.contains("Subject: Autocrypt Setup Message"))
        #expect(!message.contains(code) && !message.contains("PRIVATE KEY"))
        let payload = try Self.payload(file)
        #expect(payload.contains("Passphrase-Format: numeric9x4"))
        #expect(payload.contains("Passphrase-Begin: \(code.prefix(2))"))
        // Writing over an existing file is refused.
        #expect(try await alice.run(["key", "autocrypt", "--setup-message", file]).status != 0)

        // GnuPG decrypts the payload with the code and imports the secret key.
        let opened = try gpg.gpg(["--passphrase", code, "--decrypt"], input: Array(payload.utf8))
        #expect(opened.stdout.contains("Autocrypt-Prefer-Encrypt: mutual"))
        try gpg.gpg(["--import"], input: Array(opened.stdout.utf8))
        #expect(try gpg.gpg(["--with-colons", "--list-secret-keys", fingerprint]).stdout.contains(fingerprint))

        // Another Coffer imports it: a wrong code is refused with nothing stored, the right one imports the key.
        let bob = try await KeyCLITests.home()
        #expect(try await bob.run(["import", file]).status == 0)
        let id = try await Self.onlyMessage(bob)
        let wrong = try await bob.run(
            ["key", "autocrypt", "--import-setup", id, "--code-stdin"],
            input: "1111-2222-3333-4444-5555-6666-7777-8888-9999\n"
        )
        #expect(wrong.status != 0 && wrong.stderr.contains("Setup Code is wrong"), "\(wrong.stderr)")
        #expect(!(try await KeyCLITests.listed(bob).contains(fingerprint)))
        let right = try await bob.run(["key", "autocrypt", "--import-setup", id, "--code-stdin"], input: "\(code)\n")
        #expect(right.status == 0, "\(right.stderr)")
        #expect(try await KeyCLITests.listed(bob) == [fingerprint])
        #expect(try await bob.run(["key", "autocrypt"]).stdout.contains("prefer-encrypt: mutual"))

        // Canary: neither the code (as typed or as digits) nor the secret key's bytes are in a file of either home.
        let secretBytes = try Self.dearmored(try gpg.gpg(["--armor", "--export-secret-keys", fingerprint]).stdout)
        try #require(secretBytes.count > 64)
        let needles = [
            Array(code.utf8), Array(code.replacingOccurrences(of: "-", with: "").utf8), Array(secretBytes.suffix(48)),
        ]
        let hits = CanaryScanner.occurrences(of: needles, under: [alice.home.path, bob.home.path])
        #expect(hits.isEmpty, "\(hits)")
    }

    @Test func throughTheAgentTheCodeTravelsInASecretFrameAndNoFileHoldsIt() async throws {
        let cli = CLIRunner(prefix: "coffer-autocrypt-agent", ownRuntime: true)
        try #require(try await cli.run(["init", "--account", "alice"]).status == 0)
        let agent = try await cli.startAgent()
        defer { CLIRunner.stopAgent(agent) }
        try #require(try await cli.run(["unlock"]).status == 0)
        let generated = try await cli.run(["key", "generate", "--user-id", "Alice <alice@example.org>"])
        try #require(generated.status == 0, "\(generated.stderr)")
        let fingerprint = String(try #require(generated.stdout.split(separator: "\t").first))
        let gpg = try GnuPG()
        let file = gpg.folder.path + "/setup.eml"
        let made = try await cli.run(["key", "autocrypt", "--setup-message", file])
        try #require(made.status == 0, "\(made.stderr)")
        let code = try Self.code(in: made.stdout)
        let opened = try gpg.gpg(["--passphrase", code, "--decrypt"], input: Array(try Self.payload(file).utf8))
        #expect(opened.stdout.contains("Autocrypt-Prefer-Encrypt: nopreference"))
        try gpg.gpg(["--import"], input: Array(opened.stdout.utf8))
        #expect(try gpg.gpg(["--with-colons", "--list-secret-keys", fingerprint]).stdout.contains(fingerprint))
        let secretBytes = try Self.dearmored(try gpg.gpg(["--armor", "--export-secret-keys", fingerprint]).stdout)
        try #require(secretBytes.count > 64)
        #expect(try await cli.run(["lock"]).status == 0)
        let roots = [cli.home.path] + (cli.runtime.map { [$0.path] } ?? [])
        let hits = CanaryScanner.occurrences(
            of: [
                Array(code.utf8), Array(code.replacingOccurrences(of: "-", with: "").utf8),
                Array(secretBytes.suffix(48)),
            ],
            under: roots
        )
        #expect(hits.isEmpty, "\(hits)")
    }

    @Test func aSetupMessageMadeByGnuPGImports() async throws {
        let gpg = try GnuPG()
        let fingerprint = try gpg.generateKey(userID: "Carol <carol@example.org>", passphrase: "")
        var armored = try gpg.gpg(["--armor", "--export-secret-keys", fingerprint]).stdout
        armored = armored.replacingOccurrences(
            of: "-----BEGIN PGP PRIVATE KEY BLOCK-----\n",
            with: "-----BEGIN PGP PRIVATE KEY BLOCK-----\nAutocrypt-Prefer-Encrypt: nopreference\n"
        )
        let code = "9081-7263-5544-3322-1100-9988-7766-5544-3322"
        let sealed = try gpg.gpg(
            ["--passphrase", code, "--symmetric", "--cipher-algo", "AES128", "--armor"],
            input: Array(armored.utf8)
        ).stdout
        let html = "<html><body><pre>\n\(sealed)</pre></body></html>\n"
        let message =
            "From: carol@example.org\r\nTo: carol@example.org\r\nSubject: Autocrypt Setup Message\r\n"
            + "Date: Mon, 1 Jan 2024 10:00:00 +0000\r\nMessage-ID: <setup-gpg@example.org>\r\n"
            + "Autocrypt-Setup-Message: v1\r\nMIME-Version: 1.0\r\n"
            + "Content-Type: multipart/mixed; boundary=\"b\"\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\n"
            + "This message contains your key.\r\n--b\r\nContent-Type: application/autocrypt-setup\r\n"
            + "Content-Disposition: attachment; filename=\"autocrypt-setup-message.html\"\r\n\r\n"
            + html.replacingOccurrences(of: "\n", with: "\r\n") + "\r\n--b--\r\n"
        let file = try gpg.file(message, name: "gpg-setup.eml")
        let carol = try await KeyCLITests.home()
        #expect(try await carol.run(["import", file]).status == 0)
        let id = try await Self.onlyMessage(carol)
        let imported = try await carol.run(
            ["key", "autocrypt", "--import-setup", id, "--code-stdin"],
            input: "\(code)\n"
        )
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(try await KeyCLITests.listed(carol) == [fingerprint])
        #expect(CanaryScanner.occurrences(of: [Array(code.utf8)], under: [carol.home.path]).isEmpty)
        // A message that is not a Setup Message is refused by name.
        let plain = try gpg.file(
            "From: a@example.org\r\nSubject: Autocrypt Setup Message too\r\nMessage-ID: <p@x>\r\n\r\nhi\r\n",
            name: "plain.eml"
        )
        #expect(try await carol.run(["import", plain]).status == 0)
        let listed = try await carol.run(["list"]).stdout
        let plainID = String(
            try #require(listed.split(separator: "\n").first { $0.contains("too") }?.split(separator: "\t").first)
        )
        let refused = try await carol.run(
            ["key", "autocrypt", "--import-setup", plainID, "--code-stdin"],
            input: "\(code)\n"
        )
        #expect(refused.status != 0 && refused.stderr.contains("not an Autocrypt Setup Message"), "\(refused.stderr)")
    }
}
