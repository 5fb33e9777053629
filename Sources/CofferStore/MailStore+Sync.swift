import CofferMIME
import CofferTransport
import GRDB

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// An IMAP account: its server endpoint and credentials, stored sealed under the MainKey (account record v5,
/// docs/FORMAT.md).
public struct ServerAccount: Sendable, Equatable {
    /// Where the server is, how TLS starts (implicit, or STARTTLS for an `imap://` account) and what it must present.
    public var endpoint: ServerEndpoint
    /// The login name.
    public var username: String
    /// The password (never printed; ``description`` leaves it out).
    public var password: String
    /// The SMTP submission server mail is sent through (record v5), or nil for an account that only reads mail.
    public var submission: SubmissionServer?

    /// Creates a record.
    public init(endpoint: ServerEndpoint, username: String, password: String, submission: SubmissionServer? = nil) {
        self.endpoint = endpoint
        self.username = username
        self.password = password
        self.submission = submission
    }

    /// The login for the submission server: its own, else the IMAP account's.
    public var submissionLogin: (username: String, password: String) {
        (submission?.username ?? username, submission?.password ?? password)
    }

    /// Creates a record from the endpoint's parts.
    public init(
        host: String,
        port: Int,
        username: String,
        password: String,
        pins: [String] = [],
        caFile: String? = nil,
        connectAddress: String? = nil,
        startTLS: Bool = false,
        pinReportURL: String? = nil,
        pinExpires: Date? = nil
    ) {
        self.init(
            endpoint: ServerEndpoint(
                host: host,
                port: port,
                security: startTLS ? .startTLS : .implicitTLS,
                pins: pins,
                caFile: caFile,
                connectAddress: connectAddress,
                pinReportURL: pinReportURL,
                pinExpires: pinExpires
            ),
            username: username,
            password: password
        )
    }

    /// The version of the sealed record written by this code (v2 adds `startTLS`, v3 `pinReportURL`, v4
    /// `pinExpires`, v5 the submission server; older records still open).
    public static let recordVersion = 5

    /// The account's server as a URL: `imaps://HOST:PORT`, or `imap://HOST:PORT` for STARTTLS.
    public var url: String { endpoint.url(scheme: "imaps", plainScheme: "imap") }

    func encoded() -> [UInt8] {
        var writer = CellWriter(capacity: 128)
        writer.count(Self.recordVersion)
        writer.string(endpoint.host)
        writer.count(endpoint.port)
        writer.string(username)
        writer.string(password)
        writer.string(endpoint.caFile)
        writer.string(endpoint.connectAddress)
        Self.writeTLS(endpoint, to: &writer)
        writer.flag(submission != nil)
        if let submission {
            writer.string(submission.address.name)
            writer.string(submission.address.address)
            writer.string(submission.endpoint.host)
            writer.count(submission.endpoint.port)
            writer.string(submission.username)
            writer.string(submission.password)
            writer.string(submission.endpoint.caFile)
            writer.string(submission.endpoint.connectAddress)
            Self.writeTLS(submission.endpoint, to: &writer)
        }
        return writer.bytes
    }

    /// The pins, TLS mode, report URL and pin expiry of an endpoint, in record order.
    private static func writeTLS(_ endpoint: ServerEndpoint, to writer: inout CellWriter) {
        writer.count(endpoint.pins.count)
        for pin in endpoint.pins { writer.string(pin) }
        writer.flag(endpoint.security == .startTLS)
        writer.string(endpoint.pinReportURL)
        // Unix seconds (a u32: until 2106); 0 = no expiration.
        writer.count(endpoint.pinExpires.map { Int($0.timeIntervalSince1970) } ?? 0)
    }

    /// Reads what ``writeTLS(_:to:)`` wrote (each field only from the record version that added it).
    private static func readTLS(
        host: String,
        port: Int,
        caFile: String?,
        connectAddress: String?,
        version: Int,
        from reader: inout CellReader
    ) throws(CellReader.Malformed) -> ServerEndpoint {
        let pinCount = try reader.count()
        guard pinCount <= 64 else { throw CellReader.Malformed() }
        var pins: [String] = []
        for _ in 0..<pinCount { pins.append(try reader.requiredString()) }
        let startTLS = version >= 2 ? try reader.flag() : false
        let pinReportURL = version >= 3 ? try reader.string() : nil
        let expires = version >= 4 ? try reader.count() : 0
        return ServerEndpoint(
            host: host,
            port: port,
            security: startTLS ? .startTLS : .implicitTLS,
            pins: pins,
            caFile: caFile,
            connectAddress: connectAddress,
            pinReportURL: pinReportURL,
            pinExpires: expires == 0 ? nil : Date(timeIntervalSince1970: TimeInterval(expires))
        )
    }

