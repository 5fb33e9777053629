import CofferTesting
import Foundation
import Testing

/// PGP/MIME mail that real GnuPG (`gpg`) and Sequoia (`sq`) encrypt and sign, imported with `coffer import`:
/// decrypted, verified, found by `coffer search`, and `coffer show` says so; a tampered one leaves no plaintext in any
/// file. The messages are wrapped as RFC 3156 says (multipart/encrypted, two parts) by the test.
@Suite(.serialized) struct OpenPGPMailCLITests {
    static let canary = "Quokkacanary77"
    static let entity =
        "Content-Type: text/plain; charset=utf-8\r\n\r\nThe meeting word is \(canary), keep it.\r\n"

    /// `ciphertext` wrapped as a PGP/MIME message, written to a file in `folder`; the file's path.
    static func pgpMIMEFile(_ ciphertext: [UInt8], subject: String, folder: String) throws -> String {
        let text =
            "From: Gus <gus@example.org>\r\nTo: Alice <alice@example.org>\r\nSubject: \(subject)\r\n"
            + "Date: Tue, 2 Jan 2024 09:00:00 +0000\r\nMessage-ID: <\(UUID().uuidString)@example.org>\r\n"
            + "MIME-Version: 1.0\r\n"
            + "Content-Type: multipart/encrypted; protocol=\"application/pgp-encrypted\"; boundary=\"b1\"\r\n\r\n"
            + "--b1\r\nContent-Type: application/pgp-encrypted\r\n\r\nVersion: 1\r\n\r\n--b1\r\n"
            + "Content-Type: application/octet-stream; name=\"encrypted.asc\"\r\n"
            + "Content-Transfer-Encoding: base64\r\n\r\n"
            + Data(ciphertext).base64EncodedString(options: .lineLength76Characters)
            .replacingOccurrences(of: "\n", with: "\r\n") + "\r\n--b1--\r\n"
        let path = folder + "/\(UUID().uuidString).eml"
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// Imports the file and returns the id `coffer search` finds for `subject`'s first word.
    static func importAndFind(_ cli: CLIRunner, _ path: String, subject: String) async throws -> String {
        let imported = try await cli.run(["import", path])
        try #require(imported.status == 0, "\(imported.stderr)")
        // RNP's own diagnostics (such as "mdc hash check failed") are kept from standard error.
        #expect(!imported.stderr.contains("[") && !imported.stderr.contains("stream-parse"), "\(imported.stderr)")
        let found = try await cli.run(["search", subject])
        let line = try #require(found.stdout.split(separator: "\n").first { $0.contains(subject) }, "\(found.stdout)")
        return String(try #require(line.split(separator: "\t").first))
    }

    /// The path of `tool`, or a failure saying why (scripts/setup.sh installs both).
    static func tool(_ name: String) throws -> String {
        let path = "/usr/bin/\(name)"
        try #require(FileManager.default.isExecutableFile(atPath: path), "\(name) is missing: run scripts/setup.sh")
        return path
    }

    @Test func gnuPGMailToAKeyCofferGeneratedDecryptsAndItsUnknownSignerIsSaid() async throws {
        let cli = try await KeyCLITests.home()
        let generated = try await cli.run(["key", "generate", "--user-id", "Alice <alice@example.org>"])
        try #require(generated.status == 0, "\(generated.stderr)")
        let alice = String(try #require(generated.stdout.split(separator: "\t").first))
        let exported = try await cli.run(["key", "export", "--public"])
        let gpg = try KeyCLITests.GnuPG()
        try gpg.gpg(["--import"], input: Array(exported.stdout.utf8))
        let gus = try gpg.generateKey(userID: "Gus <gus@example.org>", passphrase: "")
        let ciphertext = try gpg.encryptAndSign(Self.entity, signer: gus, recipients: [alice])
        let id = try await Self.importAndFind(
            cli,
            try Self.pgpMIMEFile(Array(ciphertext.utf8), subject: "Gnupgnote", folder: gpg.folder.path),
            subject: "Gnupgnote"
        )
        let shown = try await cli.run(["show", id])
        #expect(shown.status == 0, "\(shown.stderr)")
        #expect(shown.stdout.contains("The meeting word is \(Self.canary), keep it."), "\(shown.stdout)")
        #expect(
            shown.stdout.contains("OpenPGP: encrypted; signature could not be checked (unknown key \(gus))"),
            "\(shown.stdout)"
        )
        #expect(try await cli.run(["search", Self.canary]).stdout.contains("Gnupgnote"))
        #expect(CanaryScanner.occurrences(of: [Array(Self.canary.utf8)], under: [cli.home.path]).isEmpty)
    }

    @Test func gnuPGMailSignedByAKeyImportedIntoCofferIsVerifiedAndATamperedOneLeavesNoPlaintext() async throws {
        let cli = try await KeyCLITests.home()
        let gpg = try KeyCLITests.GnuPG()
        let alice = try gpg.generateKey(userID: "Alice <alice@example.org>", passphrase: "")
        let secret = try gpg.gpg(["--armor", "--export-secret-keys", alice]).stdout
        let imported = try await cli.run(["key", "import", try gpg.file(secret, name: "alice.asc")])
        try #require(imported.status == 0, "\(imported.stderr)")
        // Binary this time: gpg writes to a file.
        let output = gpg.folder.path + "/message.gpg"
        try gpg.gpg(
            [
                "--trust-model", "always", "--output", output, "--encrypt", "--sign", "--local-user", alice,
                "--recipient",
                alice, try gpg.file(Self.entity, name: "entity.txt"),
            ]
        )
        let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: output)))
        let id = try await Self.importAndFind(
            cli,
            try Self.pgpMIMEFile(bytes, subject: "Signednote", folder: gpg.folder.path),
            subject: "Signednote"
        )
        let shown = try await cli.run(["show", id]).stdout
        #expect(
            shown.contains("OpenPGP: encrypted, signed by Alice <alice@example.org> (\(alice)), verified"),
            "\(shown)"
        )
        #expect(shown.contains(Self.canary))

        // The last bytes are the MDC's hash: one changed bit, and nothing of the text may be kept.
        var tampered = bytes
        tampered[tampered.count - 4] ^= 0x10
        let bad = try await Self.importAndFind(
            cli,
            try Self.pgpMIMEFile(tampered, subject: "Tamperednote", folder: gpg.folder.path),
            subject: "Tamperednote"
        )
        let refused = try await cli.run(["show", bad]).stdout
        #expect(refused.contains("OpenPGP: could not be decrypted (its integrity check failed"), "\(refused)")
        #expect(!refused.contains(Self.canary))
        // Without integrity protection at all (the SED packet `--rfc2440` writes, which EFAIL's CFB gadgets change
        // undetected): nothing of it is kept either.
        let sed = gpg.folder.path + "/sed.gpg"
        try gpg.gpg(
            [
                "--trust-model", "always", "--rfc2440", "--output", sed, "--encrypt", "--recipient", alice,
                try gpg.file(Self.entity, name: "entity-sed.txt"),
            ]
        )
        let unprotected = try await Self.importAndFind(
            cli,
            try Self.pgpMIMEFile(
                Array(try Data(contentsOf: URL(fileURLWithPath: sed))),
                subject: "Unprotectednote",
                folder: gpg.folder.path
            ),
            subject: "Unprotectednote"
        )
        let unread = try await cli.run(["show", unprotected]).stdout
        #expect(unread.contains("OpenPGP: could not be decrypted (its integrity check failed"), "\(unread)")
        #expect(!unread.contains(Self.canary))
        let hits = try await cli.run(["search", Self.canary]).stdout
        #expect(hits.contains("Signednote") && !hits.contains("Tamperednote"), "\(hits)")
        #expect(!hits.contains("Unprotectednote"), "\(hits)")
        #expect(CanaryScanner.occurrences(of: [Array(Self.canary.utf8)], under: [cli.home.path]).isEmpty)
    }

    @Test func throughTheAgentNoFileHoldsTheDecryptedTextAfterImportShowAndLock() async throws {
        let cli = CLIRunner(prefix: "coffer-pgp-agent", ownRuntime: true)
        try #require(try await cli.run(["init", "--account", "alice"]).status == 0)
        let agent = try await cli.startAgent()
        defer { CLIRunner.stopAgent(agent) }
        try #require(try await cli.run(["unlock"]).status == 0)
        let generated = try await cli.run(["key", "generate", "--user-id", "Alice <alice@example.org>"])
        try #require(generated.status == 0, "\(generated.stderr)")
        let alice = String(try #require(generated.stdout.split(separator: "\t").first))
        let gpg = try KeyCLITests.GnuPG()
        try await gpg.gpg(["--import"], input: Array(try cli.run(["key", "export", "--public"]).stdout.utf8))
        let ciphertext = try gpg.gpg(
            ["--trust-model", "always", "--armor", "--encrypt", "--recipient", alice],
            input: Array(Self.entity.utf8)
        ).stdout
        let id = try await Self.importAndFind(
            cli,
            try Self.pgpMIMEFile(Array(ciphertext.utf8), subject: "Agentnote", folder: gpg.folder.path),
            subject: "Agentnote"
        )
        let shown = try await cli.run(["show", id]).stdout
        #expect(shown.contains(Self.canary) && shown.contains("OpenPGP: encrypted, not signed"), "\(shown)")
        #expect(try await cli.run(["lock"]).status == 0)
        let locked = try await cli.run(["show", id])
        #expect(locked.status != 0 && !locked.stdout.contains(Self.canary))
        let roots = [cli.home.path] + (cli.runtime.map { [$0.path] } ?? [])
        #expect(CanaryScanner.occurrences(of: [Array(Self.canary.utf8)], under: roots).isEmpty)
    }

    @Test func decryptedHTMLGoesThroughTheSanitizerWithRemoteContentBlocked() async throws {
        let cli = try await KeyCLITests.home()
        let generated = try await cli.run(["key", "generate", "--user-id", "Alice <alice@example.org>"])
        try #require(generated.status == 0, "\(generated.stderr)")
        let alice = String(try #require(generated.stdout.split(separator: "\t").first))
        let gpg = try KeyCLITests.GnuPG()
        try await gpg.gpg(["--import"], input: Array(try cli.run(["key", "export", "--public"]).stdout.utf8))
        let html =
            "Content-Type: text/html; charset=utf-8\r\n\r\n<p>Hello \(Self.canary)</p>"
            + "<img src=\"http://efail.de/leak\"><script>alert(1)</script>\r\n"
        let ciphertext = try gpg.gpg(
            ["--trust-model", "always", "--armor", "--encrypt", "--recipient", alice],
            input: Array(html.utf8)
        ).stdout
        let id = try await Self.importAndFind(
            cli,
            try Self.pgpMIMEFile(Array(ciphertext.utf8), subject: "Htmlnote", folder: gpg.folder.path),
            subject: "Htmlnote"
        )
        let page = gpg.folder.path + "/page.html"
        let shown = try await cli.run(["show", id, "--html", "--viewer", "cp \"$1\" \(page); true"])
        #expect(shown.status == 0, "\(shown.stderr)")
        #expect(shown.stderr.contains("remote resource"), "\(shown.stderr)")
        let text = try String(contentsOfFile: page, encoding: .utf8)
        #expect(text.contains("Hello \(Self.canary)"))
        #expect(!text.contains("efail.de") && !text.contains("<script"), "\(text)")
        try FileManager.default.removeItem(atPath: page)
    }

    @Test func mailThatCameBeforeItsKeyIsDecryptedWhenTheKeyIsImported() async throws {
        let cli = try await KeyCLITests.home()
        let gpg = try KeyCLITests.GnuPG()
        let alice = try gpg.generateKey(userID: "Alice <alice@example.org>", passphrase: "")
        let ciphertext = try gpg.encryptAndSign(Self.entity, signer: alice, recipients: [alice])
        let id = try await Self.importAndFind(
            cli,
            try Self.pgpMIMEFile(Array(ciphertext.utf8), subject: "Earlynote", folder: gpg.folder.path),
            subject: "Earlynote"
        )
        let before = try await cli.run(["show", id]).stdout
        #expect(before.contains("OpenPGP: could not be decrypted (no secret key for it)"), "\(before)")
        #expect(before.contains("encrypted.asc") && !before.contains(Self.canary), "\(before)")
        let secret = try gpg.gpg(["--armor", "--export-secret-keys", alice]).stdout
        let imported = try await cli.run(["key", "import", try gpg.file(secret, name: "alice.asc")])
        try #require(imported.status == 0, "\(imported.stderr)")
        let after = try await cli.run(["show", id]).stdout
        #expect(
            after.contains("OpenPGP: encrypted, signed by Alice <alice@example.org> (\(alice)), verified"),
            "\(after)"
        )
        #expect(after.contains("The meeting word is \(Self.canary), keep it.") && !after.contains("encrypted.asc"))
        #expect(try await cli.run(["search", Self.canary]).stdout.contains("Earlynote"))
        #expect(CanaryScanner.occurrences(of: [Array(Self.canary.utf8)], under: [cli.home.path]).isEmpty)
    }

    @Test func noDecryptedTextStaysInTheAgentAfterLock() async throws {
        var (cli, runtime) = AgentProcess.runner()
        let control = "CtrlPgp\(UInt32.random(in: 100_000...999_999))Kw"
        cli.extraEnvironment["COFFER_TEST_MEMORY_CONTROL"] = control
        try #require(try await cli.run(["init", "--account", "alice"]).status == 0)
        let agent = try await AgentProcess(cli, runtime: runtime)
        let pid = agent.process.processIdentifier
        try #require(ProcessMemory.readable(pid: pid), "this run cannot read the agent's memory (needs CAP_SYS_PTRACE)")
        try #require(try await cli.run(["unlock"]).status == 0)
        let generated = try await cli.run(["key", "generate", "--user-id", "Alice <alice@example.org>"])
        try #require(generated.status == 0, "\(generated.stderr)")
        let alice = String(try #require(generated.stdout.split(separator: "\t").first))
        let gpg = try KeyCLITests.GnuPG()
        try await gpg.gpg(["--import"], input: Array(try cli.run(["key", "export", "--public"]).stdout.utf8))
        // Unique per run, so nothing else in the agent's memory can hold it.
        let secret = "PgpMem\(UInt32.random(in: 100_000...999_999))Vx"
        let ciphertext = try gpg.gpg(
            ["--trust-model", "always", "--armor", "--encrypt", "--recipient", alice],
            input: Array("Content-Type: text/plain; charset=utf-8\r\n\r\nRead this: \(secret) only.\r\n".utf8)
        ).stdout
        let path = try Self.pgpMIMEFile(Array(ciphertext.utf8), subject: "Memorynote", folder: gpg.folder.path)
        let id = try await Self.importAndFind(cli, path, subject: "Memorynote")
        for _ in 0..<3 { #expect(try await cli.run(["show", id]).stdout.contains(secret)) }
        let needles = [Array(secret.utf8)]
        let unlocked = ProcessMemory.count(pid: pid, needles: needles)
        #expect(ProcessMemory.count(pid: pid, needles: [Array(control.utf8)]) != [0], "the scan cannot see the agent")
        #expect(try await cli.run(["lock"]).status == 0)
        var locked = ProcessMemory.count(pid: pid, needles: needles)
        _ = await eventually(seconds: 5) {
            locked = ProcessMemory.count(pid: pid, needles: needles)
            return locked == [0]
        }
        print("agent memory, decrypted canary: unlocked \(unlocked), after lock \(locked)")
        #expect(locked == [0], "copies of the decrypted text after lock: \(locked)")
        agent.stop()
    }

    @Test func aSignerUserIDWithTerminalEscapesIsShownCleaned() async throws {
        let cli = try await KeyCLITests.home()
        let gpg = try KeyCLITests.GnuPG()
        let hostile = "Mallory \u{1b}]0;owned\u{07}\u{1b}[2J <mallory@example.org>"
        let mallory = try gpg.generateKey(userID: hostile, passphrase: "")
        let secret = try gpg.gpg(["--armor", "--export-secret-keys", mallory]).stdout
        try #require(try await cli.run(["key", "import", try gpg.file(secret, name: "mallory.asc")]).status == 0)
        let ciphertext = try gpg.encryptAndSign(Self.entity, signer: mallory, recipients: [mallory])
        let id = try await Self.importAndFind(
            cli,
            try Self.pgpMIMEFile(Array(ciphertext.utf8), subject: "Escapenote", folder: gpg.folder.path),
            subject: "Escapenote"
        )
        let shown = try await cli.run(["show", id]).stdout
        #expect(
            shown.contains("OpenPGP: encrypted, signed by Mallory ]0;owned[2J <mallory@example.org> (\(mallory))"),
            "\(shown)"
        )
        #expect(!shown.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x07 })
    }

    @Test func sequoiaMailSignedByAKeyImportedIntoCofferIsVerified() async throws {
        let sq = try Self.tool("sq")
        let cli = try await KeyCLITests.home()
        let folder = TemporaryDirectory(prefix: "coffer-sq-mail")
        func run(_ arguments: [String]) async throws {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: sq)
            process.arguments = arguments
            process.environment = ["HOME": folder.path, "PATH": "/usr/bin:/bin", "LANG": "C"]
            let errors = Pipe()
            process.standardError = errors
            try process.run()
            let said = errors.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            try #require(process.terminationStatus == 0, "sq \(arguments): \(String(decoding: said, as: UTF8.self))")
        }
        let key = folder.path + "/key.pgp"
        let cert = folder.path + "/cert.pgp"
        try await run(["key", "generate", "--userid", "Sally <sally@example.org>", "--export", key])
        try await run(["key", "extract-cert", "--output", cert, key])
        let imported = try await cli.run(["key", "import", key])
        try #require(imported.status == 0, "\(imported.stderr)")
        let fingerprint = String(try #require(imported.stdout.split(separator: "\t").first))
        let plain = folder.path + "/entity.txt"
        try Data(Self.entity.utf8).write(to: URL(fileURLWithPath: plain))
        let output = folder.path + "/message.pgp"
        try await run(["encrypt", "--recipient-cert", cert, "--signer-key", key, "--output", output, plain])
        let id = try await Self.importAndFind(
            cli,
            try Self.pgpMIMEFile(
                Array(try Data(contentsOf: URL(fileURLWithPath: output))),
                subject: "Sequoianote",
                folder: folder.path
            ),
            subject: "Sequoianote"
        )
        let shown = try await cli.run(["show", id]).stdout
        #expect(
            shown.contains("OpenPGP: encrypted, signed by Sally <sally@example.org> (\(fingerprint)), verified"),
            "\(shown)"
        )
        #expect(shown.contains("The meeting word is \(Self.canary), keep it."))
        #expect(try await cli.run(["search", Self.canary]).stdout.contains("Sequoianote"))
        #expect(CanaryScanner.occurrences(of: [Array(Self.canary.utf8)], under: [cli.home.path]).isEmpty)
    }
}
