import GRDB

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A correspondent's OpenPGP certificate as the store keeps it, with the address-book entries it belongs to
/// (migration `v9-contact-keys`).
public struct ContactKeyEntry: Sendable, Equatable {
    /// The row's id.
    public let id: Int64
    /// The primary key's fingerprint, upper-case hex.
    public let fingerprint: String
    /// The key's valid user ids, in the key's order (as their owner wrote them).
    public let userIDs: [String]
    /// The canonical addresses of those user ids (``MailStore/canonicalAddress(_:)``): the contacts it belongs to.
    public let addresses: [String]
    /// The certificate in binary OpenPGP form.
    public let certificate: [UInt8]
    /// When it was added or last replaced, to the second.
    public let created: Date
}

/// Contact key record v1 (`docs/FORMAT.md`, "OpenPGP keys").
enum ContactKeyCoding {
    static let recordVersion = 1

    static func record(fingerprint: String, userIDs: [String], addresses: [String], certificate: [UInt8]) -> [UInt8] {
        let sizes = (userIDs + addresses).reduce(0) { $0 + $1.utf8.count + 5 }
        var writer = CellWriter(capacity: certificate.count + 64 + sizes)
        writer.count(recordVersion)
        writer.string(fingerprint)
        writer.strings(userIDs)
        writer.strings(addresses)
        writer.raw(certificate)
        return writer.bytes
    }

    static func entry(_ plain: [UInt8], id: Int64, created: Int64) throws(CellReader.Malformed) -> ContactKeyEntry {
        var reader = try CellReader(plain)
        guard try reader.count() == recordVersion else { throw CellReader.Malformed() }
        let fingerprint = try reader.requiredString()
        let userIDs = try reader.strings()
        let addresses = try reader.strings()
        let certificate = try reader.raw()
        try reader.finish()
        guard MailStore.canonicalFingerprint(fingerprint) == fingerprint, !certificate.isEmpty, !addresses.isEmpty,
            addresses.allSatisfy({ MailStore.canonicalAddress($0) == $0 })
        else { throw CellReader.Malformed() }
        return ContactKeyEntry(
            id: id,
            fingerprint: fingerprint,
            userIDs: userIDs,
            addresses: addresses,
            certificate: certificate,
            created: Date(timeIntervalSince1970: TimeInterval(created))
        )
    }
}

extension MailStore {
    /// Stores a correspondent's certificate with the address-book entries of `addresses` (each created when the
    /// address book has none, named after the key's user id). A certificate with the same fingerprint is replaced
    /// (an update from its owner: new user ids, a new expiry), its addresses with it.
    ///
    /// - Parameters:
    ///   - fingerprint: The primary key's fingerprint (any case, spaces allowed).
    ///   - userIDs: Its valid user ids.
    ///   - addresses: The addresses of those user ids with the names they give, at least one.
    ///   - certificate: The certificate in binary OpenPGP form.
    ///   - created: When it was added.
    /// - Returns: The stored key.
    /// - Throws: ``StoreError/invalidArgument(_:)`` for a malformed fingerprint, an empty certificate or no address;
    ///   ``StoreError/openPGPKeyExists`` when the fingerprint is one of the user's own keys; ``StoreError/locked``.
    @discardableResult
    public func addContactKey(
        fingerprint: String,
        userIDs: [String],
        addresses: [(name: String?, address: String)],
        certificate: [UInt8],
        created: Date = Date()
    ) async throws(StoreError) -> ContactKeyEntry {
        guard let fingerprint = Self.canonicalFingerprint(fingerprint) else {
            throw .invalidArgument("an OpenPGP fingerprint is 40 or 64 hex digits")
        }
        var unique: [(name: String?, address: String)] = []
        for (name, address) in addresses {
            guard let address = Self.canonicalAddress(address) else {
                throw .invalidArgument("a contact needs an address of the form name@domain")
            }
            if !unique.contains(where: { $0.address == address }) { unique.append((name, address)) }
        }
        let canonical = unique
        guard !certificate.isEmpty, !canonical.isEmpty else {
            throw .invalidArgument("a correspondent's key needs a certificate and an address")
        }
        let keys = try await keys()
        let lookup = Self.fingerprintLookup(fingerprint, keys: keys)
        let seconds = Schema.seconds(created)
        let record = ContactKeyCoding.record(
            fingerprint: fingerprint,
            userIDs: userIDs,
            addresses: canonical.map(\.address),
            certificate: certificate
        )
        return try await write { db in
            guard try Row.fetchOne(db, sql: "SELECT id FROM openPGPKeys WHERE lookup = ?", arguments: [lookup]) == nil
            else { throw StoreError.openPGPKeyExists }
            let existing = try Int64.fetchOne(
                db,
                sql: "SELECT id FROM contactKeys WHERE lookup = ?",
                arguments: [lookup]
            )
            let id = try existing ?? Schema.nextID(db, table: "contactKeys")
            let sealed = try keys.seal(record, .contactKeyRecord, row: id)
            try db.execute(
                sql: "INSERT OR REPLACE INTO contactKeys (id, lookup, created, record) VALUES (?, ?, ?, ?)",
                arguments: [id, lookup, seconds, sealed]
            )
            try db.execute(sql: "DELETE FROM contactKeyAddresses WHERE keyID = ?", arguments: [id])
            for (name, address) in canonical {
                let addressLookup = Self.contactLookup(address, keys: keys)
                let known =
                    try Row.fetchOne(db, sql: "SELECT id FROM addressBook WHERE lookup = ?", arguments: [addressLookup])
                    != nil
                // A new entry is the person's doing (as `contacts --add`); a known one keeps its name and source.
                try Self.upsertContact(
                    Sighting(name: known ? nil : name, count: 0, lastSeen: nil),
                    address: address,
                    source: known ? .mail : .manual,
                    keys: keys,
                    db: db
                )
                try db.execute(
                    sql: "INSERT OR IGNORE INTO contactKeyAddresses (address, keyID) VALUES (?, ?)",
                    arguments: [addressLookup, id]
                )
            }
            return ContactKeyEntry(
                id: id,
                fingerprint: fingerprint,
                userIDs: userIDs,
                addresses: canonical.map(\.address),
                certificate: certificate,
                created: Date(timeIntervalSince1970: TimeInterval(seconds))
            )
        }
    }

