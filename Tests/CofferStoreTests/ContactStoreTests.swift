import CofferMIME
import CofferTesting
import Foundation
import GRDB
import Testing

@testable import CofferStore

@Suite("Address book")
struct ContactStoreTests {
    @Test(
        "canonical addresses: domain lower-cased, local part as written, non-addresses refused",
        arguments: [
            ("Carol@Example.ORG", "Carol@example.org"),
            ("  bob@EXAMPLE.org ", "bob@example.org"),
            ("\"a@b\"@Example.org", "\"a@b\"@example.org"),
            ("no-at-sign", nil),
            ("@example.org", nil),
            ("carol@", nil),
            ("car ol@example.org", nil),
            ("carol@example.org\r\nBCC:x@y", nil),
            (String(repeating: "a", count: 320) + "@example.org", nil),
        ] as [(String, String?)]
    )
    func canonical(input: String, expected: String?) {
        #expect(MailStore.canonicalAddress(input) == expected)
    }

    @Test("addContact creates then updates one entry per canonical address; deleteContact removes it")
    func addAndDelete() async throws {
        let world = try await StoreWorld()
        let store = world.store
        let carol = try await store.addContact(name: "Carol", address: "carol@Example.org")
        #expect(carol.address == "carol@example.org" && carol.source == .manual && carol.timesSeen == 0)
        let renamed = try await store.addContact(name: "Carol Smith", address: "carol@EXAMPLE.ORG")
        #expect(renamed.id == carol.id && renamed.name == "Carol Smith")
        let other = try await store.addContact(name: nil, address: "Carol@example.org")
        #expect(other.id != carol.id, "the local part is kept as written")
        #expect(try await store.allContacts().count == 2)
        await #expect(throws: StoreError.self) { try await store.addContact(name: "x", address: "not an address") }
        try await store.deleteContact(carol.id)
        #expect(try await store.allContacts().map(\.id) == [other.id])
        #expect(try await store.contacts(matching: "smith").isEmpty, "its index entries went with it")
        await #expect(throws: StoreError.contactNotFound(carol.id)) { try await store.deleteContact(carol.id) }
    }

    @Test("addresses seen in mail are counted; mail never renames an entry, a person does")
    func noteAddresses() async throws {
        let world = try await StoreWorld()
        let store = world.store
        let early = Date(timeIntervalSince1970: 1_700_000_000)
        let late = Date(timeIntervalSince1970: 1_700_100_000)
        try await store.noteAddresses(
            [
                MailAddress(name: "Dave", address: "dave@example.org"),
                MailAddress(name: nil, address: "dave@EXAMPLE.org"),
                MailAddress(name: nil, address: "undisclosed-recipients"),
            ],
            seenAt: early
        )
        try await store.noteAddresses([MailAddress(name: "Your Bank", address: "dave@example.org")], seenAt: late)
        var dave = try #require(try await store.allContacts().first)
        #expect(try await store.allContacts().count == 1)
        #expect(dave.name == "Dave" && dave.timesSeen == 3 && dave.source == .mail && dave.lastSeen == late)
        dave = try await store.addContact(name: "Dave D.", address: "dave@example.org")
        #expect(dave.name == "Dave D." && dave.source == .manual && dave.timesSeen == 3)
        try await store.noteAddresses([MailAddress(name: "Mallory", address: "dave@example.org")], seenAt: early)
        dave = try #require(try await store.allContacts().first)
        #expect(dave.name == "Dave D." && dave.timesSeen == 4 && dave.lastSeen == late)
    }