    static func decode(_ bytes: [UInt8]) throws(CellReader.Malformed) -> ServerAccount {
        var reader = try CellReader(bytes)
        let version = try reader.count()
        guard (1...recordVersion).contains(version) else { throw CellReader.Malformed() }
        let host = try reader.requiredString()
        let port = try reader.count()
        let username = try reader.requiredString()
        let password = try reader.requiredString()
        let caFile = try reader.string()
        let connectAddress = try reader.string()
        let endpoint = try readTLS(
            host: host,
            port: port,
            caFile: caFile,
            connectAddress: connectAddress,
            version: version,
            from: &reader
        )
        var submission: SubmissionServer?
        if version >= 5, try reader.flag() {
            let address = MailAddress(name: try reader.string(), address: try reader.requiredString())
            let host = try reader.requiredString()
            let port = try reader.count()
            let username = try reader.string()
            let password = try reader.string()
            let caFile = try reader.string()
            let connectAddress = try reader.string()
            submission = SubmissionServer(
                endpoint: try readTLS(
                    host: host,
                    port: port,
                    caFile: caFile,
                    connectAddress: connectAddress,
                    version: version,
                    from: &reader
                ),
                address: address,
                username: username,
                password: password
            )
        }
        try reader.finish()
        return ServerAccount(endpoint: endpoint, username: username, password: password, submission: submission)
    }
}

/// An account's SMTP submission server (RFC 6409): where it is, what it must present, and its own login, or the
/// IMAP account's when none is given.
public struct SubmissionServer: Sendable, Equatable {
    /// Where the server is: implicit TLS (RFC 8314, port 465) or STARTTLS (port 587), with its own pins.
    public var endpoint: ServerEndpoint
    /// Who the account's mail is from: the `From` of every message written here, and the envelope sender.
    public var address: MailAddress
    /// The login name, or nil for the IMAP account's.
    public var username: String?
    /// The password, or nil for the IMAP account's (never printed).
    public var password: String?

    /// Creates one.
    public init(endpoint: ServerEndpoint, address: MailAddress, username: String? = nil, password: String? = nil) {
        self.endpoint = endpoint
        self.address = address
        self.username = username
        self.password = password
    }

    /// The server as a URL: `submissions://HOST:PORT`, or `submission://HOST:PORT` for STARTTLS.
    public var url: String { endpoint.url(scheme: "submissions", plainScheme: "submission") }
}

/// One server folder a sync follows: its validity and how far the sync got.
public struct SyncFolder: Sendable, Equatable {
    /// The row id.
    public var id: Int64
    /// The account it belongs to.
    public var accountID: Int64
    /// The folder's name on the server.
    public var name: String
    /// The server's UIDVALIDITY when the folder was first synced; a change means every UID is new.
    public var uidValidity: UInt32
    /// The highest UID stored (every message up to it has been fetched).
    public var highestUID: UInt32
    /// The server's HIGHESTMODSEQ after the last complete sync (0 without CONDSTORE).
    public var highestModSeq: UInt64
}

/// Where a stored message lives on the server, and its flags there and here.
public struct SyncLocation: Sendable, Equatable {
    /// The message's UID in the folder.
    public var uid: UInt32
    /// The stored message.
    public var messageID: Int64
    /// The flags the server had at the last sync (only ``MailStore/syncedFlags``).
    public var serverFlags: MessageFlags
    /// The message's flags here (only ``MailStore/syncedFlags``).
    public var localFlags: MessageFlags
}

/// A message fetched from a server folder, to be stored with its location.
public struct FetchedMail: Sendable {
    /// Its UID.
    public var uid: UInt32
    /// The raw bytes.
    public var bytes: [UInt8]
    /// The server's flags.
    public var flags: MessageFlags
    /// The label it gets (the folder's name).
    public var label: String