    /// Every correspondent's key, oldest first.
    ///
    /// - Throws: ``StoreError/corruptRecord(table:id:)`` for a record that fails to open, ``StoreError/locked``.
    public func contactKeys() async throws(StoreError) -> [ContactKeyEntry] {
        let keys = try await keys()
        let rows = try await read { db in
            try Row.fetchAll(db, sql: "SELECT id, created, record FROM contactKeys ORDER BY created, id").map { row in
                let strict = try StrictRow(row, table: "contactKeys")
                return (strict.id, try strict.int64("created"), try strict.blob("record"))
            }
        }
        return try Self.openContactKeys(rows, keys: keys)
    }

    /// The correspondents' keys of `address` (found through the address's keyed hash, so only their records are
    /// opened), oldest first; none for something that is not an address.
    ///
    /// - Throws: ``StoreError/corruptRecord(table:id:)`` for a record that fails to open or names other addresses
    ///   (a row moved), ``StoreError/locked``.
    public func contactKeys(for address: String) async throws(StoreError) -> [ContactKeyEntry] {
        let keys = try await keys()
        guard let canonical = Self.canonicalAddress(address) else { return [] }
        let addressLookup = Self.contactLookup(canonical, keys: keys)
        let rows = try await read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT k.id, k.created, k.record FROM contactKeys k
                    JOIN contactKeyAddresses a ON a.keyID = k.id WHERE a.address = ? ORDER BY k.created, k.id
                    """,
                arguments: [addressLookup]
            ).map { row in
                let strict = try StrictRow(row, table: "contactKeys")
                return (strict.id, try strict.int64("created"), try strict.blob("record"))
            }
        }
        let entries = try Self.openContactKeys(rows, keys: keys)
        for entry in entries where !entry.addresses.contains(canonical) {
            throw .corruptRecord(table: "contactKeys", id: entry.id)
        }
        return entries
    }

    /// Deletes the correspondent's key with `fingerprint` (the address-book entries stay).
    ///
    /// - Throws: ``StoreError/openPGPKeyNotFound``, ``StoreError/locked``.
    public func deleteContactKey(fingerprint: String) async throws(StoreError) {
        guard let fingerprint = Self.canonicalFingerprint(fingerprint) else { throw .openPGPKeyNotFound }
        let keys = try await keys()
        let lookup = Self.fingerprintLookup(fingerprint, keys: keys)
        try await write { db in
            try db.execute(sql: "DELETE FROM contactKeys WHERE lookup = ?", arguments: [lookup])
            guard db.changesCount > 0 else { throw StoreError.openPGPKeyNotFound }
        }
    }

    /// The `lookup` of an address-book entry (and `address` of `contactKeyAddresses`): the first 16 bytes of
    /// HMAC(lookup key, `0x09` ‖ canonical address).
    static func contactLookup(_ canonical: String, keys: StoreKeys) -> Data {
        Data(keys.lookup.hash(tag: HashTag.contactCanonical, Array(canonical.utf8)).prefix(16))
    }

    private static func openContactKeys(
        _ rows: [(Int64, Int64, Data)],
        keys: StoreKeys
    ) throws(StoreError) -> [ContactKeyEntry] {
        var entries: [ContactKeyEntry] = []
        for (id, created, record) in rows {
            guard
                let entry = keys.decode(
                    record,
                    .contactKeyRecord,
                    row: id,
                    { plain in try ContactKeyCoding.entry(plain, id: id, created: created) }
                )
            else { throw .corruptRecord(table: "contactKeys", id: id) }
            entries.append(entry)
        }
        return entries
    }
}
