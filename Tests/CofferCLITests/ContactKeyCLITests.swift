import CofferTesting
import Foundation
import Testing

/// Correspondents' public keys (`coffer key import` of a certificate), kept with their sealed contacts: listed apart
/// from the user's own, shown by `coffer contacts`, and used to verify their mail. GnuPG (`gpg`) makes the keys and
/// the mail; bad keys (no email address, expired, revoked) are refused with a sentence and nothing is stored.
@Suite(.serialized) struct ContactKeyCLITests {
    /// A home with Alice's own key generated, her fingerprint, and GnuPG holding her certificate.
    static func alice() async throws -> (CLIRunner, String, KeyCLITests.GnuPG) {
        let cli = try await KeyCLITests.home()
        let generated = try await cli.run(["key", "generate", "--user-id", "Alice <alice@example.org>"])
        try #require(generated.status == 0, "\(generated.stderr)")
        let alice = String(try #require(generated.stdout.split(separator: "\t").first))
        let gpg = try KeyCLITests.GnuPG()
        try await gpg.gpg(["--import"], input: Array(try cli.run(["key", "export", "--public"]).stdout.utf8))
        return (cli, alice, gpg)
    }

    @Test func aCorrespondentsKeyIsKeptWithTheirContactListedApartAndVerifiesTheirMail() async throws {
        let (cli, alice, gpg) = try await Self.alice()
        let gus = try gpg.generateKey(userID: "Gus <gus@example.org>", passphrase: "")
        // Before the key: the signature is Gus's claim only.
        let early = try gpg.encryptAndSign(OpenPGPMailCLITests.entity, signer: gus, recipients: [alice])
        let earlyID = try await OpenPGPMailCLITests.importAndFind(
            cli,
            try OpenPGPMailCLITests.pgpMIMEFile(Array(early.utf8), subject: "Beforekey", folder: gpg.folder.path),
            subject: "Beforekey"
        )
        #expect(try await cli.run(["show", earlyID]).stdout.contains("unknown key \(gus)"))

        let certificate = try gpg.gpg(["--armor", "--export", gus]).stdout
        let imported = try await cli.run(["key", "import", try gpg.file(certificate, name: "gus.asc")])
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(imported.stdout.hasPrefix("\(gus)\t") && imported.stdout.contains("\tcontact\tGus <gus@example.org>"))

        let listed = try await cli.run(["key", "list"]).stdout.split(separator: "\n", omittingEmptySubsequences: false)
            .dropLast().map(String.init)
        try #require(listed.count == 4, "\(listed)")
        #expect(listed[0].hasPrefix("\(alice)\t") && listed[0].contains("\tdefault\t"), "\(listed)")
        #expect(listed[1] == "" && listed[2] == "Correspondents' public keys:", "\(listed)")
        #expect(listed[3].hasPrefix("\(gus)\t") && listed[3].contains("\tcontact\t"), "\(listed)")
        let contacts = try await cli.run(["contacts"]).stdout
        #expect(contacts.contains("Gus <gus@example.org>\tOpenPGP key \(gus)"), "\(contacts)")

        let ciphertext = try gpg.encryptAndSign(OpenPGPMailCLITests.entity, signer: gus, recipients: [alice])
        let id = try await OpenPGPMailCLITests.importAndFind(
            cli,
            try OpenPGPMailCLITests.pgpMIMEFile(Array(ciphertext.utf8), subject: "Gusnote", folder: gpg.folder.path),
            subject: "Gusnote"
        )
        let shown = try await cli.run(["show", id]).stdout
        #expect(
            shown.contains("OpenPGP: encrypted, signed by Gus <gus@example.org> (\(gus)), verified"),
            "\(shown)"
        )
        // Importing it again (an update) keeps one entry.
        #expect(try await cli.run(["key", "import", try gpg.file(certificate, name: "gus-again.asc")]).status == 0)
        #expect(try await cli.run(["key", "list"]).stdout.components(separatedBy: gus).count == 2)
    }

