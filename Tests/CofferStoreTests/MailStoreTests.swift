import CofferCrypto
import CofferKeymaker
import CofferMIME
import CofferSampleMail
import CofferTesting
import Foundation
import GRDB
import Testing

@testable import CofferStore

@Suite("Mail store")
struct MailStoreTests {
    @Test("import, list, show, search and attachments round-trip")
    func roundTrip() async throws {
        let world = try await StoreWorld()
        let store = world.store
        let outcomes = try await store.importMessages([
            rawMessage(id: "a@x", subject: "Quarterly budget review", body: "Numbers for the budget meeting."),
            rawMessage(
                id: "b@x",
                subject: "Café plans",
                body: "Let us meet at the CAFÉ on Friday.",
                date: "Tue, 2 Jan 2024 10:00:00 +0000"
            ),
            RawMessage(bytes: SyntheticMail(seed: 7).message(3, attachment: true)),
        ])
        let ids = outcomes.compactMap(\.id)
        #expect(ids.count == 3)

        let listed = try await store.list()
        #expect(listed.map(\.subject).first == "Café plans")
        #expect(listed.count == 3)
        #expect(listed.allSatisfy { !$0.isCorrupt })

        let detail = try await store.message(ids[0])
        #expect(detail.summary.subject == "Quarterly budget review")
        #expect(detail.summary.from == [MailAddress(name: "Bob", address: "bob@example.org")])
        #expect(detail.to.map(\.address) == ["alice@example.org"])
        #expect(detail.textBody?.contains("budget meeting") == true)
        #expect(detail.headers.contains { $0.name == "Message-ID" })
        #expect(detail.snippet == "Numbers for the budget meeting.")

        #expect(try await store.search("budget").map(\.id) == [ids[0]])
        #expect(try await store.search("BUDGET Meeting").map(\.id) == [ids[0]])
        #expect(try await store.search("budget friday").isEmpty)
        #expect(try await store.search("café").map(\.id) == [ids[1]])
        #expect(try await store.search("bob@example.org").count == 2)
        #expect(try await store.search("   ").isEmpty)

        let attachments = try await store.attachments(of: ids[2])
        #expect(attachments.count == 1)
        #expect(attachments.first?.filename == "file3.bin")
        let content = try await store.attachmentContent(attachments[0].id)
        #expect(content.content.count == attachments[0].size)
        let parsed = try MIMEParser.parse(SyntheticMail(seed: 7).message(3, attachment: true))
        #expect(content.content == parsed.attachments.first?.body)
        let summary = try #require(try await store.list().first { $0.id == ids[2] })
        #expect(summary.flags.contains(.hasAttachments))
    }

    @Test("import is idempotent by Message-ID and by content; malformed messages are skipped")
    func idempotentImport() async throws {
        let world = try await StoreWorld()
        let store = world.store
        let first = rawMessage(id: "same@x", subject: "One", body: "first")
        #expect(try await store.importMessage(first).id != nil)
        #expect(try await store.importMessage(first) == .duplicate)
        let sameID = rawMessage(id: "same@x", subject: "Different", body: "other body")
        #expect(try await store.importMessage(sameID) == .duplicate)
        let noID = RawMessage(bytes: Array("Subject: no id\r\n\r\nbody\r\n".utf8))
        #expect(try await store.importMessage(noID).id != nil)
        #expect(try await store.importMessage(noID) == .duplicate)
        let batch = try await store.importMessages([
            RawMessage(bytes: []),
            rawMessage(id: "new@x", subject: "New", body: "new"),
            rawMessage(id: "new@x", subject: "New", body: "new"),
        ])
        #expect(batch[0] == .malformed(.emptyMessage))
        #expect(batch[1].id != nil)
        #expect(batch[2] == .duplicate)
        #expect(try await store.count() == 3)
    }