    /// Creates one.
    public init(uid: UInt32, bytes: [UInt8], flags: MessageFlags, label: String) {
        self.uid = uid
        self.bytes = bytes
        self.flags = flags
        self.label = label
    }
}

/// Fetched messages made ready to store (``MailStore/prepareFetchedMail(_:)``): parsed, sealed and hashed, no
/// plaintext beyond what the write needs in memory (label names, addresses for the address book).
public struct PreparedFetch: Sendable {
    let prepared: [Result<PreparedMessage, MIMEError>]
    let locations: [(uid: Int64, flags: Int64)]
    let labels: [String]
    let damaged: [Int: MIMEError]

    init(
        prepared: [Result<PreparedMessage, MIMEError>] = [],
        locations: [(uid: Int64, flags: Int64)] = [],
        labels: [String] = [],
        damaged: [Int: MIMEError] = [:]
    ) {
        self.prepared = prepared
        self.locations = locations
        self.labels = labels
        self.damaged = damaged
    }

    /// How many messages it holds.
    public var count: Int { prepared.count }
}

extension MailStore {
    /// The flags kept in step with the server: `\Seen`, `\Answered`, `\Flagged`, `\Draft`.
    public static let syncedFlags: MessageFlags = [.seen, .answered, .flagged, .draft]

    // MARK: - Server accounts

    /// Adds an IMAP account (an `accounts` row and its sealed connection record) in one transaction.
    ///
    /// - Returns: The account's id.
    public func addServerAccount(_ server: ServerAccount) async throws(StoreError) -> Int64 {
        guard !server.endpoint.host.isEmpty, !server.username.isEmpty else {
            throw .invalidArgument("an account needs a host and a user name")
        }
        guard (1...65535).contains(server.endpoint.port) else {
            throw .invalidArgument("the port must be from 1 to 65535")
        }
        if let submission = server.submission {
            guard !submission.endpoint.host.isEmpty, (1...65535).contains(submission.endpoint.port) else {
                throw .invalidArgument("the submission server needs a host and a port from 1 to 65535")
            }
            guard submission.address.address.contains("@") else {
                throw .invalidArgument("the sending address must be an address with a domain")
            }
        }
        let keys = try await keys()
        var writer = CellWriter()
        writer.string(server.username)
        writer.string(nil)
        let details = writer.bytes
        var config = server.encoded()
        defer { StoreKeys.zero(&config) }
        let sealedConfig = config
        return try await write { db in
            let id = try Schema.nextID(db, table: "accounts")
            try AccountRecord(id: id, details: try keys.seal(details, .accountDetails, row: id)).insert(db)
            try db.execute(
                sql: "INSERT INTO accountServers (accountID, config) VALUES (?, ?)",
                arguments: [id, try keys.seal(sealedConfig, .serverConfig, row: id)]
            )
            return id
        }
    }

    /// Every IMAP account, by id.
    ///
    /// - Throws: `.corruptRecord(table: "accountServers", …)` when a record fails to open.
    public func serverAccounts() async throws(StoreError) -> [(id: Int64, server: ServerAccount)] {
        let keys = try await keys()
        let rows = try await read { db in
            try Row.fetchAll(db, sql: "SELECT accountID, config FROM accountServers ORDER BY accountID")
                .map { row throws -> (Int64, Data) in
                    let strict = try StrictRow(row, table: "accountServers", idColumn: "accountID")
                    return (strict.id, try strict.blob("config"))
                }
        }
        return try rows.map { (id, sealed) throws(StoreError) in
            guard var plain = keys.open(sealed, .serverConfig, row: id) else {
                throw .corruptRecord(table: "accountServers", id: id)
            }
            defer { StoreKeys.zero(&plain) }
            do {
                return (id, try ServerAccount.decode(plain))
            } catch {
                throw .corruptRecord(table: "accountServers", id: id)
            }
        }
    }

