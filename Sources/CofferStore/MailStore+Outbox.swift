import CofferBlocking
import CofferCrypto
import CofferMIME
import Crypto
import GRDB

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Outbox item record v1 (`docs/FORMAT.md`, "Drafts, contacts and the outbox").
enum OutboxCoding {
    static let recordVersion = 1

    /// The clear `state` column.
    enum State: Int64 {
        case queued = 0
        case sending = 1
        case failed = 2
        case sent = 3
    }

    struct Record: Sendable, Equatable {
        var file: String
        var size: Int64
        var envelope: MailEnvelope
        var messageID: String
        var subject: String
    }

    static func record(_ record: Record) -> [UInt8] {
        var writer = CellWriter(capacity: 256)
        writer.count(recordVersion)
        writer.string(record.file)
        writer.int64(record.size)
        writer.string(record.envelope.sender)
        writer.strings(record.envelope.recipients)
        writer.string(record.messageID)
        writer.string(record.subject)
        return writer.bytes
    }

    static func record(_ plain: [UInt8]) throws(CellReader.Malformed) -> Record {
        var reader = try CellReader(plain)
        guard try reader.count() == recordVersion else { throw CellReader.Malformed() }
        let file = try reader.requiredString()
        let size = try reader.int64()
        let sender = try reader.requiredString()
        let recipients = try reader.strings()
        let messageID = try reader.requiredString()
        let subject = try reader.requiredString()
        guard size >= 0, !recipients.isEmpty else { throw CellReader.Malformed() }
        try reader.finish()
        return Record(
            file: file,
            size: size,
            envelope: MailEnvelope(sender: sender, recipients: recipients),
            messageID: messageID,
            subject: subject
        )
    }
}

/// A row of `outbox`, decoded strictly (see ``StrictRow``).
struct OutboxRow: Sendable {
    var id: Int64
    var accountID: Int64
    var state: Int64
    var claimant: Int64
    var attempts: Int64
    var nextAttempt: Int64
    var created: Int64
    var file: String
    var record: Data
    var lastError: Data?

    init(row: Row) throws {
        let strict = try StrictRow(row, table: "outbox")
        id = strict.id
        accountID = try strict.int64("accountID")
        state = try strict.int64("state")
        claimant = try strict.int64("claimant")
        attempts = try strict.int64("attempts")
        nextAttempt = try strict.int64("nextAttempt")
        created = try strict.int64("created")
        file = try strict.text("file")
        record = try strict.blob("record")
        lastError = try strict.optionalBlob("lastError")
        guard OutboxCoding.State(rawValue: state) != nil else { throw DamagedRow(table: "outbox", id: id) }
    }
}

extension MailStore {
    /// The longest failure reason kept, in characters; longer ones are cut.
    public static let maximumOutboxReasonLength = 500

    // MARK: - Queueing

    /// Writes `message` once with the MIME writer and queues the bytes: they are sealed with the streaming AEAD into
    /// a file beside the store as they are written (memory stays flat for a 25 MB message), then the item's row is
    /// committed. Every attempt sends exactly these bytes, so a retry repeats the same `Message-ID`.
    ///
    /// - Parameters:
    ///   - message: The message; its attachments are read once, now.
    ///   - accountID: The store's account (`accounts.id`) to send it through.
    ///   - sendAfter: Not sent before this instant (the undo window of `--delay`); now by default.
    ///   - draftID: The draft this message was written from: it is deleted in the same transaction that queues
    ///     the message, so a crash leaves either the draft or the queued message, never neither.
    /// - Returns: The queued item.
    /// - Throws: ``StoreError/compose(_:)`` when the message cannot be written (a header injection, a bad address,
    ///   an attachment that cannot be read), ``StoreError/draftNotFound(_:)``, ``StoreError/locked``.
    @discardableResult
    public func enqueue(
        _ message: OutgoingMessage,
        accountID: Int64,
        sendAfter: Date = Date(),
        replacingDraft draftID: Int64? = nil
    ) async throws(StoreError) -> OutboxItem {
        let writer: UnwrittenMessage
        do throws(ComposeError) { writer = try UnwrittenMessage(message) } catch { throw .compose(error) }
        let queued = try await enqueue(
            writer,
            accountID: accountID,
            notBefore: sendAfter,
            draftID: draftID,
            claim: false
        )
        await removeSealedFiles(queued.draftFiles)
        return queued.item
    }