    @Test("importing and syncing mail fills the address book from From, To and Cc, in the same transaction")
    func importFills() async throws {
        let world = try await StoreWorld()
        let store = world.store
        _ = try await store.importMessage(
            rawMessage(
                id: "1@x",
                subject: "hello",
                body: "b",
                from: "Bob Builder <bob@Example.org>",
                extraHeaders: "Cc: Carol <carol@example.org>\r\n"
            )
        )
        _ = try await store.importMessage(rawMessage(id: "2@x", subject: "again", body: "c"))
        let contacts = try await store.allContacts()
        let bob = try #require(contacts.first { $0.address == "bob@example.org" })
        // The second message's From is "Bob <bob@example.org>": counted, and the first name stays.
        #expect(bob.name == "Bob Builder" && bob.timesSeen == 2 && bob.source == .mail)
        #expect(contacts.first { $0.address == "bob@example.org" && $0.id != bob.id } == nil)
        #expect(contacts.first { $0.address == "alice@example.org" }?.timesSeen == 2)
        #expect(contacts.contains { $0.address == "carol@example.org" && $0.name == "Carol" })
        // A duplicate is not counted again.
        _ = try await store.importMessage(rawMessage(id: "2@x", subject: "again", body: "c"))
        #expect(try await store.allContacts().first { $0.address == "alice@example.org" }?.timesSeen == 2)

        // A sync stores through the same path: a fetched message counts, a second location of it does not.
        let account = try await store.addAccount(username: "alice", displayName: nil)
        let inbox = try await store.addSyncFolder(accountID: account, name: "INBOX", uidValidity: 1)
        let fetched = rawMessage(id: "3@x", subject: "synced", body: "d", from: "Frank <frank@Example.org>").bytes
        _ = try await store.storeFetchedMail(
            [FetchedMail(uid: 1, bytes: fetched, flags: [], label: "INBOX")],
            folderID: inbox.id
        )
        _ = try await store.storeFetchedMail(
            [FetchedMail(uid: 2, bytes: fetched, flags: [], label: "INBOX")],
            folderID: inbox.id
        )
        let frank = try await store.contacts(matching: "frank")
        #expect(frank.map(\.address) == ["frank@example.org"] && frank.first?.timesSeen == 1)
    }