    /// Removes an account with its connection record and sync state, and the messages that were stored only
    /// through its folders.
    ///
    /// - Returns: How many messages were deleted.
    public func removeAccount(_ id: Int64) async throws(StoreError) -> Int {
        _ = try await keys()
        let deleted = try await write { db -> (count: Int, files: [String])? in
            let candidates = try Self.locatedMessages(
                db,
                "folderID IN (SELECT id FROM syncFolders WHERE accountID = ?)",
                [id]
            )
            guard try AccountRecord.deleteOne(db, key: id) else { return nil }
            return try Self.deleteUnlocated(candidates, db: db)
        }
        guard let deleted else { throw .invalidArgument("there is no account \(id)") }
        await removeSealedFiles(deleted.files)
        return deleted.count
    }

    // MARK: - Folders

    /// The sync state of `name` in `accountID`, nil when it was never synced.
    public func syncFolder(accountID: Int64, name: String) async throws(StoreError) -> SyncFolder? {
        let keys = try await keys()
        let lookup = Self.folderLookup(keys: keys, name: name)
        let row = try await read { db in
            try FolderRow.fetchOne(
                db,
                sql: """
                    SELECT id, accountID, name, uidValidity, highestUID, highestModSeq FROM syncFolders
                    WHERE accountID = ? AND lookup = ?
                    """,
                arguments: [accountID, lookup]
            )
        }
        guard let row else { return nil }
        return try Self.folder(row, keys: keys)
    }

    /// Every synced folder of an account.
    public func syncFolders(accountID: Int64) async throws(StoreError) -> [SyncFolder] {
        let keys = try await keys()
        let rows = try await read { db in
            try FolderRow.fetchAll(
                db,
                sql: """
                    SELECT id, accountID, name, uidValidity, highestUID, highestModSeq FROM syncFolders
                    WHERE accountID = ? ORDER BY id
                    """,
                arguments: [accountID]
            )
        }
        return try rows.map { row throws(StoreError) in try Self.folder(row, keys: keys) }
    }

    /// Starts following a folder with the server's UIDVALIDITY (nothing fetched yet).
    public func addSyncFolder(
        accountID: Int64,
        name: String,
        uidValidity: UInt32
    ) async throws(StoreError)
        -> SyncFolder
    {
        let keys = try await keys()
        let lookup = Self.folderLookup(keys: keys, name: name)
        let plain = CellWriter.text(name)
        let id = try await write { db in
            let id = try Schema.nextID(db, table: "syncFolders")
            try db.execute(
                sql: """
                    INSERT INTO syncFolders (id, accountID, lookup, name, uidValidity, highestUID, highestModSeq)
                    VALUES (?, ?, ?, ?, ?, 0, 0)
                    """,
                arguments: [
                    id, accountID, lookup, try keys.seal(plain, .syncFolderName, row: id, extra: String(accountID)),
                    Int64(uidValidity),
                ]
            )
            return id
        }
        return SyncFolder(
            id: id,
            accountID: accountID,
            name: name,
            uidValidity: uidValidity,
            highestUID: 0,
            highestModSeq: 0
        )
    }

    /// Records the server's HIGHESTMODSEQ after a complete sync of the folder.
    public func setHighestModSeq(folderID: Int64, _ value: UInt64) async throws(StoreError) {
        _ = try await keys()
        let clamped = Int64(clamping: value)
        try await write { db in
            try db.execute(
                sql: "UPDATE syncFolders SET highestModSeq = ? WHERE id = ?",
                arguments: [clamped, folderID]
            )
        }
    }

    /// Forgets a folder (its UIDVALIDITY changed, or it is no longer followed): its locations go, and so do the
    /// messages stored only through it, in one transaction.
    ///
    /// - Returns: How many messages were deleted.
    public func forgetSyncFolder(_ folderID: Int64) async throws(StoreError) -> Int {
        let keys = try await keys()
        let deleted = try await write { db in
            let label = try Self.folderLabel(folderID, keys: keys, db: db)
            let candidates = try Self.locatedMessages(db, "folderID = ?", [folderID])
            try db.execute(sql: "DELETE FROM syncFolders WHERE id = ?", arguments: [folderID])
            let deleted = try Self.deleteUnlocated(candidates, db: db)
            try Self.dropLabel(label, from: candidates, db: db)
            return deleted
        }
        await removeSealedFiles(deleted.files)
        return deleted.count
    }

    // MARK: - Messages at locations