    /// Queues the message `writer` writes as ``enqueue(_:accountID:sendAfter:replacingDraft:)`` does, claimed for
    /// sending by this process in the same transaction (as ``claimNextDue(accountID:now:)`` would claim it: its
    /// first attempt), for a sender that streams a copy of the same writer to the server while the file is written
    /// (``ClaimedMessage``). The draft's sealed attachment files are not deleted: the sender's copy may still read
    /// them; it deletes them (``removeDraftFiles(_:)``) when its transaction is over, and a crash leaves them to the
    /// next open's sweep of orphans.
    ///
    /// - Throws: As ``enqueue(_:accountID:sendAfter:replacingDraft:)``.
    package func enqueueClaimed(
        _ writer: UnwrittenMessage,
        accountID: Int64,
        replacingDraft draftID: Int64?
    ) async throws(StoreError) -> ClaimedMessage {
        try await enqueue(writer, accountID: accountID, notBefore: Date(), draftID: draftID, claim: true)
    }

    /// Deletes draft attachment files that ``enqueueClaimed(_:accountID:replacingDraft:)`` left for the sender.
    package func removeDraftFiles(_ names: [String]) async { await removeSealedFiles(names) }

    private func enqueue(
        _ unwritten: UnwrittenMessage,
        accountID: Int64,
        notBefore: Date,
        draftID: Int64?,
        claim: Bool
    ) async throws(StoreError) -> ClaimedMessage {
        let keys = try await keys()
        let folder = sealedFilesFolder
        let key = keys.fileKey(.outboxMessage)
        let (envelope, messageID) = (unwritten.writer.envelope, unwritten.writer.messageID)
        guard !envelope.recipients.isEmpty else { throw StoreError.invalidArgument("a message needs a recipient") }
        let subject = OutgoingMessage.headerSafe(unwritten.subject)
        let (written, digest) = try await BlockingPool.run {
            () throws(StoreError) -> (OutboxCoding.Record, [UInt8]) in
            var source = CountingSource(
                DigestingSource(ChunkReaderSource(MessageWriterChunks(writer: unwritten.writer)))
            )
            do throws(CofferCryptoError) {
                let (name, size) = try Self.writeSealedFile(.outboxMessage, folder: folder, key: key, from: &source)
                let record = OutboxCoding.Record(
                    file: name,
                    size: size,
                    envelope: envelope,
                    messageID: messageID,
                    subject: subject
                )
                return (record, source.source.digest.finalized())
            } catch {
                if let failure = source.source.source.failure as? ComposeError { throw StoreError.compose(failure) }
                throw .crypto(error)
            }
        }
        let now = Schema.seconds(Date())
        let plain = OutboxCoding.record(written)
        let (state, claimant, attempts) =
            claim
            ? (OutboxCoding.State.sending, SecureFile.processClaim(), Int64(1))
            : (OutboxCoding.State.queued, Int64(0), Int64(0))
        let (row, draftFiles): (OutboxRow, [String])
        do throws(StoreError) {
            (row, draftFiles) = try await write { db in
                var draftFiles: [String] = []
                if let draftID {
                    draftFiles = try String.fetchAll(
                        db,
                        sql: "SELECT file FROM draftAttachments WHERE draftID = ?",
                        arguments: [draftID]
                    )
                    try db.execute(sql: "DELETE FROM drafts WHERE id = ?", arguments: [draftID])
                    guard db.changesCount > 0 else { throw StoreError.draftNotFound(draftID) }
                }
                let id = try Schema.nextID(db, table: "outbox")
                try db.execute(
                    sql: """
                        INSERT INTO outbox (id, accountID, state, claimant, attempts, nextAttempt, created, file,
                            record, lastError)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)
                        """,
                    arguments: [
                        id, accountID, state.rawValue, claimant, attempts, Schema.seconds(notBefore), now,
                        written.file, try keys.seal(plain, .outboxRecord, row: id),
                    ]
                )
                let row = try Row.fetchOne(db, sql: "SELECT * FROM outbox WHERE id = ?", arguments: [id])!
                return (try OutboxRow(row: row), draftFiles)
            }
        } catch {
            await removeSealedFiles([written.file])
            throw error
        }
        return ClaimedMessage(item: try Self.outboxItem(row, keys: keys), digest: digest, draftFiles: draftFiles)
    }

    // MARK: - Sending

