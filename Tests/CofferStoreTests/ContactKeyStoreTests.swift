import CofferCrypto
import CofferTesting
import Foundation
import GRDB
import Testing

@testable import CofferStore

/// Correspondents' OpenPGP certificates in the store (migration `v9-contact-keys`): sealed, tied to address-book
/// entries by the keyed hash of their addresses. The table does not parse what it seals, so these tests use marked
/// bytes; ContactKeyCLITests stores real keys from gpg.
@Suite("Correspondents' OpenPGP keys in the store")
struct ContactKeyStoreTests {
    static let gusFingerprint = "AB12CD34EF56AB12CD34EF56AB12CD34EF56AB12"
    static let aliceFingerprint = OpenPGPKeyStoreTests.aliceFingerprint

    @Test("a key is stored with its contacts, found by address, replaced by an update and deleted")
    func roundTrip() async throws {
        let world = try await StoreWorld()
        let store = world.store
        _ = try await store.addContact(name: "Gus (work)", address: "gus@Example.org")
        let gus = try await store.addContactKey(
            fingerprint: Self.gusFingerprint.lowercased(),
            userIDs: ["Gus <gus@example.org>", "Gus <GUS@home.example>"],
            addresses: [("Gus", "gus@EXAMPLE.org"), ("Gus", "GUS@home.example"), ("Gus", "gus@example.org")],
            certificate: [0x99, 1, 2]
        )
        #expect(gus.fingerprint == Self.gusFingerprint)
        #expect(gus.addresses == ["gus@example.org", "GUS@home.example"])
        #expect(try await store.contactKeys() == [gus])
        #expect(try await store.contactKeys(for: "gus@EXAMPLE.ORG") == [gus])
        #expect(try await store.contactKeys(for: "GUS@home.example") == [gus])
        #expect(try await store.contactKeys(for: "other@example.org").isEmpty)
        #expect(try await store.contactKeys(for: "not an address").isEmpty)
        // The known entry keeps its name; the new one is named after the user id, as if added by hand.
        let contacts = try await store.allContacts()
        #expect(contacts.first { $0.address == "gus@example.org" }?.name == "Gus (work)")
        let home = try #require(contacts.first { $0.address == "GUS@home.example" })
        #expect(home.name == "Gus" && home.source == .manual)

        // An update from its owner replaces the certificate and its addresses.
        let updated = try await store.addContactKey(
            fingerprint: Self.gusFingerprint,
            userIDs: ["Gus <gus@example.org>"],
            addresses: [("Gus", "gus@example.org")],
            certificate: [0x99, 3]
        )
        #expect(updated.id == gus.id && updated.certificate == [0x99, 3])
        #expect(try await store.contactKeys().count == 1)
        #expect(try await store.contactKeys(for: "GUS@home.example").isEmpty)

        await #expect(throws: StoreError.self) {
            try await store.addContactKey(fingerprint: "not hex", userIDs: [], addresses: [], certificate: [1])
        }
        await #expect(throws: StoreError.self) {
            try await store.addContactKey(
                fingerprint: Self.gusFingerprint,
                userIDs: [],
                addresses: [],
                certificate: [1]
            )
        }
        try await store.deleteContactKey(fingerprint: Self.gusFingerprint)
        #expect(try await store.contactKeys().isEmpty)
        #expect(try await store.allContacts().count == 2)
        await #expect(throws: StoreError.openPGPKeyNotFound) {
            try await store.deleteContactKey(fingerprint: Self.gusFingerprint)
        }
    }

    @Test("one of the user's own keys is not stored again as a correspondent's")
    func ownKeyIsRefused() async throws {
        let world = try await StoreWorld()
        try await world.store.addOpenPGPKey(
            fingerprint: Self.aliceFingerprint,
            userIDs: ["Alice <alice@example.org>"],
            certificate: [1],
            secretKey: SecretBytes(copying: OpenPGPKeyStoreTests.secretKey())
        )
        await #expect(throws: StoreError.openPGPKeyExists) {
            try await world.store.addContactKey(
                fingerprint: Self.aliceFingerprint,
                userIDs: ["Alice <alice@example.org>"],
                addresses: [(nil, "alice@example.org")],
                certificate: [1]
            )
        }
    }

    @Test("neither the fingerprint, a user id nor an address is in clear in any file; a locked store refuses")
    func sealedAndLocked() async throws {
        let world = try await StoreWorld()
        try await world.store.addContactKey(
            fingerprint: Self.gusFingerprint,
            userIDs: ["CanaryGus <gus.canary@example.org>"],
            addresses: [("CanaryGus", "gus.canary@example.org")],
            certificate: Array("CanaryCertificateBytes".utf8)
        )
        await world.keymaker.lock()
        await #expect(throws: StoreError.locked) { try await world.store.contactKeys() }
        await #expect(throws: StoreError.locked) { try await world.store.contactKeys(for: "gus.canary@example.org") }
        try world.store.close()
        let needles = [
            Array(Self.gusFingerprint.utf8), Array(Self.gusFingerprint.lowercased().utf8), Array("gus.canary".utf8),
            Array("CanaryGus".utf8), Array("CanaryCertificate".utf8),
        ]
        #expect(CanaryScanner.occurrences(of: needles, under: ["\(world.root.path)/store"]).isEmpty)
    }

    @Test("a record moved to another address's row does not pass for that address's key")
    func movedRecordIsRefused() async throws {
        let world = try await StoreWorld()
        let store = world.store
        let gus = try await store.addContactKey(
            fingerprint: Self.gusFingerprint,
            userIDs: ["Gus <gus@example.org>"],
            addresses: [(nil, "gus@example.org")],
            certificate: [1]
        )
        let mallory = try await store.addContactKey(
            fingerprint: OpenPGPKeyStoreTests.bobFingerprint,
            userIDs: ["Mallory <mallory@example.org>"],
            addresses: [(nil, "mallory@example.org")],
            certificate: [2]
        )
        // Mallory's key tied to Gus's address in clear: the record names its own addresses, so it is refused.
        try await world.rawQueue().write { db in
            try db.execute(
                sql: "UPDATE contactKeyAddresses SET keyID = ? WHERE keyID = ?",
                arguments: [mallory.id, gus.id]
            )
        }
        await #expect(throws: StoreError.corruptRecord(table: "contactKeys", id: mallory.id)) {
            try await store.contactKeys(for: "gus@example.org")
        }
    }
}