    /// Stores fetched messages with their locations in ONE transaction, and raises the folder's highest UID to the
    /// largest of them: a crash leaves either all of them stored and located or none. A message whose exact bytes
    /// are already stored gets the location (and the folder's label) without a second copy; a message is never
    /// matched by its Message-ID alone, so two different messages that carry one Message-ID are both stored. A
    /// message that does not parse is stored as a damaged message (``MessageFlags/damaged``), never skipped.
    ///
    /// - Returns: One outcome per message (`.stored`, `.located` or `.damaged`).
    public func storeFetchedMail(_ mails: [FetchedMail], folderID: Int64) async throws(StoreError) -> [FetchedOutcome] {
        try await storePrepared(try await prepareFetchedMail(mails), folderID: folderID)
    }

    /// The part of ``storeFetchedMail(_:folderID:)`` that writes nothing to the database: each message parsed,
    /// sealed and hashed (PGP/MIME opened, Autocrypt keys checked), on the caller's executor. A sync prepares one
    /// batch while the store writes the one before (``storePrepared(_:folderID:)``), so that both cores work.
    public func prepareFetchedMail(_ mails: [FetchedMail]) async throws(StoreError) -> PreparedFetch {
        guard !mails.isEmpty else { return PreparedFetch() }
        let keys = try await keys()
        let now = Schema.seconds(Date())
        var reasons: [Int: MIMEError] = [:]
        let parsed: [Result<PreparedMessage, MIMEError>] = mails.enumerated().map { index, mail in
            let raw = RawMessage(bytes: mail.bytes, flags: mail.flags, labels: [mail.label])
            switch Self.prepare(raw, keys: keys, now: now) {
            case .success(let message): return .success(message)
            case .failure(let reason):
                reasons[index] = reason
                return .success(Self.prepareDamaged(raw, reason: reason, keys: keys, now: now))
            }
        }
        return PreparedFetch(
            prepared: await checkAutocrypt(await openEncryptedMail(parsed, keys: keys, now: now)),
            locations: mails.map { (uid: Int64($0.uid), flags: $0.flags.intersection(Self.syncedFlags).rawValue) },
            labels: mails.map(\.label),
            damaged: reasons
        )
    }

    /// Writes a batch from ``prepareFetchedMail(_:)``, as ``storeFetchedMail(_:folderID:)`` does: one transaction
    /// for the messages, their locations and the folder's highest UID. Batches must be written in the order they
    /// were fetched (the highest UID then only grows past messages that are stored). Throws ``StoreError/locked``
    /// when the store locked after the batch was prepared: nothing is written then.
    ///
    /// - Returns: One outcome per message (`.stored`, `.located` or `.damaged`).
    public func storePrepared(_ batch: PreparedFetch, folderID: Int64) async throws(StoreError) -> [FetchedOutcome] {
        guard !batch.prepared.isEmpty else { return [] }
        let keys = try await keys()
        let prepared = batch.prepared
        let locations = batch.locations
        let highest = locations.map(\.uid).max() ?? 0
        let labels = batch.labels
        let damaged = batch.damaged
        return try await write { db in
            let outcomes = try Self.insert(prepared, keys: keys, db: db, duplicateByMessageID: false)
            try Self.updateAutocryptPeers(prepared, keys: keys, db: db)
            var labelIDs: [String: Int64] = [:]
            var results: [FetchedOutcome] = []
            for (index, outcome) in outcomes.enumerated() {
                let result: FetchedOutcome
                switch (outcome, prepared[index]) {
                case (.imported(let id), _):
                    result = damaged[index].map { .damaged(id, $0) } ?? .stored(id)
                case (.duplicate, .success(let message)):
                    guard let id = try Self.existingMessage(message, db: db) else {
                        throw StoreError.corruptRecord(table: "messages", id: 0)
                    }
                    let name = labels[index]
                    let labelID = try labelIDs[name] ?? Self.label(named: name, keys: keys, db: db)
                    labelIDs[name] = labelID
                    try Self.addLabel(labelID, to: id, db: db)
                    result = .located(id)
                default:
                    // Every message is prepared (a damaged one as such), so the insert never reports one malformed.
                    throw StoreError.corruptRecord(table: "messages", id: 0)
                }
                results.append(result)
                try db.execute(
                    sql: """
                        INSERT OR REPLACE INTO syncLocations (folderID, uid, messageID, serverFlags)
                        VALUES (?, ?, ?, ?)
                        """,
                    arguments: [folderID, locations[index].uid, result.messageID, locations[index].flags]
                )
            }
            try db.execute(
                sql: "UPDATE syncFolders SET highestUID = max(highestUID, ?) WHERE id = ?",
                arguments: [highest, folderID]
            )
            return results
        }
    }

