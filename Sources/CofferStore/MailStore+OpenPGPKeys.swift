import CofferCrypto
import CofferKeymaker
import GRDB

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One of the user's own OpenPGP keys as the store lists it: everything but the secret key.
public struct OpenPGPKeyEntry: Sendable, Equatable {
    /// The row's id.
    public let id: Int64
    /// The primary key's fingerprint, upper-case hex.
    public let fingerprint: String
    /// The key's valid user ids, in the key's order.
    public let userIDs: [String]
    /// The certificate (transferable public key) in binary OpenPGP form.
    public let certificate: [UInt8]
    /// When the key was added (generated or imported), to the second.
    public let created: Date
    /// Whether this is the key used when none is named.
    public let isDefault: Bool
}

/// OpenPGP key record v1 and OpenPGP secret key record v1 (`docs/FORMAT.md`, "OpenPGP keys").
enum OpenPGPKeyCoding {
    static let recordVersion = 1

    static func record(fingerprint: String, userIDs: [String], certificate: [UInt8]) -> [UInt8] {
        var writer = CellWriter(capacity: certificate.count + 64 + userIDs.reduce(0) { $0 + $1.utf8.count + 5 })
        writer.count(recordVersion)
        writer.string(fingerprint)
        writer.strings(userIDs)
        writer.raw(certificate)
        return writer.bytes
    }

    static func entry(
        _ plain: [UInt8],
        id: Int64,
        created: Int64,
        isDefault: Bool
    ) throws(CellReader.Malformed)
        -> OpenPGPKeyEntry
    {
        var reader = try CellReader(plain)
        guard try reader.count() == recordVersion else { throw CellReader.Malformed() }
        let fingerprint = try reader.requiredString()
        let userIDs = try reader.strings()
        let certificate = try reader.raw()
        try reader.finish()
        guard MailStore.canonicalFingerprint(fingerprint) == fingerprint, !certificate.isEmpty else {
            throw CellReader.Malformed()
        }
        return OpenPGPKeyEntry(
            id: id,
            fingerprint: fingerprint,
            userIDs: userIDs,
            certificate: certificate,
            created: Date(timeIntervalSince1970: TimeInterval(created)),
            isDefault: isDefault
        )
    }

    /// The secret key record's plaintext; the caller zeroes it once sealed. The writer's own buffer is zeroed here.
    static func secretRecord(fingerprint: String, secretKey: SecretBytes) -> [UInt8] {
        // Room for everything up front, so the buffer never grows and leaves a copy of the key behind.
        var writer = CellWriter(capacity: secretKey.count + fingerprint.utf8.count + 32)
        writer.count(recordVersion)
        writer.string(fingerprint)
        secretKey.withUnsafeBytes { writer.raw($0) }
        defer { writer.wipe() }
        return writer.bytes
    }

    /// The secret key of a secret key record, checked against the fingerprint of its row.
    static func secretKey(_ plain: [UInt8], fingerprint: String) throws(CellReader.Malformed) -> SecretBytes {
        var reader = try CellReader(plain)
        guard try reader.count() == recordVersion, try reader.requiredString() == fingerprint else {
            throw CellReader.Malformed()
        }
        var key = try reader.raw()
        defer { StoreKeys.zero(&key) }
        try reader.finish()
        guard !key.isEmpty else { throw CellReader.Malformed() }
        return SecretBytes(copying: key)
    }
}

extension MailStore {
    /// The canonical form of a fingerprint: spaces removed, hex digits upper-cased; `nil` unless it is 40 (v4) or 64
    /// (v5, v6) hex digits.
    public static func canonicalFingerprint(_ text: String) -> String? {
        let digits = text.filter { $0 != " " }.uppercased()
        guard digits.count == 40 || digits.count == 64, digits.allSatisfy({ $0.isHexDigit && $0.isASCII }) else {
            return nil
        }
        return digits
    }

