import CofferTesting
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `coffer key` through the binary, as a person would, with GnuPG (`gpg`, installed by scripts/setup.sh) as the
/// other side: a key Coffer generates imports into gpg, a key gpg made under a passphrase imports into Coffer.
@Suite(.serialized) struct KeyCLITests {
    /// GnuPG in a private home, its agent killed at the end.
    final class GnuPG {
        let folder = TemporaryDirectory(prefix: "coffer-key-gpg")
        let home: String

        init() throws {
            try #require(
                FileManager.default.isExecutableFile(atPath: "/usr/bin/gpg"),
                "gpg is missing: scripts/setup.sh"
            )
            home = folder.path + "/gnupg"
            try FileManager.default.createDirectory(
                atPath: home,
                withIntermediateDirectories: false,
                attributes: [.posixPermissions: 0o700]
            )
        }

        deinit { _ = try? run("/usr/bin/gpgconf", ["--homedir", home, "--kill", "all"]) }

        /// `gpg --batch` with `arguments` and `input`; fails the test with gpg's words when it fails.
        @discardableResult
        func gpg(_ arguments: [String], input: [UInt8] = []) throws -> (stdout: String, stderr: String) {
            let result = try run(
                "/usr/bin/gpg",
                ["--batch", "--no-tty", "--pinentry-mode", "loopback"] + arguments,
                input: input
            )
            try #require(result.status == 0, "gpg \(arguments) failed: \(result.stderr)")
            return (result.stdout, result.stderr)
        }

        private func run(
            _ tool: String,
            _ arguments: [String],
            input: [UInt8] = []
        ) throws -> (status: Int32, stdout: String, stderr: String) {
            let inputPath = folder.path + "/stdin-\(UUID().uuidString)"
            try Data(input).write(to: URL(fileURLWithPath: inputPath))
            let process = Process()
            process.executableURL = URL(fileURLWithPath: tool)
            process.arguments = arguments
            process.environment = ["GNUPGHOME": home, "HOME": folder.path, "PATH": "/usr/bin:/bin", "LANG": "C"]
            process.standardInput = FileHandle(forReadingAtPath: inputPath)
            let stdout = Pipe()
            let stderr = Pipe()
            process.standardOutput = stdout
            process.standardError = stderr
            try process.run()
            let out = stdout.fileHandleForReading.readDataToEndOfFile()
            let err = stderr.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return (
                process.terminationStatus, String(decoding: out, as: UTF8.self), String(decoding: err, as: UTF8.self)
            )
        }

        /// A new key (Ed25519 + Curve25519) under `passphrase`; its fingerprint.
        func generateKey(userID: String, passphrase: String) throws -> String {
            try gpg(["--passphrase", passphrase, "--quick-gen-key", userID, "future-default", "default", "never"])
            let listing = try gpg(["--with-colons", "--list-keys", "--", userID]).stdout
            let line = try #require(listing.split(separator: "\n").first { $0.hasPrefix("fpr:") })
            return String(try #require(line.split(separator: ":", omittingEmptySubsequences: false).dropFirst(9).first))
        }

        /// `plaintext` encrypted to `recipients` and signed inside by `signer` (fingerprints), ASCII-armored, as a
        /// correspondent using GnuPG writes to us.
        func encryptAndSign(_ plaintext: String, signer: String, recipients: [String]) throws -> String {
            try gpg(
                ["--trust-model", "always", "--armor", "--encrypt", "--sign", "--local-user", signer]
                    + recipients.flatMap { ["--recipient", $0] },
                input: Array(plaintext.utf8)
            ).stdout
        }

        /// Writes `text` to a new file in the folder; its path.
        func file(_ text: String, name: String) throws -> String {
            let path = folder.path + "/" + name
            try Data(text.utf8).write(to: URL(fileURLWithPath: path))
            return path
        }
    }

    /// A new unprotected account's home.
    static func home() async throws -> CLIRunner {
        let cli = CLIRunner(prefix: "coffer-key")
        let created = try await cli.run(["init", "--account", "alice"])
        try #require(created.status == 0, "\(created.stderr)")
        return cli
    }

    /// The first field of each line of `coffer key list`.
    static func listed(_ cli: CLIRunner) async throws -> [String] {
        let listed = try await cli.run(["key", "list"])
        #expect(listed.status == 0, "\(listed.stderr)")
        return listed.stdout.split(separator: "\n").compactMap { $0.split(separator: "\t").first.map(String.init) }
    }