    /// ``storeFetchedMail(_:folderID:)`` with each outcome as an import's: a damaged message counts as imported.
    public func storeFetched(_ mails: [FetchedMail], folderID: Int64) async throws(StoreError) -> [ImportOutcome] {
        try await storeFetchedMail(mails, folderID: folderID).map { outcome in
            switch outcome {
            case .stored(let id), .damaged(let id, _): .imported(id)
            case .located: .duplicate
            }
        }
    }

    /// Every location in a folder, by UID, with the server's and the local flags.
    public func syncLocations(folderID: Int64) async throws(StoreError) -> [SyncLocation] {
        _ = try await keys()
        let mask = Self.syncedFlags.rawValue
        let rows = try await read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT l.uid, l.messageID, l.serverFlags, m.flags FROM syncLocations l
                    JOIN messages m ON m.id = l.messageID WHERE l.folderID = ? ORDER BY l.uid
                    """,
                arguments: [folderID]
            ).map { row -> SyncLocation? in
                guard let uid = Self.integer(row, 0), let messageID = Self.integer(row, 1),
                    let server = Self.integer(row, 2),
                    let local = Self.integer(row, 3), let uid32 = UInt32(exactly: uid)
                else { return nil }
                return SyncLocation(
                    uid: uid32,
                    messageID: messageID,
                    serverFlags: MessageFlags(rawValue: server & mask),
                    localFlags: MessageFlags(rawValue: local & mask)
                )
            }
        }
        return try rows.map { location throws(StoreError) in
            guard let location else { throw .corruptRecord(table: "syncLocations", id: folderID) }
            return location
        }
    }

    /// Deletes the locations of UIDs the server expunged, and the messages stored only there, in one transaction.
    ///
    /// - Returns: How many messages were deleted.
    public func deleteLocations(folderID: Int64, uids: [UInt32]) async throws(StoreError) -> Int {
        guard !uids.isEmpty else { return 0 }
        let keys = try await keys()
        let deleted = try await write { db in
            let label = try Self.folderLabel(folderID, keys: keys, db: db)
            let find = try db.cachedStatement(sql: "SELECT messageID FROM syncLocations WHERE folderID = ? AND uid = ?")
            let delete = try db.cachedStatement(sql: "DELETE FROM syncLocations WHERE folderID = ? AND uid = ?")
            var candidates = Set<Int64>()
            for uid in uids {
                if let id = try Int64.fetchOne(find, arguments: [folderID, Int64(uid)]) { candidates.insert(id) }
                try delete.execute(arguments: [folderID, Int64(uid)])
            }
            let deleted = try Self.deleteUnlocated(candidates, db: db)
            try Self.dropLabel(label, from: candidates, db: db)
            return deleted
        }
        await removeSealedFiles(deleted.files)
        return deleted.count
    }

    /// Applies the server's current flags: for every flag the server changed since the last sync the server's
    /// value wins; flags it did not change keep their local value (so a local change waits to be pushed).
    ///
    /// - Returns: How many messages changed locally.
    public func applyServerFlags(folderID: Int64, _ flags: [UInt32: MessageFlags]) async throws(StoreError) -> Int {
        guard !flags.isEmpty else { return 0 }
        _ = try await keys()
        let mask = Self.syncedFlags.rawValue
        return try await write { db in
            var changed = 0
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT l.uid, l.messageID, l.serverFlags, m.flags FROM syncLocations l
                    JOIN messages m ON m.id = l.messageID WHERE l.folderID = ?
                    """,
                arguments: [folderID]
            )
            for row in rows {
                guard let uid = Self.integer(row, 0), let messageID = Self.integer(row, 1),
                    let old = Self.integer(row, 2),
                    let local = Self.integer(row, 3), let uid32 = UInt32(exactly: uid), let now = flags[uid32]
                else { continue }
                let new = now.rawValue & mask
                guard (old & mask) != new else { continue }
                let merged = Self.mergedFlags(local: local, server: old & mask, serverNow: new)
                if merged != local {
                    try db.execute(sql: "UPDATE messages SET flags = ? WHERE id = ?", arguments: [merged, messageID])
                    changed += 1
                }
                try db.execute(
                    sql: "UPDATE syncLocations SET serverFlags = ? WHERE folderID = ? AND uid = ?",
                    arguments: [new, folderID, uid]
                )
            }
            return changed
        }
    }

    /// A message's local flags after the server's changed from `server` to `serverNow`: every synced flag the server
    /// changed takes the server's value, the others keep the local one (a local change waits to be pushed). Bits
    /// outside ``syncedFlags`` are kept.
    public static func mergedFlags(local: Int64, server: Int64, serverNow: Int64) -> Int64 {
        let mask = syncedFlags.rawValue
        let serverChanged = (server & mask) ^ (serverNow & mask)
        return (local & ~serverChanged) | (serverNow & serverChanged)
    }

    /// Records in one transaction that the server now holds these flags for these UIDs (after a push).
    public func setServerFlags(folderID: Int64, _ flags: [UInt32: MessageFlags]) async throws(StoreError) {
        guard !flags.isEmpty else { return }
        _ = try await keys()
        let values = flags.map { (uid: Int64($0.key), value: $0.value.intersection(Self.syncedFlags).rawValue) }
        try await write { db in
            let update = try db.cachedStatement(
                sql: "UPDATE syncLocations SET serverFlags = ? WHERE folderID = ? AND uid = ?"
            )
            for entry in values { try update.execute(arguments: [entry.value, folderID, entry.uid]) }
        }
    }

    /// Adds and removes flags of a message here (for example `\Seen` when it is read); a sync pushes the change.
    public func setFlags(
        _ messageID: Int64,
        adding: MessageFlags = [],
        removing: MessageFlags = []
    )
        async throws(StoreError)
    {
        _ = try await keys()
        let add = adding.subtracting(.corrupt).rawValue
        let remove = removing.subtracting(.corrupt).rawValue
        let found = try await write { db in
            try db.execute(
                sql: "UPDATE messages SET flags = (flags & ~?) | ? WHERE id = ?",
                arguments: [remove, add, messageID]
            )
            return db.changesCount > 0
        }
        guard found else { throw .messageNotFound(messageID) }
    }

    /// The message a person opens to read: ``message(_:)``, then marked ``MessageFlags/seen`` here if it was not,
    /// so the next sync sets `\Seen` on the server.
    public func readMessage(_ id: Int64) async throws(StoreError) -> MessageDetail {
        let detail = try await message(id)
        if !detail.summary.flags.contains(.seen) { try await setFlags(id, adding: .seen) }
        return detail
    }

    // MARK: - Helpers

    static func folderLookup(keys: StoreKeys, name: String) -> Data {
        Data(keys.lookup.hash(tag: HashTag.syncFolderName, Array(name.utf8)).prefix(16))
    }

    static func folder(_ row: FolderRow, keys: StoreKeys) throws(StoreError) -> SyncFolder {
        guard let plain = keys.open(row.name, .syncFolderName, row: row.id, extra: String(row.accountID)),
            let name = try? CellReader.text(plain), let validity = UInt32(exactly: row.uidValidity),
            let uid = UInt32(exactly: row.highestUID), let modSeq = UInt64(exactly: row.highestModSeq)
        else { throw .corruptRecord(table: "syncFolders", id: row.id) }
        return SyncFolder(
            id: row.id,
            accountID: row.accountID,
            name: name,
            uidValidity: validity,
            highestUID: uid,
            highestModSeq: modSeq
        )
    }

    /// The id of the stored message a fetched duplicate matched: the one with the same content (never a match by
    /// Message-ID).
    static func existingMessage(_ message: PreparedMessage, db: Database) throws -> Int64? {
        try Int64.fetchOne(db, sql: "SELECT id FROM messages WHERE contentHash = ?", arguments: [message.contentHash])
    }

    /// The label a folder's messages carry (the one named like the folder), and the folder lookup hash that every
    /// account's folder of that name has; nil when there is no such label.
    static func folderLabel(
        _ folderID: Int64,
        keys: StoreKeys,
        db: Database
    ) throws -> (labelID: Int64, folderLookup: Data)? {
        guard
            let row = try FolderRow.fetchOne(
                db,
                sql: "SELECT id, accountID, name, uidValidity, highestUID, highestModSeq FROM syncFolders WHERE id = ?",
                arguments: [folderID]
            )
        else { return nil }
        let name = try folder(row, keys: keys).name
        let lookup = Data(keys.lookup.hash(tag: HashTag.labelName, Array(name.utf8)).prefix(16))
        guard let labelID = try Int64.fetchOne(db, sql: "SELECT id FROM labels WHERE lookup = ?", arguments: [lookup])
        else { return nil }
        return (labelID, folderLookup(keys: keys, name: name))
    }

    /// Takes a folder's label off those of `messages` that no longer sit in a folder of that name (the locations
    /// just removed): labels follow where a message is on the server now.
    static func dropLabel(
        _ label: (labelID: Int64, folderLookup: Data)?,
        from messages: Set<Int64>,
        db: Database
    ) throws {
        guard let label, !messages.isEmpty else { return }
        let drop = try db.cachedStatement(
            sql: """
                DELETE FROM messageLabels WHERE labelID = ? AND messageID = ? AND NOT EXISTS (
                    SELECT 1 FROM syncLocations l JOIN syncFolders f ON f.id = l.folderID
                    WHERE l.messageID = ? AND f.lookup = ?)
                """
        )
        for id in messages { try drop.execute(arguments: [label.labelID, id, id, label.folderLookup]) }
    }

    /// Gives a stored message a label it may already carry.
    static func addLabel(_ labelID: Int64, to messageID: Int64, db: Database) throws {
        try db.execute(
            sql:
                "INSERT OR IGNORE INTO messageLabels (labelID, time, messageID) SELECT ?, time, id FROM messages WHERE id = ?",
            arguments: [labelID, messageID]
        )
    }

    /// The integer in column `index` of `row`, nil for any other storage class (a changed file never traps).
    static func integer(_ row: Row, _ index: Int) -> Int64? {
        if case .int64(let value) = (row[index] as DatabaseValue).storage { return value }
        return nil
    }

    /// The messages at the locations `condition` selects (with `arguments`).
    static func locatedMessages(
        _ db: Database,
        _ condition: String,
        _ arguments: StatementArguments
    ) throws
        -> Set<Int64>
    {
        Set(try Int64.fetchAll(db, sql: "SELECT messageID FROM syncLocations WHERE \(condition)", arguments: arguments))
    }

    /// Deletes those of `candidates` (messages whose locations were just removed) that have no location left, so
    /// a message imported from a file, which never had a location, is never deleted by a sync.
    ///
    /// - Returns: How many were deleted, and the sealed files of their attachments, for the caller to remove once
    ///   the transaction committed (``removeSealedFiles(_:)``).
    static func deleteUnlocated(_ candidates: Set<Int64>, db: Database) throws -> (count: Int, files: [String]) {
        let remaining = try db.cachedStatement(sql: "SELECT 1 FROM syncLocations WHERE messageID = ? LIMIT 1")
        var deleted = 0
        var files: [String] = []
        for id in candidates where try Bool.fetchOne(remaining, arguments: [id]) != true {
            let owned = try attachmentFiles(of: [id], db: db)
            if try MessageRecord.deleteOne(db, key: id) {
                deleted += 1
                files += owned
            }
        }
        return (deleted, files)
    }
}

/// A row of `syncFolders`, decoded strictly (see ``StrictRow``).
struct FolderRow: FetchableRecord, Sendable {
    var id: Int64
    var accountID: Int64
    var name: Data
    var uidValidity: Int64
    var highestUID: Int64
    var highestModSeq: Int64

    init(row: Row) throws {
        let row = try StrictRow(row, table: "syncFolders")
        id = row.id
        accountID = try row.int64("accountID")
        name = try row.blob("name")
        uidValidity = try row.int64("uidValidity")
        highestUID = try row.int64("highestUID")
        highestModSeq = try row.int64("highestModSeq")
    }
}
