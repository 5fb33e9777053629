import CofferMIME
import GRDB

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Contact record v1 (`docs/FORMAT.md`, "Drafts, contacts and the outbox").
enum ContactCoding {
    static let recordVersion = 1

    static func record(_ contact: Contact) -> [UInt8] {
        var writer = CellWriter(capacity: 96)
        writer.count(recordVersion)
        writer.string(contact.name)
        writer.string(contact.address)
        writer.int64(contact.timesSeen)
        writer.flag(contact.lastSeen != nil)
        writer.int64(contact.lastSeen.map(Schema.seconds) ?? 0)
        writer.count(contact.source.rawValue)
        return writer.bytes
    }

    static func contact(_ plain: [UInt8], id: Int64) throws(CellReader.Malformed) -> Contact {
        var reader = try CellReader(plain)
        guard try reader.count() == recordVersion else { throw CellReader.Malformed() }
        let name = try reader.string()
        let address = try reader.requiredString()
        let timesSeen = try reader.int64()
        let hasLastSeen = try reader.flag()
        let lastSeen = try reader.int64()
        guard timesSeen >= 0, hasLastSeen || lastSeen == 0,
            let source = ContactSource(rawValue: try reader.count())
        else { throw CellReader.Malformed() }
        try reader.finish()
        return Contact(
            id: id,
            name: name,
            address: address,
            timesSeen: timesSeen,
            lastSeen: hasLastSeen ? Date(timeIntervalSince1970: TimeInterval(lastSeen)) : nil,
            source: source
        )
    }
}

extension MailStore {
    /// The longest address the address book keeps (RFC 5321's path limit); longer ones from mail are skipped.
    public static let maximumContactAddressBytes = 320
    /// Word prefixes indexed per word of a name or address: prefixes of 2 to this many characters.
    static let contactPrefixCharacters = 24
    /// Index entries per address-book entry, at most.
    static let maximumContactTokens = 256

    // MARK: - Canonical form

    /// The canonical form of an address, by which the address book finds an entry: surrounding whitespace removed
    /// and the domain (after the last `@`) lower-cased; the local part is kept as written (RFC 5321 lets a server
    /// tell `Bob` from `bob`). `nil` for something that is not an address: no `@`, an empty part, a control
    /// character or space, or more than ``maximumContactAddressBytes`` bytes.
    public static func canonicalAddress(_ address: String) -> String? {
        let trimmed = address.trimmingCharacters(in: .whitespaces)
        guard let at = trimmed.lastIndex(of: "@"), trimmed.utf8.count <= maximumContactAddressBytes else { return nil }
        let local = trimmed[..<at]
        let domain = trimmed[trimmed.index(after: at)...]
        guard !local.isEmpty, !domain.isEmpty,
            !trimmed.unicodeScalars.contains(where: {
                $0.value <= 0x20 || $0.value == 0x7F || (0x80...0x9F).contains($0.value)
            })
        else { return nil }
        return String(local) + "@" + domain.lowercased()
    }

    // MARK: - Address book