    /// Atomically moves the oldest due queued item (its next attempt at or before `now`) to sending, counts the
    /// attempt, and returns it; `nil` when nothing is due. The claim names this process: if it dies before
    /// ``markSent(_:)`` or ``markFailed(_:reason:permanent:retryAt:)``, the item returns to queued at the next
    /// open of the store or ``recoverInterrupted()``.
    ///
    /// Delivery is at least once: a process killed after the server's final reply to `DATA` and before
    /// ``markSent(_:)`` commits has sent the message, and it is sent again (the same bytes, the same
    /// `Message-ID`, so recipients' clients can tell).
    ///
    /// - Parameters:
    ///   - accountID: Only this account's items; any account's when `nil`.
    ///   - now: The current time.
    /// - Throws: ``StoreError/locked``. An item whose record fails to open is marked failed (with no reason) and
    ///   skipped.
    public func claimNextDue(accountID: Int64? = nil, now: Date = Date()) async throws(StoreError) -> OutboxItem? {
        let keys = try await keys()
        let seconds = Schema.seconds(now)
        let claimant = SecureFile.processClaim()
        return try await write { db -> OutboxItem? in
            while true {
                var sql = "SELECT * FROM outbox WHERE state = ? AND nextAttempt <= ?"
                var arguments: StatementArguments = [OutboxCoding.State.queued.rawValue, seconds]
                if let accountID {
                    sql += " AND accountID = ?"
                    arguments += [accountID]
                }
                sql += " ORDER BY nextAttempt, id LIMIT 1"
                guard let found = try Row.fetchOne(db, sql: sql, arguments: arguments) else { return nil }
                var row = try OutboxRow(row: found)
                guard var item = try? Self.outboxItem(row, keys: keys) else {
                    try db.execute(
                        sql: "UPDATE outbox SET state = ?, claimant = 0, lastError = NULL WHERE id = ?",
                        arguments: [OutboxCoding.State.failed.rawValue, row.id]
                    )
                    continue
                }
                row.attempts += 1
                try db.execute(
                    sql: "UPDATE outbox SET state = ?, claimant = ?, attempts = ? WHERE id = ?",
                    arguments: [OutboxCoding.State.sending.rawValue, claimant, row.attempts, row.id]
                )
                item.state = .sending
                item.attempts = Int(clamping: row.attempts)
                return item
            }
        }
    }

    /// A reader over an item's RFC 5322 bytes, verified chunk by chunk as they are read (hand it to the SMTP
    /// client's `DATA`, which dot-stuffs). It holds only this file's key, so a send that started can finish after
    /// the account locks.
    ///
    /// - Warning: If the reader throws, abort the SMTP transaction: never end `DATA` with what was read so far.
    /// - Throws: ``StoreError/outboxItemNotFound(_:)``, ``StoreError/corruptRecord(table:id:)``,
    ///   ``StoreError/corruptFile(table:id:)``, ``StoreError/locked``.
    public func openOutboxMessage(_ id: Int64) async throws(StoreError) -> sending SealedFileReader {
        let keys = try await keys()
        let row = try await outboxRow(id)
        let record = try Self.openOutboxRecord(row, keys: keys)
        return try Self.outboxReader(row, size: record.size, folder: sealedFilesFolder, keys: keys)
    }

    /// The reader of an outbox row's sealed file, `size` plaintext bytes long (from its record). Opens the file.
    static func outboxReader(
        _ row: OutboxRow,
        size: Int64,
        folder: String,
        keys: StoreKeys
    ) throws(StoreError) -> SealedFileReader {
        try SealedFileReader(
            path: "\(folder)/\(row.file)",
            key: keys.fileKey(.outboxMessage),
            context: SealedFileKind.outboxMessage.context(file: row.file),
            size: size,
            table: "outbox",
            id: row.id
        )
    }

    /// Records that the server accepted item `id` (it must be sending): its state becomes sent and its sealed
    /// file stays, so the Sent copy can be stored from the same bytes; ``removeSent(_:)`` ends it. Needs no key
    /// (a send that started may end after the account locked).
    ///
    /// - Throws: ``StoreError/outboxItemNotFound(_:)``, ``StoreError/invalidArgument(_:)`` when it is not being sent.
    public func markSent(_ id: Int64) async throws(StoreError) {
        try await transition(id, from: [.sending]) { db in
            try db.execute(
                sql: "UPDATE outbox SET state = ?, claimant = 0, lastError = NULL WHERE id = ?",
                arguments: [OutboxCoding.State.sent.rawValue, id]
            )
        }
    }

