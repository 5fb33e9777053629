import CofferBlocking
import CofferMIME
import CofferOpenPGP
import GRDB

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What Autocrypt Level 1 knows of one correspondent address, from the mail received from it (migration
/// `v10-autocrypt-peers`): the key is opportunistic, unauthenticated (anyone who can write a message from that
/// address can set it), and a key the user imported for the address wins over it.
public struct AutocryptPeer: Sendable, Equatable {
    /// The address, lower-cased.
    public let address: String
    /// The effective date of the newest message seen from the address (with or without a header).
    public let lastSeen: Date
    /// The effective date of the newest message with a valid `Autocrypt` header, `nil` before the first.
    public let autocryptTimestamp: Date?
    /// The header's `prefer-encrypt=mutual`.
    public let preferEncryptMutual: Bool
    /// The certificate's primary fingerprint (upper-case hex), `nil` when no header was taken yet.
    public let fingerprint: String?
    /// The certificate from the header, in binary form (empty when none).
    public let certificate: [UInt8]

    /// Autocrypt Level 1's "stale" key: the last header is more than 35 days older than the last message seen (the
    /// peer wrote since from a program without Autocrypt), so encryption is discouraged.
    public var isStale: Bool {
        guard let autocryptTimestamp else { return true }
        return lastSeen.timeIntervalSince(autocryptTimestamp) > 35 * 86_400
    }
}

/// What the store found of Autocrypt on a received message, before it is written: the sender, the message's
/// effective date, and the one valid header (cleared if RNP does not accept its key).
struct AutocryptSighting: Sendable {
    /// The From address, lower-cased.
    var address: String
    /// `min(Date, now)`, in seconds.
    var effectiveDate: Int64
    var header: AutocryptHeader?
    /// The certificate as RNP exported it, and its fingerprint, once checked.
    var certificate: [UInt8]?
    var fingerprint: String?
}

/// Autocrypt peer record v1 (`docs/FORMAT.md`, "Autocrypt peer record").
enum AutocryptPeerCoding {
    static let recordVersion = 1

    static func record(_ peer: AutocryptPeer) -> [UInt8] {
        var writer = CellWriter(capacity: peer.certificate.count + 128)
        writer.count(recordVersion)
        writer.string(peer.address)
        writer.int64(Schema.seconds(peer.lastSeen))
        writer.flag(peer.autocryptTimestamp != nil)
        writer.int64(peer.autocryptTimestamp.map(Schema.seconds) ?? 0)
        writer.flag(peer.preferEncryptMutual)
        writer.string(peer.fingerprint)
        writer.raw(peer.certificate)
        return writer.bytes
    }

    static func peer(_ plain: [UInt8]) throws(CellReader.Malformed) -> AutocryptPeer {
        var reader = try CellReader(plain)
        guard try reader.count() == recordVersion else { throw CellReader.Malformed() }
        let address = try reader.requiredString()
        let lastSeen = try reader.int64()
        let hasTimestamp = try reader.flag()
        let timestamp = try reader.int64()
        let mutual = try reader.flag()
        let fingerprint = try reader.string()
        let certificate = try reader.raw()
        try reader.finish()
        guard MailStore.autocryptAddress(address) == address, hasTimestamp == (fingerprint != nil),
            hasTimestamp == !certificate.isEmpty
        else { throw CellReader.Malformed() }
        return AutocryptPeer(
            address: address,
            lastSeen: Date(timeIntervalSince1970: TimeInterval(lastSeen)),
            autocryptTimestamp: hasTimestamp ? Date(timeIntervalSince1970: TimeInterval(timestamp)) : nil,
            preferEncryptMutual: mutual,
            fingerprint: fingerprint,
            certificate: certificate
        )
    }
}

extension MailStore {
    /// The name of the sealed setting that holds the user's own `prefer-encrypt` (a flag: `true` is `mutual`).
    static let autocryptPreferEncryptSetting = "autocryptPreferEncryptMutual"

    /// An address as Autocrypt compares it: ``canonicalAddress(_:)``, lower-cased whole.
    public static func autocryptAddress(_ address: String) -> String? {
        canonicalAddress(address)?.lowercased()
    }

    /// The user's Autocrypt `prefer-encrypt` for this account: `true` for `mutual`, `false` for `nopreference` (the
    /// default, and what a missing or damaged value reads as).
    public func autocryptPreferEncryptMutual() async throws(StoreError) -> Bool {
        let keys = try await keys()
        let name = Self.autocryptPreferEncryptSetting
        let sealed = try await read { db in
            try Data.fetchOne(db, sql: "SELECT value FROM settings WHERE name = ?", arguments: [name])
        }
        return Self.flag(keys.open(sealed, .settingValue, row: 0, extra: name)) ?? false
    }

    /// Sets the user's Autocrypt `prefer-encrypt` (sealed, bound to its name).
    public func setAutocryptPreferEncrypt(mutual: Bool) async throws(StoreError) {
        let keys = try await keys()
        try await write { db in
            try Self.writeSetting(Self.autocryptPreferEncryptSetting, mutual, keys: keys, db: db)
        }
    }

    /// The Autocrypt peer state of `address`, or `nil` when none is kept.
    ///
    /// - Throws: ``StoreError/corruptRecord(table:id:)`` for a record that fails to open or names another address
    ///   (a row moved), ``StoreError/locked``.
    public func autocryptPeer(for address: String) async throws(StoreError) -> AutocryptPeer? {
        guard let canonical = Self.autocryptAddress(address) else { return nil }
        let keys = try await keys()
        let lookup = Self.contactLookup(canonical, keys: keys)
        let row = try await read { db in
            try Row.fetchOne(db, sql: "SELECT id, record FROM autocryptPeers WHERE lookup = ?", arguments: [lookup])
                .map { row in
                    let strict = try StrictRow(row, table: "autocryptPeers")
                    return (strict.id, try strict.blob("record"))
                }
        }
        guard let (id, record) = row else { return nil }
        guard let peer = keys.decode(record, .autocryptPeerRecord, row: id, AutocryptPeerCoding.peer),
            peer.address == canonical
        else { throw .corruptRecord(table: "autocryptPeers", id: id) }
        return peer
    }

    /// What Autocrypt Level 1 reads of a parsed received message: the one From address and the message's effective
    /// date (`time`, its Date or else now, capped at `now`), with the one valid `Autocrypt` header for
    /// that address (``AutocryptHeader/find(in:)``). `nil` for a message with no or several From addresses and for
    /// a `multipart/report` (a bounce or automatic reply), which Level 1 leaves out of the peer state.
    static func autocryptSighting(_ message: MIMEMessage, time: Int64, now: Int64) -> AutocryptSighting? {
        let from = message.from
        guard from.count == 1, let address = autocryptAddress(from[0].address),
            message.root.contentType.mimeType != "multipart/report"
        else { return nil }
        return AutocryptSighting(
            address: address,
            effectiveDate: min(time, now),
            header: AutocryptHeader.find(in: message, from: from)
        )
    }

    /// Checks each prepared message's Autocrypt key with RNP (on the ``BlockingPool``, standard error silenced): one
    /// certificate that can be encrypted to and is not one of the user's own keys; otherwise the header is dropped
    /// and the message counts as one without it. Nothing here fails an import.
    func checkAutocrypt(_ prepared: [Result<PreparedMessage, MIMEError>]) async -> [Result<PreparedMessage, MIMEError>]
    {
        let waiting = prepared.indices.filter { index in
            if case .success(let message) = prepared[index], message.autocrypt?.header != nil { return true }
            return false
        }
        guard !waiting.isEmpty else { return prepared }
        let own = Set(((try? await openPGPKeys()) ?? []).map(\.fingerprint))
        var result = prepared
        for index in waiting {
            guard case .success(var message) = prepared[index], var sighting = message.autocrypt,
                let header = sighting.header
            else { continue }
            let keyData = header.keyData
            let checked = await RNPDiagnostics.run { () -> OpenPGPPublicKey? in
                try? OpenPGPPublicKey(bytes: keyData)
            }
            if let checked, checked.canEncrypt, !own.contains(checked.fingerprint) {
                sighting.certificate = checked.bytes
                sighting.fingerprint = checked.fingerprint
            } else {
                sighting.header = nil
            }
            message.autocrypt = sighting
            result[index] = .success(message)
        }
        return result
    }

    /// Autocrypt Level 1's peer state update for each message, in order, inside the import's transaction: a message
    /// older than the stored Autocrypt timestamp changes nothing; a newer one moves `last_seen`; one with a checked
    /// header sets the Autocrypt timestamp, key and prefer-encrypt. A message without a header from an address with
    /// no state stores nothing (there is no key to keep).
    static func updateAutocryptPeers(
        _ prepared: [Result<PreparedMessage, MIMEError>],
        keys: StoreKeys,
        db: Database
    ) throws {
        for case .success(let message) in prepared {
            guard let sighting = message.autocrypt else { continue }
            let lookup = contactLookup(sighting.address, keys: keys)
            let existing = try Row.fetchOne(
                db,
                sql: "SELECT id, record FROM autocryptPeers WHERE lookup = ?",
                arguments: [lookup]
            )
            var id: Int64?
            var peer: AutocryptPeer?
            if let existing {
                let strict = try StrictRow(existing, table: "autocryptPeers")
                id = strict.id
                // A record that fails to open is replaced by what this message says.
                peer = keys.decode(
                    try strict.blob("record"),
                    .autocryptPeerRecord,
                    row: strict.id,
                    AutocryptPeerCoding.peer
                )
                if peer?.address != sighting.address { peer = nil }
            }
            let effective = Date(timeIntervalSince1970: TimeInterval(sighting.effectiveDate))
            if let timestamp = peer?.autocryptTimestamp, effective < timestamp { continue }
            let header = sighting.header.flatMap { header in
                sighting.certificate.map { (header, $0, sighting.fingerprint) }
            }
            guard peer != nil || header != nil else { continue }
            let lastSeen = max(peer?.lastSeen ?? effective, effective)
            let updated: AutocryptPeer? =
                if let (header, certificate, fingerprint) = header {
                    AutocryptPeer(
                        address: sighting.address,
                        lastSeen: lastSeen,
                        autocryptTimestamp: effective,
                        preferEncryptMutual: header.preferEncryptMutual,
                        fingerprint: fingerprint,
                        certificate: certificate
                    )
                } else if let peer {
                    AutocryptPeer(
                        address: peer.address,
                        lastSeen: lastSeen,
                        autocryptTimestamp: peer.autocryptTimestamp,
                        preferEncryptMutual: peer.preferEncryptMutual,
                        fingerprint: peer.fingerprint,
                        certificate: peer.certificate
                    )
                } else {
                    nil
                }
            guard let updated, updated != peer else { continue }
            let rowID = try id ?? Schema.nextID(db, table: "autocryptPeers")
            let sealed = try keys.seal(AutocryptPeerCoding.record(updated), .autocryptPeerRecord, row: rowID)
            try db.execute(
                sql: "INSERT OR REPLACE INTO autocryptPeers (id, lookup, record) VALUES (?, ?, ?)",
                arguments: [rowID, lookup, sealed]
            )
        }
    }
}