    /// Adds an entry by hand, or updates the entry with the same canonical address: the name given replaces a
    /// name taken from mail, and the entry counts as ``ContactSource/manual`` from then on.
    ///
    /// - Returns: The entry.
    /// - Throws: ``StoreError/invalidArgument(_:)`` when `address` is not an address (``canonicalAddress(_:)``).
    @discardableResult
    public func addContact(name: String?, address: String) async throws(StoreError) -> Contact {
        guard let canonical = Self.canonicalAddress(address) else {
            throw .invalidArgument("a contact needs an address of the form name@domain")
        }
        let keys = try await keys()
        let name = name.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }.flatMap { $0.isEmpty ? nil : $0 }
        return try await write { db in
            try Self.upsertContact(
                Sighting(name: name, count: 0, lastSeen: nil),
                address: canonical,
                source: .manual,
                keys: keys,
                db: db
            )
        }
    }

    /// Counts addresses seen in stored mail (From, To and Cc): each one's entry is created (source
    /// ``ContactSource/mail``) or updated (times seen, last seen; a name only where the entry has none, so mail
    /// never renames an entry). Anything that is not an address is skipped. The import and sync paths call this
    /// for every message they store, in the same transaction.
    ///
    /// - Parameters:
    ///   - addresses: The addresses, repeated as often as they were seen.
    ///   - source: ``ContactSource/mail`` (the default); ``ContactSource/manual`` makes new entries manual.
    ///   - seenAt: The date of the message they were seen in.
    public func noteAddresses(
        _ addresses: [MailAddress],
        source: ContactSource = .mail,
        seenAt: Date = Date()
    ) async throws(StoreError) {
        let keys = try await keys()
        let sightings = Self.sightings(addresses.map { ($0, Schema.seconds(seenAt)) })
        guard !sightings.isEmpty else { return }
        try await write { db in
            for (address, sighting) in sightings {
                try Self.upsertContact(sighting, address: address, source: source, keys: keys, db: db)
            }
        }
    }

    /// Entries with a word of the name or of the address that starts with each word of `query` (at least two
    /// characters; words are normalised as the search index's are). Matching uses the blind prefix index only;
    /// the matching entries are then opened and checked, so false hits of the truncated hashes never show. Manual
    /// entries first, then by times seen.
    ///
    /// - Parameters:
    ///   - query: Words or word prefixes, such as `car` or `carol exa`.
    ///   - limit: The most entries returned (1 to ``maximumPageSize``).
    public func contacts(matching query: String, limit: Int = 50) async throws(StoreError) -> [Contact] {
        try Self.checkPage(limit: limit, offset: 0)
        let keys = try await keys()
        let words = SearchTokenizer.tokens(in: query)
        guard !words.isEmpty else { return [] }
        let terms = Array(
            Set(words.prefix(32).map { word in Self.prefixHash(Array(word.unicodeScalars), keys: keys) })
        )
        let records = try await read { db in
            let intersection = Array(
                repeating: "SELECT contactID FROM addressBookTokens WHERE token = ?",
                count: terms.count
            ).joined(separator: " INTERSECT ")
            return try Row.fetchAll(
                db,
                sql: "SELECT b.id, b.record FROM addressBook b WHERE b.id IN (\(intersection))",
                arguments: StatementArguments(terms)
            ).map(Self.contactRow)
        }
        var found: [Contact] = []
        for (id, record) in records {
            let contact = try Self.openContact(record, id: id, keys: keys)
            let tokens = SearchTokenizer.tokens(in: (contact.name ?? "") + " " + contact.address)
            if words.allSatisfy({ word in tokens.contains { $0.hasPrefix(word) } }) { found.append(contact) }
        }
        return Array(Self.ranked(found).prefix(limit))
    }

    /// Every entry of the address book, manual ones first, then by times seen.
    public func allContacts() async throws(StoreError) -> [Contact] {
        let keys = try await keys()
        let records = try await read { db in
            try Row.fetchAll(db, sql: "SELECT id, record FROM addressBook ORDER BY id").map(Self.contactRow)
        }
        var contacts: [Contact] = []
        for (id, record) in records { contacts.append(try Self.openContact(record, id: id, keys: keys)) }
        return Self.ranked(contacts)
    }

    /// Deletes an entry and its index entries.
    ///
    /// - Throws: ``StoreError/contactNotFound(_:)``.
    public func deleteContact(_ id: Int64) async throws(StoreError) {
        _ = try await keys()
        try await write { db in
            try db.execute(sql: "DELETE FROM addressBook WHERE id = ?", arguments: [id])
            guard db.changesCount > 0 else { throw StoreError.contactNotFound(id) }
        }
    }

    // MARK: - vCard

    /// The entry as a vCard 4.0 (RFC 6350): `FN` (the name, else the address) and `EMAIL`, lines ending in CRLF and
    /// folded at 75 octets. Every value is escaped as RFC 6350 §3.4 says (`\` `,` `;` and line breaks), and other
    /// control characters are dropped, so a name taken from a hostile message cannot end its line and add
    /// properties of its own.
    public static func vCard(for contact: Contact) -> String {
        let name = contact.name.flatMap { $0.isEmpty ? nil : $0 } ?? contact.address
        var lines = [
            "BEGIN:VCARD", "VERSION:4.0", "FN:" + vCardEscaped(name), "EMAIL:" + vCardEscaped(contact.address),
        ]
        lines.append("END:VCARD")
        return lines.map { folded($0) }.joined()
    }

    /// Several entries as one vCard file.
    public static func vCard(for contacts: [Contact]) -> String { contacts.map { vCard(for: $0) }.joined() }

    /// A text value escaped for a vCard property (RFC 6350 §3.4).
    static func vCardEscaped(_ value: String) -> String {
        var result = String.UnicodeScalarView()
        var scalars = value.unicodeScalars.makeIterator()
        var pending = scalars.next()
        while let scalar = pending {
            pending = scalars.next()
            switch scalar {
            case "\\": result.append(contentsOf: "\\\\".unicodeScalars)
            case ",": result.append(contentsOf: "\\,".unicodeScalars)
            case ";": result.append(contentsOf: "\\;".unicodeScalars)
            case "\r":
                result.append(contentsOf: "\\n".unicodeScalars)
                if pending == "\n" { pending = scalars.next() }
            case "\n", "\u{85}", "\u{2028}", "\u{2029}": result.append(contentsOf: "\\n".unicodeScalars)
            case "\t": result.append(" ")
            default:
                let value = scalar.value
                if value < 0x20 || value == 0x7F || (0x80...0x9F).contains(value) { continue }
                result.append(scalar)
            }
        }
        return String(result)
    }

    /// One content line, folded at 75 octets (never inside a UTF-8 sequence), with its CRLF.
    static func folded(_ line: String) -> String {
        var output = ""
        var width = 0
        for scalar in line.unicodeScalars {
            let size = String(scalar).utf8.count
            if width + size > 75 {
                output += "\r\n "
                width = 1
            }
            output.unicodeScalars.append(scalar)
            width += size
        }
        return output + "\r\n"
    }

    // MARK: - Internals

    /// Addresses seen, by canonical address: how often, the newest date and the first name given.
    struct Sighting: Sendable {
        var name: String?
        var count: Int64
        var lastSeen: Int64?
    }

    /// Groups sightings by canonical address (skipping what is not an address).
    static func sightings(_ seen: [(MailAddress, Int64)]) -> [(String, Sighting)] {
        var order: [String] = []
        var byAddress: [String: Sighting] = [:]
        for (address, time) in seen {
            guard let canonical = canonicalAddress(address.address) else { continue }
            let name = address.name.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
                .flatMap { $0.isEmpty ? nil : $0 }
            if var known = byAddress[canonical] {
                known.count += 1
                known.lastSeen = max(known.lastSeen ?? time, time)
                if known.name == nil { known.name = name }
                byAddress[canonical] = known
            } else {
                order.append(canonical)
                byAddress[canonical] = Sighting(name: name, count: 1, lastSeen: time)
            }
        }
        return order.map { ($0, byAddress[$0]!) }
    }

    /// Creates or updates the entry of `address` (canonical) inside the caller's transaction. An existing record
    /// that fails to open is replaced (it was damaged: nothing in it can be kept), so one bad row never stops an
    /// import.
    @discardableResult
    static func upsertContact(
        _ sighting: Sighting,
        address: String,
        source: ContactSource,
        keys: StoreKeys,
        db: Database
    ) throws -> Contact {
        let lookup = Data(keys.lookup.hash(tag: HashTag.contactCanonical, Array(address.utf8)).prefix(16))
        let existing = try Row.fetchOne(
            db,
            sql: "SELECT id, record FROM addressBook WHERE lookup = ?",
            arguments: [lookup]
        )
        .map(contactRow)
        var contact: Contact
        var tokensChanged = true
        if let (id, record) = existing,
            let known = keys.decode(
                record,
                .contactRecord,
                row: id,
                { plain in try ContactCoding.contact(plain, id: id) }
            ),
            known.address == address
        {
            contact = known
            let oldName = known.name
            contact.timesSeen =
                known.timesSeen.addingReportingOverflow(sighting.count).overflow
                ? .max : known.timesSeen + sighting.count
            if let seen = sighting.lastSeen {
                let date = Date(timeIntervalSince1970: TimeInterval(seen))
                contact.lastSeen = max(known.lastSeen ?? date, date)
            }
            if source == .manual {
                contact.source = .manual
                if let name = sighting.name { contact.name = name }
            } else if contact.name == nil {
                contact.name = sighting.name
            }
            tokensChanged = contact.name != oldName
        } else {
            let id = try existing?.0 ?? Schema.nextID(db, table: "addressBook")
            contact = Contact(
                id: id,
                name: sighting.name,
                address: address,
                timesSeen: sighting.count,
                lastSeen: sighting.lastSeen.map { Date(timeIntervalSince1970: TimeInterval($0)) },
                source: source
            )
        }
        let sealed = try keys.seal(ContactCoding.record(contact), .contactRecord, row: contact.id)
        try db.execute(
            sql: "INSERT OR REPLACE INTO addressBook (id, lookup, record) VALUES (?, ?, ?)",
            arguments: [contact.id, lookup, sealed]
        )
        if tokensChanged {
            try db.execute(sql: "DELETE FROM addressBookTokens WHERE contactID = ?", arguments: [contact.id])
            let insert = try db.cachedStatement(
                sql: "INSERT OR IGNORE INTO addressBookTokens (token, contactID) VALUES (?, ?)"
            )
            for token in prefixTokens(name: contact.name, address: contact.address, keys: keys) {
                try insert.execute(arguments: [token, contact.id])
            }
        }
        return contact
    }

    /// The blind index entries of an entry: every prefix of 2 to ``contactPrefixCharacters`` characters of every
    /// word of its name and address, hashed (at most ``maximumContactTokens``).
    static func prefixTokens(name: String?, address: String, keys: StoreKeys) -> Set<Int64> {
        var tokens = Set<Int64>()
        for word in SearchTokenizer.tokens(in: (name ?? "") + " " + address) {
            let scalars = Array(word.unicodeScalars)
            var length = SearchTokenizer.minimumLength
            while length <= min(scalars.count, contactPrefixCharacters) && tokens.count < maximumContactTokens {
                tokens.insert(prefixHash(Array(scalars[0..<length]), keys: keys))
                length += 1
            }
        }
        return tokens
    }

    /// The index token of a word prefix (cut to ``contactPrefixCharacters`` characters).
    static func prefixHash(_ scalars: [Unicode.Scalar], keys: StoreKeys) -> Int64 {
        var text = String.UnicodeScalarView()
        text.append(contentsOf: scalars.prefix(contactPrefixCharacters))
        return keys.search.hash64(tag: HashTag.contactPrefix, Array(String(text).utf8))
    }

    /// The id and sealed record of an `addressBook` row, decoded strictly.
    static func contactRow(_ row: Row) throws -> (Int64, Data) {
        let strict = try StrictRow(row, table: "addressBook")
        return (strict.id, try strict.blob("record"))
    }

    /// Opens an entry's record.
    static func openContact(_ record: Data, id: Int64, keys: StoreKeys) throws(StoreError) -> Contact {
        guard
            let contact = keys.decode(
                record,
                .contactRecord,
                row: id,
                { plain in try ContactCoding.contact(plain, id: id) }
            )
        else { throw .corruptRecord(table: "addressBook", id: id) }
        return contact
    }

    /// Manual entries first, then by times seen, newest sighting, id.
    static func ranked(_ contacts: [Contact]) -> [Contact] {
        contacts.sorted { left, right in
            if left.source != right.source { return left.source == .manual }
            if left.timesSeen != right.timesSeen { return left.timesSeen > right.timesSeen }
            let leftSeen = left.lastSeen ?? .distantPast
            let rightSeen = right.lastSeen ?? .distantPast
            if leftSeen != rightSeen { return leftSeen > rightSeen }
            return left.id < right.id
        }
    }
}