    @Test func aGeneratedKeyIsListedAndItsExportImportsIntoGnuPG() async throws {
        let cli = try await Self.home()
        #expect(try await cli.run(["key", "list"]).stdout == "No OpenPGP keys.\n")
        let generated = try await cli.run(["key", "generate", "--user-id", "Alice Liddell <alice@example.org>"])
        #expect(generated.status == 0, "\(generated.stderr)")
        #expect(generated.stderr.isEmpty, "\(generated.stderr)")
        let fields = generated.stdout.trimmingCharacters(in: .newlines).split(separator: "\t").map(String.init)
        try #require(fields.count == 4, "\(generated.stdout)")
        let fingerprint = fields[0]
        #expect(fingerprint.count == 40 && fingerprint.allSatisfy(\.isHexDigit))
        #expect(fields[2] == "default" && fields[3] == "Alice Liddell <alice@example.org>")
        #expect(try await Self.listed(cli) == [fingerprint])

        // A second key is not the default; export without a fingerprint gives the default one's.
        let second = try await cli.run(["key", "generate", "--user-id", "Alice <alice@work.example>"])
        #expect(second.status == 0 && second.stdout.contains("\t-\tAlice <alice@work.example>"), "\(second.stdout)")

        let exported = try await cli.run(["key", "export", "--public"])
        #expect(exported.status == 0, "\(exported.stderr)")
        #expect(exported.stdout.hasPrefix("-----BEGIN PGP PUBLIC KEY BLOCK-----"), "\(exported.stdout)")
        #expect(!exported.stdout.contains("PRIVATE"))
        let byFingerprint = try await cli.run(["key", "export", "--public", fingerprint.lowercased()])
        #expect(byFingerprint.stdout == exported.stdout)
        let unknown = try await cli.run(["key", "export", "--public", String(repeating: "AB", count: 20)])
        #expect(unknown.status == 1 && unknown.stderr.contains("no such OpenPGP key"), "\(unknown.stderr)")
        let noFlag = try await cli.run(["key", "export"])
        #expect(noFlag.status != 0 && noFlag.stderr.contains("--public"), "\(noFlag.stderr)")

        let gpg = try GnuPG()
        try gpg.gpg(["--import"], input: Array(exported.stdout.utf8))
        let keys = try gpg.gpg(["--with-colons", "--list-keys"]).stdout
        #expect(keys.contains("fpr:::::::::\(fingerprint):"), "\(keys)")
        #expect(keys.contains("Alice Liddell <alice@example.org>"), "\(keys)")
        #expect(!keys.contains("alice@work.example"), "only the default key was exported")
        // gpg holds no secret key from it.
        #expect(try gpg.gpg(["--list-secret-keys"]).stdout.isEmpty)

        // Nothing of the key (fingerprint, user id) is in clear in the home's files.
        let needles = [Array(fingerprint.utf8), Array(fingerprint.lowercased().utf8), Array("alice@example.org".utf8)]
        #expect(CanaryScanner.occurrences(of: needles, under: [cli.home.path]).isEmpty)
    }

    @Test func aKeyGnuPGProtectedWithAPassphraseImportsWithItAndAWrongOneIsATypedError() async throws {
        let cli = try await Self.home()
        let gpg = try GnuPG()
        let passphrase = "correct horse battery staple 41"
        let fingerprint = try gpg.generateKey(userID: "Dave <dave@example.org>", passphrase: passphrase)
        let secret = try gpg.gpg(["--passphrase", passphrase, "--armor", "--export-secret-keys", fingerprint]).stdout
        let file = try gpg.file(secret, name: "dave-secret.asc")

        // Without a terminal and without --passphrase-stdin, the command says how to give it.
        let noTerminal = try await cli.run(["key", "import", file])
        #expect(noTerminal.status == 1, "\(noTerminal.stdout)")
        #expect(noTerminal.stderr.contains("no terminal to read the passphrase"), "\(noTerminal.stderr)")

        let wrong = "not the passphrase 99"
        let refused = try await cli.run(["key", "import", file, "--passphrase-stdin"], input: "\(wrong)\n")
        #expect(refused.status == 1)
        #expect(
            refused.stderr.contains("The passphrase does not unlock the secret key \(fingerprint)"),
            "\(refused.stderr)"
        )
        #expect(!refused.stderr.contains(wrong) && !refused.stdout.contains(wrong))
        #expect(!refused.stderr.contains(passphrase))
        #expect(try await cli.run(["key", "list"]).stdout == "No OpenPGP keys.\n")

        let imported = try await cli.run(["key", "import", file, "--passphrase-stdin"], input: "\(passphrase)\n")
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(imported.stdout.hasPrefix("\(fingerprint)\t"), "\(imported.stdout)")
        #expect(imported.stdout.contains("\tdefault\tDave <dave@example.org>"), "\(imported.stdout)")
        #expect(try await Self.listed(cli) == [fingerprint])

        // Once stored, importing it again is refused; the export is gpg's key.
        let again = try await cli.run(["key", "import", file, "--passphrase-stdin"], input: "\(passphrase)\n")
        #expect(again.status == 1 && again.stderr.contains("in the store already"), "\(again.stderr)")
        let exported = try await cli.run(["key", "export", "--public", fingerprint])
        let other = try GnuPG()
        try other.gpg(["--import"], input: Array(exported.stdout.utf8))
        #expect(try other.gpg(["--with-colons", "--list-keys"]).stdout.contains("fpr:::::::::\(fingerprint):"))

