import CofferBlocking
import CofferCrypto
import CofferKeymaker
import GRDB
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The encrypted mail store of one account: a SQLite database (through GRDB) whose sensitive columns are sealed
/// envelopes under per-column subkeys of the account's MainKey, with a blind index for search.
///
/// Every operation first asks the account's ``MainKeySource`` for the MainKey, for the running task's ``KeyUse``
/// (a person's request counts as autolock activity, background work never does), so the store is unusable while
/// it is locked (``StoreError/locked``). Subkeys are derived once per unlock and reused for every cell; they are dropped as soon
/// as an operation finds the Keymaker locked, and by ``forgetKeys()``.
///
/// See `docs/STORE.md` for the schema, which columns are clear, and the cell and index formats.
public final class MailStore: Sendable {
    /// The database file's name inside the store folder.
    public static let databaseName = "mail.sqlite"
    /// The writer connection's page cache, in KiB (SQLite's default is 2,000).
    static let writerCacheKiB = 16384
    /// Messages per write transaction during batch imports.
    public static let defaultBatchSize = 500

    /// The store folder (mode 0700).
    public let folder: String
    /// Setting reversions and corrupt messages.
    public let events: AsyncStream<StoreEvent>

    let database: DatabasePool
    let keys: any MainKeySource
    let eventSink: AsyncStream<StoreEvent>.Continuation
    private let derivedKeys = DerivedKeyCache<StoreKeys>()
    /// The sealing step of every cell.
    private let cellCipher: any CellCipher

    /// Opens (creating it if needed) the store in `folder`, and runs pending migrations. Opening needs no key;
    /// every other operation does.
    ///
    /// SQLite runs in WAL mode with `secure_delete = ON` (freed pages are zeroed), `temp_store = MEMORY` (sorts and
    /// temporary indexes never reach a file) and `synchronous = NORMAL`; only sealed envelopes and the documented
    /// clear columns are ever written, so the WAL holds nothing else.
    ///
    /// - Parameters:
    ///   - folder: The store folder; created with mode 0700.
    ///   - keys: The account's key source (its ``AccountKeys``, or a ``Keymaker``).
    public convenience init(folder: String, keys: any MainKeySource) throws(StoreError) {
        try self.init(folder: folder, keys: keys, cellCipher: EnvelopeCellCipher())
    }

    /// Opens the store with another sealing step for its cells: only for `coffer-bench`, which compares the store
    /// with itself without sealing (``CellCipher``). Never used by the CLI.
    ///
    /// - Parameters:
    ///   - folder: The store folder; created with mode 0700.
    ///   - keys: The account's key source.
    ///   - cellCipher: The sealing step.
    @_spi(Benchmark) public init(folder: String, keys: any MainKeySource, cellCipher: any CellCipher) throws(StoreError)
    {
        self.cellCipher = cellCipher
        do {
            try SecureFile.makePrivateDirectory(folder)
        } catch {
            throw .crypto(error)
        }
        self.folder = folder
        self.keys = keys
        (events, eventSink) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(256))
        var configuration = Configuration()
        configuration.foreignKeysEnabled = true
        configuration.journalMode = .wal
        configuration.prepareDatabase { db in
            try db.execute(
                sql: """
                    PRAGMA secure_delete = ON;
                    PRAGMA temp_store = MEMORY;
                    PRAGMA synchronous = NORMAL;
                    PRAGMA journal_size_limit = 1048576;
                    """
            )
            // The writer's page cache holds the search index's b-tree pages that an import touches at random: at
            // SQLite's 2 MiB default a 10,000-message import spent about 8% of its time re-reading pages with
            // pread. Sealed cells and keyed hashes only; no plaintext is ever in a page.
            if !db.configuration.readonly { try db.execute(sql: "PRAGMA cache_size = -\(Self.writerCacheKiB)") }
        }
        do {
            database = try DatabasePool(path: "\(folder)/\(Self.databaseName)", configuration: configuration)
            try Schema.migrator.migrate(database)
        } catch {
            throw StoreError.wrap(error)
        }
        // Interrupted writes and deletions of sealed files, and sends of processes that died (docs/STORE.md).
        try Self.sweepSealedFiles(folder: folder, database: database)
        try Self.recoverInterruptedSends(database)
        // The folder is already private; the files are made owner-only too.
        for suffix in ["", "-wal", "-shm"] { chmod("\(folder)/\(Self.databaseName)\(suffix)", 0o600) }
    }

    deinit { eventSink.finish() }

    /// Drops the derived subkeys from memory now (for example when the Keymaker reports a lock); the next operation
    /// derives them again if the Keymaker is unlocked.
    public func forgetKeys() { derivedKeys.forget() }

    /// Writes the WAL back into the database file and truncates it, then drops the keys. Call before the process
    /// ends; the store must not be used afterwards.
    public func close() throws(StoreError) {
        forgetKeys()
        do {
            try database.writeWithoutTransaction { db in _ = try db.checkpoint(.truncate) }
            try database.close()
        } catch {
            throw StoreError.wrap(error)
        }
    }

    /// The keys for the current unlock.
    func keys() async throws(StoreError) -> StoreKeys {
        let cipher = cellCipher
        return try await derivedKeys.value(from: keys) { error in
            error == .locked ? .locked : .keymaker(error)
        } derive: {
            (mainKey) throws(StoreError) in
            try StoreKeys(mainKey: mainKey, cipher: cipher)
        }
    }

    /// Runs a read closure, mapping errors.
    ///
    /// On a thread of ``BlockingPool`` (where a request that may block runs) the read runs on that thread, which
    /// waits for a reader connection: the pool is there to wait. Anywhere else (an event loop) the task waits for
    /// GRDB's reader queue without holding the thread. The first saves two thread hops per read.
    func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws(StoreError) -> T {
        do {
            if BlockingPool.isCurrentThreadInPool { return try readHere(body) }
            return try await database.read(body)
        } catch {
            throw StoreError.wrap(error)
        }
    }

    /// GRDB's synchronous read, which runs `body` on the calling thread.
    private func readHere<T>(_ body: (Database) throws -> T) throws -> T { try database.read(body) }

    /// Runs a write transaction, mapping errors.
    func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws(StoreError) -> T {
        do {
            return try await database.write(body)
        } catch {
            throw StoreError.wrap(error)
        }
    }

    /// Marks messages corrupt (a clear flag) and reports them.
    func markCorrupt(_ ids: [Int64]) async {
        guard !ids.isEmpty else { return }
        let bit = MessageFlags.corrupt.rawValue
        _ = try? await write { db in
            for id in ids {
                try db.execute(sql: "UPDATE messages SET flags = flags | ? WHERE id = ?", arguments: [bit, id])
            }
        }
        for id in ids { eventSink.yield(.messageCorrupt(id)) }
    }
}