    /// Stores one of the user's OpenPGP keys: its public data in one sealed record, its secret key (unprotected: the
    /// MainKey protects it) in another, found later by a keyed hash of the fingerprint. The first key stored becomes
    /// the default.
    ///
    /// - Parameters:
    ///   - fingerprint: The primary key's fingerprint (any case, spaces allowed).
    ///   - userIDs: Its valid user ids.
    ///   - certificate: The certificate in binary OpenPGP form.
    ///   - secretKey: The unprotected secret key in binary OpenPGP form.
    ///   - created: When it was added.
    /// - Returns: The stored key as ``openPGPKeys()`` lists it.
    /// - Throws: ``StoreError/openPGPKeyExists`` when a key with this fingerprint is stored,
    ///   ``StoreError/invalidArgument(_:)`` for a malformed fingerprint or empty key, ``StoreError/locked``.
    /// - Warning: The plaintext of the secret key is copied into a cell buffer while it is sealed; that buffer is
    ///   zeroed, but copies the caller made are the caller's to wipe.
    @discardableResult
    public func addOpenPGPKey(
        fingerprint: String,
        userIDs: [String],
        certificate: [UInt8],
        secretKey: SecretBytes,
        created: Date = Date()
    ) async throws(StoreError) -> OpenPGPKeyEntry {
        guard let fingerprint = Self.canonicalFingerprint(fingerprint) else {
            throw .invalidArgument("an OpenPGP fingerprint is 40 or 64 hex digits")
        }
        guard !certificate.isEmpty, secretKey.count > 0 else { throw .invalidArgument("the OpenPGP key is empty") }
        let keys = try await keys()
        let lookup = Self.fingerprintLookup(fingerprint, keys: keys)
        let seconds = Schema.seconds(created)
        let record = OpenPGPKeyCoding.record(fingerprint: fingerprint, userIDs: userIDs, certificate: certificate)
        return try await write { db in
            guard try Row.fetchOne(db, sql: "SELECT id FROM openPGPKeys WHERE lookup = ?", arguments: [lookup]) == nil
            else { throw StoreError.openPGPKeyExists }
            let hasDefault = try Row.fetchOne(db, sql: "SELECT id FROM openPGPKeys WHERE isDefault = 1") != nil
            let id = try Schema.nextID(db, table: "openPGPKeys")
            var secret = OpenPGPKeyCoding.secretRecord(fingerprint: fingerprint, secretKey: secretKey)
            defer { StoreKeys.zero(&secret) }
            let sealedSecret = try keys.seal(secret, .openPGPSecretKey, row: id)
            let sealedRecord = try keys.seal(record, .openPGPKeyRecord, row: id)
            try db.execute(
                sql: """
                    INSERT INTO openPGPKeys (id, lookup, created, isDefault, record, secretKey)
                    VALUES (?, ?, ?, ?, ?, ?)
                    """,
                arguments: [id, lookup, seconds, hasDefault ? 0 : 1, sealedRecord, sealedSecret]
            )
            return OpenPGPKeyEntry(
                id: id,
                fingerprint: fingerprint,
                userIDs: userIDs,
                certificate: certificate,
                created: Date(timeIntervalSince1970: TimeInterval(seconds)),
                isDefault: !hasDefault
            )
        }
    }

    /// The user's OpenPGP keys, oldest first, without their secret keys (no secret key cell is opened).
    ///
    /// - Throws: ``StoreError/corruptRecord(table:id:)`` for a record that fails to open, ``StoreError/locked``.
    public func openPGPKeys() async throws(StoreError) -> [OpenPGPKeyEntry] {
        let keys = try await keys()
        let rows = try await read { db in
            try Row.fetchAll(
                db,
                sql: "SELECT id, created, isDefault, record FROM openPGPKeys ORDER BY created, id"
            ).map { row in
                let strict = try StrictRow(row, table: "openPGPKeys")
                return (
                    strict.id, try strict.int64("created"), try strict.int64("isDefault"), try strict.blob("record")
                )
            }
        }
        var entries: [OpenPGPKeyEntry] = []
        for (id, created, isDefault, record) in rows {
            guard
                let entry = keys.decode(
                    record,
                    .openPGPKeyRecord,
                    row: id,
                    { plain in try OpenPGPKeyCoding.entry(plain, id: id, created: created, isDefault: isDefault == 1) }
                )
            else { throw .corruptRecord(table: "openPGPKeys", id: id) }
            entries.append(entry)
        }
        return entries
    }