    @Test("the dedup and index columns are keyed: the same message gives other hashes under another MainKey")
    func keyedHashes() async throws {
        let message = rawMessage(id: "k@x", subject: "keyed", body: "hash")
        var hashes: [[UInt8]] = []
        for _ in 0..<2 {
            let world = try await StoreWorld()
            _ = try await world.store.importMessage(message)
            let row = try world.rawQueue().read { db in
                try Row.fetchOne(db, sql: "SELECT contentHash, messageIDHash FROM messages")
            }
            let content: Data = try #require(row)["contentHash"]
            hashes.append(Array(content))
        }
        #expect(hashes[0] != hashes[1])
        #expect(hashes[0].count == 16)
    }

    @Test("list filters by label, pages by date descending, and threads replies")
    func listingAndLabels() async throws {
        let world = try await StoreWorld()
        let store = world.store
        let generator = SyntheticMail(seed: 3)
        var inbox: [RawMessage] = []
        for index in 0..<30 { inbox.append(RawMessage(bytes: generator.message(index))) }
        var archive: [RawMessage] = []
        for index in 30..<40 { archive.append(RawMessage(bytes: generator.message(index), labels: ["Archive"])) }
        _ = try await store.importMessages(inbox)
        _ = try await store.importMessages(archive)

        let all = try await store.list(limit: 100)
        #expect(all.count == 40)
        #expect(zip(all, all.dropFirst()).allSatisfy { $0.date >= $1.date })
        let page = try await store.list(limit: 10, offset: 5)
        #expect(page.map(\.id) == Array(all[5..<15]).map(\.id))
        let archived = try await store.list(label: "Archive", limit: 50)
        #expect(archived.count == 10)
        #expect(try await store.list(label: "Nope").isEmpty)
        #expect(Set(try await store.labels().map(\.name)) == ["Inbox", "Archive"])

        let reply = rawMessage(
            id: "reply@x",
            subject: "Re: thread",
            body: "reply",
            extraHeaders: "In-Reply-To: <2.3@synthetic.example>\r\n"
        )
        let replyID = try #require(try await store.importMessage(reply).id)
        let parent = try #require(all.first { $0.id == 3 })
        #expect(try await store.message(replyID).summary.conversationID == parent.conversationID)

        await #expect(throws: StoreError.invalidArgument("the limit must be between 1 and 1000")) {
            try await store.list(limit: 0)
        }
        await #expect(throws: StoreError.messageNotFound(999)) { try await store.message(999) }
    }

    @Test("contacts, accounts, addresses and labels are sealed and round-trip")
    func directory() async throws {
        let world = try await StoreWorld()
        let store = world.store
        let contact = try await store.addContact(name: "Carol", address: "carol@example.org")
        #expect(try await store.addContact(name: "Carol C.", address: "carol@EXAMPLE.org").id == contact.id)
        #expect(
            try await store.allContacts() == [Contact(id: contact.id, name: "Carol C.", address: "carol@example.org")]
        )
        let account = try await store.addAccount(username: "alice", displayName: "Alice")
        #expect(try await store.accounts() == [Account(id: account, username: "alice", displayName: "Alice")])
        let address = try await store.saveAddress(accountID: account, address: "alice@coffer.example", displayName: nil)
        #expect(
            try await store.addresses(accountID: account) == [
                OwnAddress(id: address, accountID: account, address: "alice@coffer.example", displayName: nil)
            ]
        )
        let label = try await store.createLabel("Receipts")
        #expect(try await store.createLabel("Receipts") == label)
        try store.close()
        let needles = ["Carol", "carol@example", "alice@coffer", "Receipts"].map { Array($0.utf8) }
        #expect(fastScan(needles, under: world.root.path).isEmpty)
    }

    @Test("deleting a message removes its rows and index entries")
    func deletion() async throws {
        let world = try await StoreWorld()
        let id = try #require(
            try await world.store.importMessage(RawMessage(bytes: SyntheticMail().message(1, attachment: true))).id
        )
        try await world.store.deleteMessage(id)
        #expect(try await world.store.count() == 0)
        let leftovers = try await world.rawQueue().read { db in
            try Int.fetchOne(db, sql: "SELECT (SELECT count(*) FROM searchIndex) + (SELECT count(*) FROM attachments)")
        }
        #expect(leftovers == 0)
        await #expect(throws: StoreError.messageNotFound(id)) { try await world.store.deleteMessage(id) }
    }

    @Test("every store call throws locked while the Keymaker is locked, and works again after unlock")
    func lockedKeymaker() async throws {
        let world = try await StoreWorld()
        let store = world.store
        let id = try #require(try await store.importMessage(rawMessage(id: "l@x", subject: "s", body: "b")).id)
        await world.keymaker.lock()
        await #expect(throws: StoreError.locked) { try await store.list() }
        await #expect(throws: StoreError.locked) { try await store.message(id) }
        await #expect(throws: StoreError.locked) { try await store.search("s") }
        await #expect(throws: StoreError.locked) { try await store.attachments(of: id) }
        await #expect(throws: StoreError.locked) { try await store.settings() }
        await #expect(throws: StoreError.locked) { try await store.updateSettings(.mostPrivate) }
        await #expect(throws: StoreError.locked) { try await store.labels() }
        await #expect(throws: StoreError.locked) { try await store.allContacts() }
        await #expect(throws: StoreError.locked) { try await store.count() }
        await #expect(throws: StoreError.locked) {
            try await store.importMessage(rawMessage(id: "m@x", subject: "s", body: "b"))
        }
        try await world.keymaker.unlock(.none)
        #expect(try await store.message(id).summary.subject == "s")
    }

    @Test("cells are sealed under the documented context and open only there")
    func cellContext() async throws {
        let world = try await StoreWorld()
        let id = try #require(try await world.store.importMessage(rawMessage(id: "c@x", subject: "ctx", body: "b")).id)
        let cell = try await world.rawQueue().read { db in
            try Data.fetchOne(db, sql: "SELECT subject FROM messages WHERE id = ?", arguments: [id])
        }
        let sealed = Array(try #require(cell))
        let key = try await world.keymaker.mainKey(for: .userRequest).subkey("store.messages.subject")
        let context = EnvelopeContext(["store", "messages", "subject", String(id)])
        #expect(StoreKeys.context(.messageSubject, row: id) == context)
        #expect(try CellReader.text(Envelope.open(sealed, with: key, context: context)) == "ctx")
        #expect(throws: CofferCryptoError.wrongContext) {
            try Envelope.open(sealed, with: key, context: ["store", "messages", "subject", String(id + 1)])
        }
        // Cell v2: version, present tag, length, 3 bytes, 0x80, zeros to the 32-byte bucket.
        #expect(sealed.count == Envelope.overhead + 32)
    }

    @Test("store errors describe themselves without message data")
    func errorDescriptions() {
        let errors: [StoreError] = [
            .locked, .messageNotFound(3), .attachmentNotFound(4), .corruptMessage(5),
            .corruptRecord(table: "labels", id: 6), .invalidArgument("x"), .database(code: 1, message: "m"),
            .io(operation: "read", errno: 2), .keymaker(.notSetUp), .crypto(.authenticationFailed),
            .source(.emptyMessage),
        ]
        // Each a sentence for people, and no two alike.
        for error in errors {
            #expect(error.description.first?.isUppercase == true && error.description.hasSuffix("."), "\(error)")
        }
        #expect(Set(errors.map(\.description)).count == errors.count)
    }
}

@Suite("Search tokenizer")
struct SearchTokenizerTests {
    @Test("tokens are lowercased, split on punctuation, NFC-normalised, and short ones dropped")
    func normalisation() {
        #expect(
            SearchTokenizer.tokens(in: "Hello, World! a bob@Example.ORG") == [
                "hello", "world", "bob", "example", "org",
            ]
        )
        #expect(SearchTokenizer.tokens(in: "Caf\u{E9}") == SearchTokenizer.tokens(in: "CAFE\u{301}"))
        #expect(SearchTokenizer.tokens(in: "Straße ÜBER") == ["straße", "über"])
        #expect(SearchTokenizer.tokens(in: "東京 2024") == ["東京", "2024"])
        let long = String(repeating: "x", count: 100)
        #expect(SearchTokenizer.tokens(in: long).first?.utf8.count == SearchTokenizer.maximumLength)
        #expect(SearchTokenizer.tokens(in: "").isEmpty)
    }
}