    /// Deletes a sent item (its row, then its sealed file) once its Sent copy is stored. Needs no key.
    ///
    /// - Throws: ``StoreError/outboxItemNotFound(_:)``, ``StoreError/invalidArgument(_:)`` when it is not sent.
    public func removeSent(_ id: Int64) async throws(StoreError) {
        let file = try await transition(id, from: [.sent]) { db in
            try db.execute(sql: "DELETE FROM outbox WHERE id = ?", arguments: [id])
        }
        await removeSealedFiles([file])
    }

    /// Records a failed attempt of item `id` (it must be sending). With `permanent` (a 5xx reply) or no `retryAt`
    /// the item becomes failed and stays until ``retry(_:)`` or ``cancel(_:)``; otherwise it is queued again for
    /// `retryAt` (see ``OutboxBackoff``).
    ///
    /// The reason is sealed when the account is unlocked; while it is locked (a send that outlived the unlock) the
    /// state is recorded all the same, without the reason.
    ///
    /// - Parameters:
    ///   - id: The item.
    ///   - reason: Why, for the person: the server's reply or the network error, never a password. Control
    ///     characters are replaced by spaces and it is cut to ``maximumOutboxReasonLength`` characters.
    ///   - permanent: Whether the server refused it for good.
    ///   - retryAt: When to try again, for a temporary failure.
    /// - Throws: ``StoreError/outboxItemNotFound(_:)``, ``StoreError/invalidArgument(_:)`` when it is not being sent.
    public func markFailed(_ id: Int64, reason: String, permanent: Bool, retryAt: Date?) async throws(StoreError) {
        let keys = try? await keys()
        let text = Self.sanitizedReason(reason)
        let next = retryAt.map(Schema.seconds)
        try await transition(id, from: [.sending]) { db in
            let sealed = try keys?.seal(CellWriter.text(text), .outboxError, row: id)
            if permanent || next == nil {
                try db.execute(
                    sql: "UPDATE outbox SET state = ?, claimant = 0, lastError = ? WHERE id = ?",
                    arguments: [OutboxCoding.State.failed.rawValue, sealed, id]
                )
            } else {
                try db.execute(
                    sql: "UPDATE outbox SET state = ?, claimant = 0, nextAttempt = ?, lastError = ? WHERE id = ?",
                    arguments: [OutboxCoding.State.queued.rawValue, next, sealed, id]
                )
            }
        }
    }

    // MARK: - A person's actions

    /// Takes a queued or failed item back: deletes its row, then its sealed file.
    ///
    /// - Throws: ``StoreError/outboxItemNotFound(_:)``, ``StoreError/outboxItemBusy(_:)`` while it is being sent or
    ///   once it was sent.
    public func cancel(_ id: Int64) async throws(StoreError) {
        _ = try await keys()
        let file = try await transition(id, from: [.queued, .failed]) { db in
            try db.execute(sql: "DELETE FROM outbox WHERE id = ?", arguments: [id])
        }
        await removeSealedFiles([file])
    }

    /// Queues a failed (or queued) item for an attempt now, with its attempts counted from zero again.
    ///
    /// - Throws: ``StoreError/outboxItemNotFound(_:)``, ``StoreError/outboxItemBusy(_:)`` while it is being sent or
    ///   once it was sent.
    public func retry(_ id: Int64, now: Date = Date()) async throws(StoreError) {
        _ = try await keys()
        let seconds = Schema.seconds(now)
        try await transition(id, from: [.queued, .failed]) { db in
            try db.execute(
                sql: "UPDATE outbox SET state = ?, attempts = 0, nextAttempt = ?, lastError = NULL WHERE id = ?",
                arguments: [OutboxCoding.State.queued.rawValue, seconds, id]
            )
        }
    }