    /// The unprotected secret key of the user's key with `fingerprint`, in locked memory that is zeroed when released.
    ///
    /// - Throws: ``StoreError/openPGPKeyNotFound``, ``StoreError/corruptRecord(table:id:)`` when its cell fails to open
    ///   or belongs to another key, ``StoreError/locked`` (also inside a job on a key granted while the account is
    ///   locked, ``KeyGrant``: background work while locked never opens a secret key).
    /// - Warning: This is the secret key itself: hand it to `CofferOpenPGP` and let it go.
    public func openPGPSecretKey(fingerprint: String) async throws(StoreError) -> SecretBytes {
        guard !KeyGrant.isActive else { throw .locked }
        guard let fingerprint = Self.canonicalFingerprint(fingerprint) else { throw .openPGPKeyNotFound }
        let keys = try await keys()
        let lookup = Self.fingerprintLookup(fingerprint, keys: keys)
        let found = try await read { db in
            try Row.fetchOne(db, sql: "SELECT id, secretKey FROM openPGPKeys WHERE lookup = ?", arguments: [lookup])
                .map { row in
                    let strict = try StrictRow(row, table: "openPGPKeys")
                    return (strict.id, try strict.blob("secretKey"))
                }
        }
        guard let (id, sealed) = found else { throw .openPGPKeyNotFound }
        guard var plain = keys.open(sealed, .openPGPSecretKey, row: id) else {
            throw .corruptRecord(table: "openPGPKeys", id: id)
        }
        defer { StoreKeys.zero(&plain) }
        do {
            return try OpenPGPKeyCoding.secretKey(plain, fingerprint: fingerprint)
        } catch {
            throw .corruptRecord(table: "openPGPKeys", id: id)
        }
    }

    /// Deletes the user's key with `fingerprint`, its secret key with it (the freed pages are overwritten:
    /// `secure_delete`). When it was the default, the oldest key left becomes the default.
    ///
    /// - Throws: ``StoreError/openPGPKeyNotFound``, ``StoreError/locked``.
    public func deleteOpenPGPKey(fingerprint: String) async throws(StoreError) {
        guard let fingerprint = Self.canonicalFingerprint(fingerprint) else { throw .openPGPKeyNotFound }
        let keys = try await keys()
        let lookup = Self.fingerprintLookup(fingerprint, keys: keys)
        try await write { db in
            try db.execute(sql: "DELETE FROM openPGPKeys WHERE lookup = ?", arguments: [lookup])
            guard db.changesCount > 0 else { throw StoreError.openPGPKeyNotFound }
            guard try Row.fetchOne(db, sql: "SELECT id FROM openPGPKeys WHERE isDefault = 1") == nil else { return }
            try db.execute(
                sql: """
                    UPDATE openPGPKeys SET isDefault = 1
                    WHERE id = (SELECT id FROM openPGPKeys ORDER BY created, id LIMIT 1)
                    """
            )
        }
    }

    /// The `lookup` column of a key: the first 16 bytes of HMAC(lookup key, `0x0A` ‖ fingerprint).
    static func fingerprintLookup(_ fingerprint: String, keys: StoreKeys) -> Data {
        Data(keys.lookup.hash(tag: HashTag.openPGPFingerprint, Array(fingerprint.utf8)).prefix(16))
    }
}