    @Test("contacts(matching:) finds by a prefix of a word of the name or the address, through the blind index")
    func prefixSearch() async throws {
        let world = try await StoreWorld()
        let store = world.store
        let carol = try await store.addContact(name: "Carol Smith", address: "csmith@example.org")
        let caroline = try await store.addContact(name: "Caroline Ødegård", address: "caroline@firma.no")
        let bob = try await store.addContact(name: "Bob", address: "robert.jones@example.com")
        func ids(_ query: String) async throws -> Set<Int64> {
            Set(try await store.contacts(matching: query).map(\.id))
        }
        #expect(try await ids("car") == [carol.id, caroline.id])
        #expect(try await ids("CAROL") == [carol.id, caroline.id])
        #expect(try await ids("caroli") == [caroline.id])
        #expect(try await ids("smi") == [carol.id])
        #expect(try await ids("csm") == [carol.id])
        #expect(try await ids("ødeg") == [caroline.id])
        #expect(try await ids("jones") == [bob.id])
        #expect(try await ids("exam") == [carol.id, bob.id])
        #expect(try await ids("car exam") == [carol.id])
        #expect(try await ids("robert.jo") == [bob.id])
        #expect(try await ids("mith").isEmpty, "a prefix, not a substring")
        #expect(try await ids("x").isEmpty)
        #expect(try await ids("").isEmpty)
        #expect(try await ids("carolinewithaverylongsurnamepart").isEmpty)

        // Matching opens only the entries the index names: a damaged entry that does not match is never read.
        try await world.rawQueue().write { db in
            try db.execute(sql: "UPDATE addressBook SET record = x'00' WHERE id = ?", arguments: [bob.id])
        }
        #expect(try await ids("car") == [carol.id, caroline.id])
        await #expect(throws: StoreError.corruptRecord(table: "addressBook", id: bob.id)) {
            try await store.allContacts()
        }
        await #expect(throws: StoreError.corruptRecord(table: "addressBook", id: bob.id)) {
            try await store.contacts(matching: "jones")
        }
    }

    @Test("the index holds no word in the clear: its tokens are keyed hashes")
    func indexIsBlind() async throws {
        let world = try await StoreWorld()
        _ = try await world.store.addContact(name: "Zebulon", address: "zeb@example.org")
        let tokens = try await world.rawQueue().read { db in
            try Int64.fetchAll(db, sql: "SELECT token FROM addressBookTokens")
        }
        #expect(tokens.count >= 5)
        let other = try await StoreWorld()
        _ = try await other.store.addContact(name: "Zebulon", address: "zeb@example.org")
        let otherTokens = try await other.rawQueue().read { db in
            try Int64.fetchAll(db, sql: "SELECT token FROM addressBookTokens")
        }
        #expect(Set(tokens).isDisjoint(with: otherTokens), "another MainKey gives unrelated tokens")
    }

    @Test(
        "vCard values are escaped: a hostile name cannot add properties or lines",
        arguments: [
            ("Carol", "FN:Carol\r\n"),
            ("Smith, Carol", "FN:Smith\\, Carol\r\n"),
            ("a;b", "FN:a\\;b\r\n"),
            ("back\\slash", "FN:back\\\\slash\r\n"),
            ("Eve\r\nEMAIL:attacker@evil.example", "FN:Eve\\nEMAIL:attacker@evil.example\r\n"),
            ("Eve\nEND:VCARD\nBEGIN:VCARD", "FN:Eve\\nEND:VCARD\\nBEGIN:VCARD\r\n"),
            ("Eve\rX-EVIL:1", "FN:Eve\\nX-EVIL:1\r\n"),
            ("Eve\u{2028}X-EVIL:1", "FN:Eve\\nX-EVIL:1\r\n"),
            ("Eve\u{0}\u{7}\u{1b}[31m", "FN:Eve[31m\r\n"),
            ("", "FN:carol@example.org\r\n"),
        ]
    )
    func vCardEscaping(name: String, expectedLine: String) {
        let card = MailStore.vCard(for: Contact(id: 1, name: name, address: "carol@example.org"))
        #expect(card.hasPrefix("BEGIN:VCARD\r\nVERSION:4.0\r\n"))
        #expect(card.hasSuffix("EMAIL:carol@example.org\r\nEND:VCARD\r\n"))
        #expect(card.contains(expectedLine))
        // Exactly five content lines, whatever the name: nothing was injected.
        let lines = card.components(separatedBy: "\r\n").filter { !$0.isEmpty }
        #expect(lines.count == 5, "\(lines)")
        let bare = card.replacingOccurrences(of: "\r\n", with: "")
        #expect(!bare.contains("\n") && !bare.contains("\r"))
    }

    @Test("vCard lines are folded at 75 octets without splitting a character, and unfold to the value")
    func vCardFolding() {
        let name = String(repeating: "é", count: 60) + "," + String(repeating: "x", count: 100)
        let card = MailStore.vCard(for: Contact(id: 1, name: name, address: "a@example.org"))
        for line in card.components(separatedBy: "\r\n") { #expect(line.utf8.count <= 75) }
        let unfolded = card.replacingOccurrences(of: "\r\n ", with: "")
        #expect(
            unfolded.contains("FN:" + String(repeating: "é", count: 60) + "\\," + String(repeating: "x", count: 100))
        )
        let both = MailStore.vCard(for: [
            Contact(id: 1, name: "A", address: "a@example.org"), Contact(id: 2, name: "B", address: "b@example.org"),
        ])
        #expect(both.components(separatedBy: "BEGIN:VCARD").count == 3)
    }

    @Test("the address book needs the key: a locked store throws the typed locked error")
    func locked() async throws {
        let world = try await StoreWorld()
        let store = world.store
        let contact = try await store.addContact(name: "A", address: "a@example.org")
        await world.keymaker.lock()
        await #expect(throws: StoreError.locked) { try await store.addContact(name: "B", address: "b@example.org") }
        await #expect(throws: StoreError.locked) { try await store.allContacts() }
        await #expect(throws: StoreError.locked) { try await store.contacts(matching: "a") }
        await #expect(throws: StoreError.locked) { try await store.deleteContact(contact.id) }
        await #expect(throws: StoreError.locked) {
            try await store.noteAddresses([MailAddress(name: nil, address: "c@example.org")])
        }
    }
}