    /// Every outbox item, oldest first.
    ///
    /// - Throws: ``StoreError/corruptRecord(table:id:)`` when an item's record fails to open (``cancel(_:)`` can
    ///   still remove it).
    public func outbox() async throws(StoreError) -> [OutboxItem] {
        let keys = try await keys()
        let rows = try await read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM outbox ORDER BY created, id").map(OutboxRow.init)
        }
        return try rows.map { row throws(StoreError) in try Self.outboxItem(row, keys: keys) }
    }

    /// How many items are in each state, from the clear columns: works while the account is locked.
    public func outboxCounts() async throws(StoreError) -> OutboxCounts {
        let rows = try await read { db in
            try Row.fetchAll(db, sql: "SELECT state, count(*) FROM outbox GROUP BY state").map { row in
                (row[0] as DatabaseValue, row[1] as DatabaseValue)
            }
        }
        var counts = OutboxCounts()
        for (state, count) in rows {
            guard case .int64(let code) = state.storage, case .int64(let total) = count.storage else { continue }
            switch OutboxCoding.State(rawValue: code) {
            case .queued: counts.queued += Int(total)
            case .sending: counts.sending += Int(total)
            case .failed: counts.failed += Int(total)
            case .sent: counts.sent += Int(total)
            case nil: break
            }
        }
        return counts
    }

    /// The earliest next attempt of a queued item (of `accountID`, when given), from the clear columns: when the
    /// sender should wake up. `nil` when nothing is queued.
    public func nextOutboxAttempt(accountID: Int64? = nil) async throws(StoreError) -> Date? {
        let seconds = try await read { db in
            if let accountID {
                return try Int64.fetchOne(
                    db,
                    sql: "SELECT min(nextAttempt) FROM outbox WHERE state = ? AND accountID = ?",
                    arguments: [OutboxCoding.State.queued.rawValue, accountID]
                )
            }
            return try Int64.fetchOne(
                db,
                sql: "SELECT min(nextAttempt) FROM outbox WHERE state = ?",
                arguments: [OutboxCoding.State.queued.rawValue]
            )
        }
        return seconds.map { Date(timeIntervalSince1970: TimeInterval($0)) }
    }

    /// Returns to queued every item left sending by a process that no longer runs (killed, crashed, powered off).
    /// Runs when the store is opened; needs no key.
    ///
    /// - Returns: How many items were returned to the queue.
    @discardableResult
    public func recoverInterrupted() async throws(StoreError) -> Int {
        let database = database
        do {
            return try await BlockingPool.run { () throws(StoreError) -> Int in
                try Self.recoverInterruptedSends(database)
            }
        }
    }

    // MARK: - Internals

    /// ``recoverInterrupted()`` on an open database (also at open).
    @discardableResult
    static func recoverInterruptedSends(_ database: DatabasePool) throws(StoreError) -> Int {
        do {
            // Most opens find nothing sending: look first, so an open takes the write lock only when it must.
            let sending = try database.read { db in
                try Int.fetchOne(
                    db,
                    sql: "SELECT count(*) FROM outbox WHERE state = ?",
                    arguments: [OutboxCoding.State.sending.rawValue]
                ) ?? 0
            }
            guard sending > 0 else { return 0 }
            return try database.write { db in
                let claimed = try Row.fetchAll(
                    db,
                    sql: "SELECT id, claimant FROM outbox WHERE state = ?",
                    arguments: [OutboxCoding.State.sending.rawValue]
                )
                var recovered = 0
                for row in claimed {
                    guard case .int64(let id) = (row[0] as DatabaseValue).storage else { continue }
                    if case .int64(let claimant) = (row[1] as DatabaseValue).storage,
                        SecureFile.isAlive(claim: claimant)
                    {
                        continue
                    }
                    try db.execute(
                        sql: "UPDATE outbox SET state = ?, claimant = 0 WHERE id = ?",
                        arguments: [OutboxCoding.State.queued.rawValue, id]
                    )
                    recovered += 1
                }
                return recovered
            }
        } catch {
            throw StoreError.wrap(error)
        }
    }

    /// Runs `change` in a transaction if item `id` is in one of `states`; returns its file name.
    @discardableResult
    private func transition(
        _ id: Int64,
        from states: Set<OutboxCoding.State>,
        _ change: @escaping @Sendable (Database) throws -> Void
    ) async throws(StoreError) -> String {
        try await write { db in
            guard let found = try Row.fetchOne(db, sql: "SELECT * FROM outbox WHERE id = ?", arguments: [id]) else {
                throw StoreError.outboxItemNotFound(id)
            }
            let row = try OutboxRow(row: found)
            let state = OutboxCoding.State(rawValue: row.state)!
            guard states.contains(state) else {
                if states.contains(.queued) { throw StoreError.outboxItemBusy(id) }
                throw StoreError.invalidArgument("outbox item \(id) is not in a state that allows this")
            }
            try change(db)
            return row.file
        }
    }

    func outboxRow(_ id: Int64) async throws(StoreError) -> OutboxRow {
        let row = try await read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM outbox WHERE id = ?", arguments: [id]).map(OutboxRow.init)
        }
        guard let row else { throw .outboxItemNotFound(id) }
        return row
    }

    /// Opens an item's record; its file name must be the row's.
    static func openOutboxRecord(_ row: OutboxRow, keys: StoreKeys) throws(StoreError) -> OutboxCoding.Record {
        guard
            let record = keys.decode(
                row.record,
                .outboxRecord,
                row: row.id,
                { plain in try OutboxCoding.record(plain) }
            ),
            record.file == row.file, isSealedFileName(row.file)
        else { throw .corruptRecord(table: "outbox", id: row.id) }
        return record
    }

    static func outboxItem(_ row: OutboxRow, keys: StoreKeys) throws(StoreError) -> OutboxItem {
        let record = try openOutboxRecord(row, keys: keys)
        let state: OutboxState
        switch OutboxCoding.State(rawValue: row.state)! {
        case .queued: state = .queued
        case .sending: state = .sending
        case .sent: state = .sent
        case .failed:
            var reason: String?
            if let sealed = row.lastError {
                guard let text = keys.decode(sealed, .outboxError, row: row.id, CellReader.text) else {
                    throw .corruptRecord(table: "outbox", id: row.id)
                }
                reason = text
            }
            state = .failed(reason: reason)
        }
        return OutboxItem(
            id: row.id,
            accountID: row.accountID,
            state: state,
            attempts: Int(clamping: row.attempts),
            nextAttempt: Date(timeIntervalSince1970: TimeInterval(row.nextAttempt)),
            created: Date(timeIntervalSince1970: TimeInterval(row.created)),
            envelope: record.envelope,
            messageID: record.messageID,
            subject: record.subject,
            size: record.size
        )
    }

    /// Control characters become spaces; at most ``maximumOutboxReasonLength`` characters.
    static func sanitizedReason(_ reason: String) -> String {
        var scalars = String.UnicodeScalarView()
        for scalar in reason.unicodeScalars {
            let value = scalar.value
            let control =
                value < 0x20 || value == 0x7F || (0x80...0x9F).contains(value) || value == 0x2028
                || value == 0x2029
            scalars.append(control ? " " : scalar)
        }
        let text = String(scalars).trimmingCharacters(in: .whitespaces)
        return text.count > maximumOutboxReasonLength ? String(text.prefix(maximumOutboxReasonLength)) : text
    }
}