    @Test func aBinaryCertificateWithTwoAddressesBelongsToBothContacts() async throws {
        let (cli, _, gpg) = try await Self.alice()
        let hal = try gpg.generateKey(userID: "Hal <hal@example.org>", passphrase: "")
        try gpg.gpg(["--quick-add-uid", hal, "Hal at home <HAL@Home.Example>"])
        let path = gpg.folder.path + "/hal.pgp"
        try gpg.gpg(["--output", path, "--export", hal])
        let imported = try await cli.run(["key", "import", path])
        #expect(imported.status == 0, "\(imported.stderr)")
        let contacts = try await cli.run(["contacts"]).stdout
        #expect(contacts.contains("Hal <hal@example.org>\tOpenPGP key \(hal)"), "\(contacts)")
        #expect(contacts.contains("Hal at home <HAL@home.example>\tOpenPGP key \(hal)"), "\(contacts)")
    }

    @Test func aKeyWithoutAnEmailAddressAnExpiredKeyAndARevokedKeyAreRefused() async throws {
        let cli = try await KeyCLITests.home()
        let gpg = try KeyCLITests.GnuPG()
        func refused(_ fingerprint: String, _ name: String, saying words: String) async throws {
            let certificate = try gpg.gpg(["--armor", "--export", fingerprint]).stdout
            let result = try await cli.run(["key", "import", try gpg.file(certificate, name: name)])
            #expect(result.status == 1, "\(name): \(result.stdout)")
            #expect(result.stderr.contains(fingerprint) && result.stderr.contains(words), "\(name): \(result.stderr)")
            #expect(!result.stderr.contains("BEGIN PGP"), "\(result.stderr)")
        }
        let nameOnly = try gpg.generateKey(userID: "Just A Name", passphrase: "")
        try await refused(nameOnly, "name.asc", saying: "no user id with an email address")

        // Made in 2020 to expire a day later.
        try gpg.gpg([
            "--faked-system-time", "20200101T000000!", "--passphrase", "", "--quick-gen-key", "Old <old@example.org>",
            "future-default",
            "default", "1d",
        ])
        let listing = try gpg.gpg(["--with-colons", "--list-keys", "--", "old@example.org"]).stdout
        let line = try #require(listing.split(separator: "\n").first { $0.hasPrefix("fpr:") })
        let old = String(try #require(line.split(separator: ":", omittingEmptySubsequences: false).dropFirst(9).first))
        try await refused(old, "old.asc", saying: "expired or revoked")

        // Revoked with the certificate GnuPG made for it (its first line is guarded with ':' against accidents).
        let revoked = try gpg.generateKey(userID: "Rita <rita@example.org>", passphrase: "")
        let revocation = try String(contentsOfFile: "\(gpg.home)/openpgp-revocs.d/\(revoked).rev", encoding: .utf8)
            .replacingOccurrences(
                of: ":-----BEGIN PGP PUBLIC KEY BLOCK-----",
                with: "-----BEGIN PGP PUBLIC KEY BLOCK-----"
            )
        try gpg.gpg(["--import"], input: Array(revocation.utf8))
        try await refused(revoked, "rita.asc", saying: "expired or revoked")

        // A secret key without its secret parts (a GnuPG stub: only the primary, exported as "not here") is neither
        // the user's key nor a correspondent's certificate.
        let stubbed = try gpg.generateKey(userID: "Sam <sam@example.org>", passphrase: "")
        let stub = try gpg.gpg(["--armor", "--export-secret-subkeys", stubbed + "!"]).stdout
        let refusedStub = try await cli.run(["key", "import", try gpg.file(stub, name: "stub.asc")])
        #expect(refusedStub.status == 1, "\(refusedStub.stdout)")
        #expect(refusedStub.stderr.contains("without usable secret parts"), "\(refusedStub.stderr)")

        #expect(try await cli.run(["key", "list"]).stdout == "No OpenPGP keys.\n")
        #expect(await !(try cli.run(["contacts"]).stdout.contains("OpenPGP key")))
    }
    /// A PGP/MIME signed message (`multipart/signed`, RFC 3156 section 5) around `entity` and its detached
    /// `signature`, written to a file in `folder` with CRLF, or LF as a Maildir keeps it; the file's path.
    static func signedMessageFile(
        entity: String,
        signature: String,
        subject: String,
        folder: String,
        lineFeedsOnly: Bool = false
    ) throws -> String {
        var text =
            "From: Gus <gus@example.org>\r\nTo: Alice <alice@example.org>\r\nSubject: \(subject)\r\n"
            + "Date: Tue, 2 Jan 2024 09:00:00 +0000\r\nMessage-ID: <\(UUID().uuidString)@example.org>\r\n"
            + "MIME-Version: 1.0\r\nContent-Type: multipart/signed; micalg=pgp-sha256;\r\n"
            + " protocol=\"application/pgp-signature\"; boundary=\"sig-b1\"\r\n\r\n"
            + "This is an OpenPGP/MIME signed message.\r\n--sig-b1\r\n" + entity + "\r\n--sig-b1\r\n"
            + "Content-Type: application/pgp-signature; name=\"signature.asc\"\r\n\r\n"
            + signature.replacingOccurrences(of: "\n", with: "\r\n") + "\r\n--sig-b1--\r\n"
        if lineFeedsOnly { text = text.replacingOccurrences(of: "\r\n", with: "\n") }
        let path = folder + "/\(UUID().uuidString).eml"
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test func aSignedOnlyMessageFromACorrespondentIsVerifiedAndAChangedOneIsABadSignature() async throws {
        let (cli, _, gpg) = try await Self.alice()
        let gus = try gpg.generateKey(userID: "Gus <gus@example.org>", passphrase: "")
        let entity =
            "Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 7bit\r\n\r\n"
            + "The signed word is Wombatsigned7.\r\n"
        let signature = try gpg.gpg(["--armor", "--detach-sign", "--local-user", gus], input: Array(entity.utf8)).stdout
        func shown(_ subject: String, entity: String, lineFeedsOnly: Bool = false) async throws -> String {
            let path = try Self.signedMessageFile(
                entity: entity,
                signature: signature,
                subject: subject,
                folder: gpg.folder.path,
                lineFeedsOnly: lineFeedsOnly
            )
            let id = try await OpenPGPMailCLITests.importAndFind(cli, path, subject: subject)
            let shown = try await cli.run(["show", id])
            #expect(shown.status == 0, "\(shown.stderr)")
            return shown.stdout
        }
        // Gus's key unknown yet: his claim only.
        let early = try await shown("Unknownsigned", entity: entity)
        #expect(
            early.contains("OpenPGP: not encrypted; signature could not be checked (unknown key \(gus))"),
            "\(early)"
        )

        let certificate = try gpg.gpg(["--armor", "--export", gus]).stdout
        #expect(try await cli.run(["key", "import", try gpg.file(certificate, name: "gus.asc")]).status == 0)
        let good = try await shown("Goodsigned", entity: entity)
        #expect(good.contains("OpenPGP: not encrypted; signed by Gus <gus@example.org> (\(gus)), verified"), "\(good)")
        #expect(good.contains("The signed word is Wombatsigned7."), "\(good)")
        // Stored with LF line ends (as a Maildir keeps mail): checked in its canonical CRLF form, still good.
        let lineFeeds = try await shown("Lfsigned", entity: entity, lineFeedsOnly: true)
        #expect(lineFeeds.contains("signed by Gus <gus@example.org> (\(gus)), verified"), "\(lineFeeds)")
        // One word of the signed text changed: a bad signature, said as such.
        let changed = try await shown(
            "Changedsigned",
            entity: entity.replacingOccurrences(of: "Wombat", with: "Wombak")
        )
        #expect(
            changed.contains("OpenPGP: not encrypted; bad signature by Gus <gus@example.org> (\(gus))"),
            "\(changed)"
        )
        #expect(!changed.contains("verified"), "\(changed)")
    }

}
