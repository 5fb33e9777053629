import CofferCrypto
import CofferTesting
import Foundation
import GRDB
import Testing

@testable import CofferStore

/// The user's OpenPGP keys in the store (migration `v7-openpgp-keys`): sealed secret keys found by a keyed hash of
/// their fingerprint. The key table does not parse what it seals, so these tests use marked bytes; the CLI tests and
/// OpenPGPMailTests store real keys.
@Suite("OpenPGP keys in the store")
struct OpenPGPKeyStoreTests {
    static let aliceFingerprint = "178CA1FF1F048BEC0159D47A07CCBF3022A59470"
    static let bobFingerprint = "0123456789ABCDEF0123456789ABCDEF01234567"
    static let secretCanary = Array("CanaryOpenPGPSecretKeyMaterial-7f3a".utf8)
    static let userIDCanary = "CanaryUserID Alice <alice.canary@example.org>"

    /// Secret key bytes with the canary in the middle, `size` bytes in all.
    static func secretKey(size: Int = 600, seed: UInt8 = 1) -> [UInt8] {
        var bytes = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed)) }
        bytes.replaceSubrange(100..<100 + secretCanary.count, with: secretCanary)
        return bytes
    }

    @Test("keys are added, listed oldest first with the first as default, read back, and deleted")
    func roundTrip() async throws {
        let world = try await StoreWorld()
        let store = world.store
        #expect(try await store.openPGPKeys().isEmpty)
        let aliceSecret = Self.secretKey()
        let alice = try await store.addOpenPGPKey(
            fingerprint: Self.aliceFingerprint.lowercased(),
            userIDs: ["Alice <alice@example.org>", "Alice W. <aw@example.net>"],
            certificate: [0x99, 1, 2, 3],
            secretKey: SecretBytes(copying: aliceSecret),
            created: Date(timeIntervalSince1970: 1_700_000_000)
        )
        #expect(alice.fingerprint == Self.aliceFingerprint && alice.isDefault)
        let bob = try await store.addOpenPGPKey(
            fingerprint: "0123 4567 89ab cdef 0123  4567 89AB CDEF 0123 4567",
            userIDs: [],
            certificate: [0x99, 4],
            secretKey: SecretBytes(copying: Self.secretKey(seed: 2)),
            created: Date(timeIntervalSince1970: 1_700_000_100)
        )
        #expect(bob.fingerprint == Self.bobFingerprint && !bob.isDefault)

        let listed = try await store.openPGPKeys()
        #expect(listed == [alice, bob])
        #expect(listed[0].userIDs == ["Alice <alice@example.org>", "Alice W. <aw@example.net>"])
        #expect(listed[0].certificate == [0x99, 1, 2, 3])
        #expect(listed[0].created == Date(timeIntervalSince1970: 1_700_000_000))

        let secret = try await store.openPGPSecretKey(fingerprint: Self.aliceFingerprint)
        #expect(secret.withUnsafeBytes { Array($0) } == aliceSecret)
        #expect("\(secret)" == "SecretBytes(<redacted>)")

        await #expect(throws: StoreError.openPGPKeyExists) {
            try await store.addOpenPGPKey(
                fingerprint: Self.aliceFingerprint,
                userIDs: [],
                certificate: [1],
                secretKey: SecretBytes(copying: [1])
            )
        }
        await #expect(throws: StoreError.self) {
            try await store.addOpenPGPKey(
                fingerprint: "not hex",
                userIDs: [],
                certificate: [1],
                secretKey: SecretBytes(copying: [1])
            )
        }

        // Deleting the default makes the oldest key left the default.
        try await store.deleteOpenPGPKey(fingerprint: Self.aliceFingerprint)
        #expect(try await store.openPGPKeys().map(\.fingerprint) == [Self.bobFingerprint])
        #expect(try await store.openPGPKeys().first?.isDefault == true)
        await #expect(throws: StoreError.openPGPKeyNotFound) {
            try await store.openPGPSecretKey(fingerprint: Self.aliceFingerprint)
        }
        await #expect(throws: StoreError.openPGPKeyNotFound) {
            try await store.deleteOpenPGPKey(fingerprint: Self.aliceFingerprint)
        }
    }

    @Test("neither the secret key, the fingerprint nor a user id is in clear in any file of the store")
    func canary() async throws {
        let world = try await StoreWorld()
        try await world.store.addOpenPGPKey(
            fingerprint: Self.aliceFingerprint,
            userIDs: [Self.userIDCanary],
            certificate: Array("certificate".utf8),
            secretKey: SecretBytes(copying: Self.secretKey())
        )
        // The same bytes are found when they are written in clear (the scan can fail).
        let clear = TemporaryDirectory(prefix: "coffer-openpgp-canary-control")
        try Data(Self.secretKey()).write(to: URL(fileURLWithPath: "\(clear.path)/plain"))
        #expect(!CanaryScanner.occurrences(of: [Self.secretCanary], under: [clear.path]).isEmpty)

        try world.store.close()
        let needles = [
            Self.secretCanary, Array(Self.aliceFingerprint.utf8), Array(Self.aliceFingerprint.lowercased().utf8),
            Array("alice.canary".utf8), Array("CanaryUserID".utf8),
        ]
        #expect(CanaryScanner.occurrences(of: needles, under: ["\(world.root.path)/store"]).isEmpty)
    }

    @Test("a locked store refuses to add, list, read or delete a key")
    func lockedStoreRefuses() async throws {
        let world = try await StoreWorld()
        let store = world.store
        try await store.addOpenPGPKey(
            fingerprint: Self.aliceFingerprint,
            userIDs: ["Alice <alice@example.org>"],
            certificate: [1],
            secretKey: SecretBytes(copying: Self.secretKey())
        )
        await world.keymaker.lock()
        await #expect(throws: StoreError.locked) { try await store.openPGPKeys() }
        await #expect(throws: StoreError.locked) {
            try await store.openPGPSecretKey(fingerprint: Self.aliceFingerprint)
        }
        await #expect(throws: StoreError.locked) {
            try await store.deleteOpenPGPKey(fingerprint: Self.aliceFingerprint)
        }
        await #expect(throws: StoreError.locked) {
            try await store.addOpenPGPKey(
                fingerprint: Self.bobFingerprint,
                userIDs: [],
                certificate: [1],
                secretKey: SecretBytes(copying: [1])
            )
        }
    }

    @Test("a secret key cell moved to another row, or changed, does not open: the row is reported damaged")
    func movedOrChangedSecretKeyIsRefused() async throws {
        let world = try await StoreWorld()
        let store = world.store
        let alice = try await store.addOpenPGPKey(
            fingerprint: Self.aliceFingerprint,
            userIDs: [],
            certificate: [1],
            secretKey: SecretBytes(copying: Self.secretKey())
        )
        let bob = try await store.addOpenPGPKey(
            fingerprint: Self.bobFingerprint,
            userIDs: [],
            certificate: [2],
            secretKey: SecretBytes(copying: Self.secretKey(seed: 9))
        )
        let queue = try world.rawQueue()
        try await queue.write { db in
            try db.execute(
                sql: "UPDATE openPGPKeys SET secretKey = (SELECT secretKey FROM openPGPKeys WHERE id = ?) WHERE id = ?",
                arguments: [alice.id, bob.id]
            )
        }
        await #expect(throws: StoreError.corruptRecord(table: "openPGPKeys", id: bob.id)) {
            try await store.openPGPSecretKey(fingerprint: Self.bobFingerprint)
        }
        // Swapping the lookups too does not help: the secret key record names its own fingerprint.
        try await queue.write { db in
            try db.execute(sql: "UPDATE openPGPKeys SET lookup = X'00' WHERE id = ?", arguments: [alice.id])
            let bobLookup = try Data.fetchOne(
                db,
                sql: "SELECT lookup FROM openPGPKeys WHERE id = ?",
                arguments: [bob.id]
            )
            try db.execute(sql: "UPDATE openPGPKeys SET lookup = X'01' WHERE id = ?", arguments: [bob.id])
            try db.execute(sql: "UPDATE openPGPKeys SET lookup = ? WHERE id = ?", arguments: [bobLookup, alice.id])
        }
        await #expect(throws: StoreError.corruptRecord(table: "openPGPKeys", id: alice.id)) {
            try await store.openPGPSecretKey(fingerprint: Self.bobFingerprint)
        }
        // A changed byte of a cell.
        try await queue.write { db in
            try db.execute(
                sql:
                    "UPDATE openPGPKeys SET record = substr(record, 1, 20) || X'FF' || substr(record, 22) WHERE id = ?",
                arguments: [bob.id]
            )
        }
        await #expect(throws: StoreError.self) { try await store.openPGPKeys() }
    }
}