/// A MIME writer that has not written anything yet, with its message's subject: it holds only its message's
/// (`Sendable`) parts until its first chunk is read, so it can be handed to the thread that writes it, and each copy
/// of it writes the same bytes (the same `Message-ID`, `Date` and boundaries), opening the attachments itself.
package struct UnwrittenMessage: @unchecked Sendable {
    /// The writer, before its first chunk.
    package let writer: MessageWriter
    /// The message's subject, as typed.
    package let subject: String

    /// The writer of `message`.
    ///
    /// - Throws: The writer's refusal (a header injection, a bad address).
    package init(_ message: OutgoingMessage) throws(ComposeError) {
        writer = try MessageWriter(message)
        subject = message.subject
    }
}

/// A message queued and claimed by ``MailStore/enqueueClaimed(_:accountID:replacingDraft:)``.
package struct ClaimedMessage: Sendable {
    /// The item, sending, its first attempt counted.
    package var item: OutboxItem
    /// The SHA-256 of the bytes in its sealed file (``MessageDigest``): a copy streamed from another writer must
    /// have the same before its end is sent.
    package var digest: [UInt8]
    /// The draft's sealed attachment files, to delete once nothing reads them (``MailStore/removeDraftFiles(_:)``).
    package var draftFiles: [String]
}

/// SHA-256 over a message's bytes as they are written.
package struct MessageDigest {
    private var hash = SHA256()

    package init() {}

    /// Adds `bytes`.
    package mutating func update(_ bytes: UnsafeRawBufferPointer) { hash.update(bufferPointer: bytes) }

    /// The digest of everything added.
    package func finalized() -> [UInt8] { Array(hash.finalize()) }
}

/// A source that hashes what it hands out (``MessageDigest``).
struct DigestingSource<Source: ByteSource>: ByteSource {
    var source: Source
    private(set) var digest = MessageDigest()

    init(_ source: Source) { self.source = source }

    mutating func read(into buffer: UnsafeMutableRawBufferPointer) throws(CofferCryptoError) -> Int {
        let got = try source.read(into: buffer)
        digest.update(UnsafeRawBufferPointer(rebasing: buffer[0..<got]))
        return got
    }
}