        // The passphrase is in no file of the home.
        #expect(CanaryScanner.occurrences(of: [Array(passphrase.utf8)], under: [cli.home.path]).isEmpty)
    }

    @Test func theAgentAsksForThePassphraseThroughItsFailureAndTakesItInASecretFrame() async throws {
        let cli = CLIRunner(prefix: "coffer-key-agent", ownRuntime: true)
        try #require(try await cli.run(["init", "--account", "alice"]).status == 0)
        let agent = try await cli.startAgent()
        defer { CLIRunner.stopAgent(agent) }
        try #require(try await cli.run(["unlock"]).status == 0)

        let gpg = try GnuPG()
        let passphrase = "agent passphrase 17"
        let fingerprint = try gpg.generateKey(userID: "Erin <erin@example.org>", passphrase: passphrase)
        // Binary this time.
        let path = gpg.folder.path + "/erin.gpg"
        try gpg.gpg(["--passphrase", passphrase, "--output", path, "--export-secret-keys", fingerprint])
        let refused = try await cli.run(["key", "import", path, "--passphrase-stdin"], input: "wrong one\n")
        #expect(refused.status == 1 && refused.stderr.contains("does not unlock"), "\(refused.stderr)")
        let imported = try await cli.run(["key", "import", path, "--passphrase-stdin"], input: "\(passphrase)\n")
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(try await Self.listed(cli) == [fingerprint])
    }

    @Test(arguments: [
        ("empty", ""),
        ("text", "This is a note, not a key.\n"),
        (
            "armored junk",
            "-----BEGIN PGP PUBLIC KEY BLOCK-----\nComment: hello\nX-Header: quoted by RNP\n\nAAAA\n"
                + "-----END PGP PUBLIC KEY BLOCK-----\n"
        ),
    ])
    func aFileThatIsNoKeyIsRefusedAndRNPPrintsNothing(name: String, content: String) async throws {
        let cli = try await Self.home()
        let folder = TemporaryDirectory(prefix: "coffer-key-bad")
        let path = folder.path + "/input"
        try Data(content.utf8).write(to: URL(fileURLWithPath: path))
        let result = try await cli.run(["key", "import", path])
        #expect(result.status == 1)
        #expect(
            result.stderr == "coffer: The OpenPGP key is empty, cut short or not OpenPGP data.\n",
            "\(result.stderr)"
        )
        #expect(try await cli.run(["key", "list"]).stdout == "No OpenPGP keys.\n")
    }

    @Test func aCertificateAloneIsACorrespondentsKeyNotYours() async throws {
        let cli = try await Self.home()
        let gpg = try GnuPG()
        let fingerprint = try gpg.generateKey(userID: "Frank <frank@example.org>", passphrase: "")
        let certificate = try gpg.gpg(["--armor", "--export", fingerprint]).stdout
        let result = try await cli.run(["key", "import", try gpg.file(certificate, name: "frank.asc")])
        #expect(result.status == 0 && result.stdout.contains("\tcontact\t"), "\(result.stderr)")
        // Not the user's own: there is no key of theirs to export.
        let export = try await cli.run(["key", "export", "--public"])
        #expect(export.status == 1 && export.stderr.contains("no such OpenPGP key of yours"), "\(export.stderr)")
        let missing = try await cli.run(["key", "import", gpg.folder.path + "/nothing-here.asc"])
        #expect(missing.status == 1 && missing.stderr.contains("no key file"), "\(missing.stderr)")
    }

    @Test func aUserIDWithTerminalEscapesIsListedCleaned() async throws {
        let cli = try await Self.home()
        let gpg = try GnuPG()
        let hostile = "Mallory \u{1b}]0;owned\u{07}\u{1b}[2J <mallory@example.org>"
        let fingerprint = try gpg.generateKey(userID: hostile, passphrase: "")
        let secret = try gpg.gpg(["--armor", "--export-secret-keys", fingerprint]).stdout
        let imported = try await cli.run(["key", "import", try gpg.file(secret, name: "mallory.asc")])
        #expect(imported.status == 0, "\(imported.stderr)")
        let listed = try await cli.run(["key", "list"]).stdout
        #expect(listed.contains("Mallory ]0;owned[2J <mallory@example.org>"), "\(listed)")
        #expect(!listed.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x07 })
    }

    @Test func generateWithoutAUserIDNeedsASendingAddress() async throws {
        let cli = try await Self.home()
        let result = try await cli.run(["key", "generate"])
        #expect(result.status == 1 && result.stderr.contains("needs a user id"), "\(result.stderr)")
        let control = try await cli.run(["key", "generate", "--user-id", "Bad\u{1}Name <b@example.org>"])
        #expect(control.status == 1 && control.stderr.contains("user id cannot be used"), "\(control.stderr)")
    }
}
