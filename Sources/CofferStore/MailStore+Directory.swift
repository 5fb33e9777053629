import GRDB

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension MailStore {
    // MARK: - Labels

    /// Every label, by id.
    public func labels() async throws(StoreError) -> [Label] {
        let keys = try await keys()
        let records = try await read { db in try LabelRecord.order(Column("id")).fetchAll(db) }
        return try records.map { record throws(StoreError) in
            guard let plain = keys.open(record.name, .labelName, row: record.id),
                let name = try? CellReader.text(plain)
            else { throw .corruptRecord(table: "labels", id: record.id) }
            return Label(id: record.id, name: name)
        }
    }

    /// The id of the label called `name`, created if it does not exist.
    public func createLabel(_ name: String) async throws(StoreError) -> Int64 {
        guard !name.isEmpty else { throw .invalidArgument("a label needs a name") }
        let keys = try await keys()
        return try await write { db in try Self.label(named: name, keys: keys, db: db) }
    }

    // MARK: - Accounts and addresses

    /// Adds an account.
    ///
    /// - Returns: The account's id.
    public func addAccount(username: String, displayName: String?) async throws(StoreError) -> Int64 {
        let keys = try await keys()
        var writer = CellWriter()
        writer.string(username)
        writer.string(displayName)
        let plain = writer.bytes
        return try await write { db in
            let id = try Schema.nextID(db, table: "accounts")
            try AccountRecord(id: id, details: try keys.seal(plain, .accountDetails, row: id)).insert(db)
            return id
        }
    }

    /// Every account, by id.
    public func accounts() async throws(StoreError) -> [Account] {
        let keys = try await keys()
        let records = try await read { db in try AccountRecord.order(Column("id")).fetchAll(db) }
        return try records.map { record throws(StoreError) in
            let fields = Self.strings(keys.open(record.details, .accountDetails, row: record.id), count: 2)
            guard let fields, let username = fields[0] else { throw .corruptRecord(table: "accounts", id: record.id) }
            return Account(id: record.id, username: username, displayName: fields[1])
        }
    }

    /// Adds one of an account's own addresses (an existing one with the same address is updated).
    ///
    /// - Returns: The address's id.
    public func saveAddress(
        accountID: Int64,
        address: String,
        displayName: String?
    ) async throws(StoreError)
        -> Int64
    {
        let keys = try await keys()
        let lookup = Data(keys.lookup.hash(tag: HashTag.ownAddress, Array(address.lowercased().utf8)).prefix(16))
        var writer = CellWriter()
        writer.string(address)
        writer.string(displayName)
        let plain = writer.bytes
        return try await write { db in
            let id =
                try Int64.fetchOne(db, sql: "SELECT id FROM addresses WHERE lookup = ?", arguments: [lookup])
                ?? Schema.nextID(db, table: "addresses")
            let sealed = try keys.seal(plain, .addressDetails, row: id, extra: String(accountID))
            try AddressRecord(id: id, accountID: accountID, lookup: lookup, details: sealed).save(db)
            return id
        }
    }

    /// The addresses of an account, by id.
    public func addresses(accountID: Int64) async throws(StoreError) -> [OwnAddress] {
        let keys = try await keys()
        let records = try await read { db in
            try AddressRecord.filter(Column("accountID") == accountID).order(Column("id")).fetchAll(db)
        }
        return try records.map { record throws(StoreError) in
            let plain = keys.open(record.details, .addressDetails, row: record.id, extra: String(accountID))
            guard let fields = Self.strings(plain, count: 2), let address = fields[0] else {
                throw .corruptRecord(table: "addresses", id: record.id)
            }
            return OwnAddress(id: record.id, accountID: accountID, address: address, displayName: fields[1])
        }
    }

    /// Decodes a cell of exactly `count` optional strings; `nil` if the cell is missing or malformed.
    static func strings(_ plain: [UInt8]?, count: Int) -> [String?]? {
        guard let plain else { return nil }
        do {
            var reader = try CellReader(plain)
            var fields: [String?] = []
            for _ in 0..<count { fields.append(try reader.string()) }
            try reader.finish()
            return fields
        } catch {
            return nil
        }
    }

    /// Deletes a message, its labels, attachments and index entries (their pages are zeroed by `secure_delete`),
    /// then, once that committed, its attachments' sealed files.
    public func deleteMessage(_ id: Int64) async throws(StoreError) {
        _ = try await keys()
        let files = try await write { db -> [String]? in
            let files = try Self.attachmentFiles(of: [id], db: db)
            return try MessageRecord.deleteOne(db, key: id) ? files : nil
        }
        guard let files else { throw .messageNotFound(id) }
        await removeSealedFiles(files)
    }
}
