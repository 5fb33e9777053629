import CofferBlocking
import CofferCrypto
import CofferMIME
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

/// Draft record v1 and draft attachment record v1 (`docs/FORMAT.md`, "Drafts, contacts and the outbox").
enum DraftCoding {
    static let recordVersion = 1

    static func record(_ content: DraftContent) -> [UInt8] {
        var writer = CellWriter(capacity: 256 + content.text.utf8.count)
        writer.count(recordVersion)
        writer.addresses(content.from.map { [$0] } ?? [])
        writer.addresses(content.to)
        writer.addresses(content.cc)
        writer.addresses(content.bcc)
        writer.string(content.subject)
        writer.strings(content.inReplyTo)
        writer.strings(content.references)
        writer.string(content.text)
        return writer.bytes
    }

    static func content(_ plain: [UInt8]) throws(CellReader.Malformed) -> DraftContent {
        var reader = try CellReader(plain)
        guard try reader.count() == recordVersion else { throw CellReader.Malformed() }
        let from = try reader.addresses()
        guard from.count <= 1 else { throw CellReader.Malformed() }
        var content = DraftContent(from: from.first)
        content.to = try reader.addresses()
        content.cc = try reader.addresses()
        content.bcc = try reader.addresses()
        content.subject = try reader.requiredString()
        content.inReplyTo = try reader.strings()
        content.references = try reader.strings()
        content.text = try reader.requiredString()
        try reader.finish()
        return content
    }

    static func attachmentInfo(file: String, filename: String?, contentType: String, size: Int64) -> [UInt8] {
        var writer = CellWriter(capacity: 128)
        writer.count(recordVersion)
        writer.string(file)
        writer.string(filename)
        writer.string(contentType)
        writer.int64(size)
        return writer.bytes
    }

    static func attachmentInfo(
        _ plain: [UInt8]
    ) throws(CellReader.Malformed) -> (file: String, filename: String?, contentType: String, size: Int64) {
        var reader = try CellReader(plain)
        guard try reader.count() == recordVersion else { throw CellReader.Malformed() }
        let file = try reader.requiredString()
        let filename = try reader.string()
        let contentType = try reader.requiredString()
        let size = try reader.int64()
        guard size >= 0 else { throw CellReader.Malformed() }
        try reader.finish()
        return (file, filename, contentType, size)
    }
}

extension MailStore {
    // MARK: - Drafts

    /// Saves a draft in one transaction: a new one when `id` is `nil`, else replaces the content of draft `id`
    /// (its attachments stay). Everything the draft holds is sealed (draft record v1); only its times are clear.
    ///
    /// - Returns: The draft's id.
    /// - Throws: ``StoreError/draftNotFound(_:)`` for an `id` that does not exist, ``StoreError/locked``.
    @discardableResult
    public func saveDraft(_ content: DraftContent, id: Int64? = nil) async throws(StoreError) -> Int64 {
        let keys = try await keys()
        let plain = DraftCoding.record(content)
        let now = Schema.seconds(Date())
        return try await write { db in
            if let id {
                guard try Bool.fetchOne(db, sql: "SELECT 1 FROM drafts WHERE id = ?", arguments: [id]) == true else {
                    throw StoreError.draftNotFound(id)
                }
                try db.execute(
                    sql: "UPDATE drafts SET updated = ?, record = ? WHERE id = ?",
                    arguments: [now, try keys.seal(plain, .draftRecord, row: id), id]
                )
                return id
            }
            let id = try Schema.nextID(db, table: "drafts")
            try db.execute(
                sql: "INSERT INTO drafts (id, created, updated, record) VALUES (?, ?, ?, ?)",
                arguments: [id, now, now, try keys.seal(plain, .draftRecord, row: id)]
            )
            return id
        }
    }

    /// Every draft, most recently saved first: subject and recipients decrypted in memory only.
    ///
    /// - Throws: ``StoreError/corruptRecord(table:id:)`` when a draft's cell fails to open.
    public func drafts() async throws(StoreError) -> [DraftSummary] {
        let keys = try await keys()
        let rows = try await read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT d.id, d.updated, d.record,
                        (SELECT count(*) FROM draftAttachments a WHERE a.draftID = d.id) AS attachments
                    FROM drafts d ORDER BY d.updated DESC, d.id DESC
                    """
            ).map { row in
                let strict = try StrictRow(row, table: "drafts")
                return (
                    strict.id, try strict.int64("updated"), try strict.blob("record"), try strict.int64("attachments")
                )
            }
        }
        return try rows.map { (id, updated, record, attachments) throws(StoreError) in
            guard let content = keys.decode(record, .draftRecord, row: id, { plain in try DraftCoding.content(plain) })
            else {
                throw .corruptRecord(table: "drafts", id: id)
            }
            return DraftSummary(
                id: id,
                subject: content.subject,
                recipients: content.to + content.cc + content.bcc,
                attachmentCount: Int(attachments),
                updated: Date(timeIntervalSince1970: TimeInterval(updated))
            )
        }
    }

    /// One whole draft with its attachments' metadata.
    ///
    /// - Throws: ``StoreError/draftNotFound(_:)``, ``StoreError/corruptRecord(table:id:)``.
    public func draft(_ id: Int64) async throws(StoreError) -> Draft {
        let keys = try await keys()
        let found = try await read { db -> (Int64, Int64, Data, [DraftAttachmentRow])? in
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM drafts WHERE id = ?", arguments: [id]) else {
                return nil
            }
            let strict = try StrictRow(row, table: "drafts")
            let attachments = try Row.fetchAll(
                db,
                sql: "SELECT * FROM draftAttachments WHERE draftID = ? ORDER BY position, id",
                arguments: [id]
            ).map(DraftAttachmentRow.init)
            return (try strict.int64("created"), try strict.int64("updated"), try strict.blob("record"), attachments)
        }
        guard let (created, updated, record, attachmentRows) = found else { throw .draftNotFound(id) }
        guard let content = keys.decode(record, .draftRecord, row: id, { plain in try DraftCoding.content(plain) })
        else {
            throw .corruptRecord(table: "drafts", id: id)
        }
        var attachments: [DraftAttachment] = []
        for row in attachmentRows { attachments.append(try Self.draftAttachment(row, keys: keys).attachment) }
        return Draft(
            id: id,
            content: content,
            attachments: attachments,
            created: Date(timeIntervalSince1970: TimeInterval(created)),
            updated: Date(timeIntervalSince1970: TimeInterval(updated))
        )
    }

    /// Deletes a draft and its attachments: the rows in one transaction, then the sealed files (a crash between
    /// leaves files no row names, which the next open deletes).
    ///
    /// - Throws: ``StoreError/draftNotFound(_:)``.
    public func deleteDraft(_ id: Int64) async throws(StoreError) {
        _ = try await keys()
        let files = try await write { db in
            let files = try String.fetchAll(
                db,
                sql: "SELECT file FROM draftAttachments WHERE draftID = ?",
                arguments: [id]
            )
            try db.execute(sql: "DELETE FROM drafts WHERE id = ?", arguments: [id])
            guard db.changesCount > 0 else { throw StoreError.draftNotFound(id) }
            return files
        }
        await removeSealedFiles(files)
    }

    // MARK: - Draft attachments

    /// Seals an attachment into a file beside the store as it is read (streaming AEAD, memory flat whatever its
    /// size), then records it under draft `draftID` (after the draft's other attachments).
    ///
    /// - Parameters:
    ///   - draftID: The draft.
    ///   - attachment: Its file name, type and reader (`open` is called once, on the blocking pool).
    /// - Throws: ``StoreError/draftNotFound(_:)`` (the sealed file is then deleted), ``StoreError/io(operation:errno:)``
    ///   when the reader fails.
    @discardableResult
    public func addDraftAttachment(
        to draftID: Int64,
        _ attachment: OutgoingAttachment
    ) async throws(StoreError) -> DraftAttachment {
        let keys = try await keys()
        let folder = sealedFilesFolder
        let key = keys.fileKey(.draftAttachment)
        let open = attachment.open
        let (name, size) = try await BlockingPool.run { () throws(StoreError) -> (String, Int64) in
            let reader: any AttachmentChunkReader
            do { reader = try open() } catch {
                throw StoreError.io(operation: "read the attachment", errno: EIO)
            }
            var source = CountingSource(ChunkReaderSource(reader))
            do throws(CofferCryptoError) {
                return try Self.writeSealedFile(.draftAttachment, folder: folder, key: key, from: &source)
            } catch {
                if source.source.failure != nil { throw StoreError.io(operation: "read the attachment", errno: EIO) }
                throw .crypto(error)
            }
        }
        return try await recordDraftAttachment(
            draftID: draftID,
            file: name,
            size: size,
            filename: attachment.filename,
            contentType: attachment.contentType,
            keys: keys
        )
    }

    /// Seals the file at `path` as an attachment of draft `draftID`, streaming (see
    /// ``addDraftAttachment(to:_:)``).
    ///
    /// - Parameters:
    ///   - draftID: The draft.
    ///   - path: The file to attach; it is read once and never changed.
    ///   - filename: The name the recipient sees (`nil` for none).
    ///   - contentType: The `type/subtype`.
    @discardableResult
    public func addDraftAttachment(
        to draftID: Int64,
        contentsOf path: String,
        filename: String?,
        contentType: String = "application/octet-stream"
    ) async throws(StoreError) -> DraftAttachment {
        let keys = try await keys()
        let folder = sealedFilesFolder
        let key = keys.fileKey(.draftAttachment)
        let (name, size) = try await BlockingPool.run { () throws(StoreError) -> (String, Int64) in
            let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { throw StoreError.io(operation: "open the file to attach", errno: errno) }
            defer { Glibc.close(fd) }
            var source = CountingSource(FileDescriptorSource(fd: fd))
            do throws(CofferCryptoError) {
                return try Self.writeSealedFile(.draftAttachment, folder: folder, key: key, from: &source)
            } catch {
                throw .crypto(error)
            }
        }
        return try await recordDraftAttachment(
            draftID: draftID,
            file: name,
            size: size,
            filename: filename,
            contentType: contentType,
            keys: keys
        )
    }

    /// Removes one attachment from its draft (the row, then its sealed file).
    ///
    /// - Throws: ``StoreError/draftAttachmentNotFound(_:)``.
    public func removeDraftAttachment(_ id: Int64) async throws(StoreError) {
        _ = try await keys()
        let file = try await write { db in
            guard
                let file = try String.fetchOne(
                    db,
                    sql: "SELECT file FROM draftAttachments WHERE id = ?",
                    arguments: [id]
                )
            else { throw StoreError.draftAttachmentNotFound(id) }
            try db.execute(sql: "DELETE FROM draftAttachments WHERE id = ?", arguments: [id])
            return file
        }
        await removeSealedFiles([file])
    }

    /// A reader over one draft attachment's bytes, verified chunk by chunk.
    ///
    /// - Throws: ``StoreError/draftAttachmentNotFound(_:)``, ``StoreError/corruptRecord(table:id:)`` when its
    ///   metadata fails to open, ``StoreError/corruptFile(table:id:)`` when its file is missing or damaged.
    public func draftAttachmentReader(_ id: Int64) async throws(StoreError) -> sending SealedFileReader {
        let keys = try await keys()
        let row = try await read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM draftAttachments WHERE id = ?", arguments: [id])
                .map(DraftAttachmentRow.init)
        }
        guard let row else { throw .draftAttachmentNotFound(id) }
        let (attachment, file) = try Self.draftAttachment(row, keys: keys)
        return try SealedFileReader(
            path: "\(sealedFilesFolder)/\(file)",
            key: keys.fileKey(.draftAttachment),
            context: SealedFileKind.draftAttachment.context(file: file),
            size: attachment.size,
            table: "draftAttachments",
            id: id
        )
    }

    /// The attachments of draft `draftID` as the MIME writer takes them: each `open` reads its sealed file chunk
    /// by chunk, so the writer streams it.
    ///
    /// - Warning: Each attachment's `open` holds the draft attachments' streaming key until it is released, so that
    ///   it can open its file later; drop the values when the message is written.
    public func outgoingAttachments(ofDraft draftID: Int64) async throws(StoreError) -> [OutgoingAttachment] {
        let draft = try await draft(draftID)
        let keys = try await keys()
        let key = keys.fileKey(.draftAttachment)
        let folder = sealedFilesFolder
        let files = try await read { db in
            try String.fetchAll(
                db,
                sql: "SELECT file FROM draftAttachments WHERE draftID = ? ORDER BY position, id",
                arguments: [draftID]
            )
        }
        guard files.count == draft.attachments.count else { throw .corruptRecord(table: "drafts", id: draftID) }
        return zip(draft.attachments, files).map { attachment, file in
            OutgoingAttachment(filename: attachment.filename, contentType: attachment.contentType) {
                try SealedFileReader(
                    path: "\(folder)/\(file)",
                    key: key,
                    context: SealedFileKind.draftAttachment.context(file: file),
                    size: attachment.size,
                    table: "draftAttachments",
                    id: attachment.id
                )
            }
        }
    }

    /// Commits the row of a sealed attachment file; deletes the file when the draft is gone.
    private func recordDraftAttachment(
        draftID: Int64,
        file: String,
        size: Int64,
        filename: String?,
        contentType: String,
        keys: StoreKeys
    ) async throws(StoreError) -> DraftAttachment {
        let info = DraftCoding.attachmentInfo(file: file, filename: filename, contentType: contentType, size: size)
        do throws(StoreError) {
            return try await write { db in
                guard
                    try Bool.fetchOne(db, sql: "SELECT 1 FROM drafts WHERE id = ?", arguments: [draftID]) == true
                else { throw StoreError.draftNotFound(draftID) }
                let id = try Schema.nextID(db, table: "draftAttachments")
                let position =
                    try Int64.fetchOne(
                        db,
                        sql: "SELECT coalesce(max(position) + 1, 0) FROM draftAttachments WHERE draftID = ?",
                        arguments: [draftID]
                    ) ?? 0
                try db.execute(
                    sql: "INSERT INTO draftAttachments (id, draftID, position, file, info) VALUES (?, ?, ?, ?, ?)",
                    arguments: [
                        id, draftID, position, file,
                        try keys.seal(info, .draftAttachmentInfo, row: id, extra: String(draftID)),
                    ]
                )
                return DraftAttachment(
                    id: id,
                    draftID: draftID,
                    position: Int(position),
                    filename: filename,
                    contentType: contentType,
                    size: size
                )
            }
        } catch {
            await removeSealedFiles([file])
            throw error
        }
    }

    /// Opens a `draftAttachments` row's metadata; the sealed file name must be the row's.
    static func draftAttachment(
        _ row: DraftAttachmentRow,
        keys: StoreKeys
    ) throws(StoreError) -> (attachment: DraftAttachment, file: String) {
        guard
            let decoded = keys.decode(
                row.info,
                .draftAttachmentInfo,
                row: row.id,
                extra: String(row.draftID),
                { plain in try DraftCoding.attachmentInfo(plain) }
            ),
            decoded.file == row.file, isSealedFileName(row.file)
        else { throw .corruptRecord(table: "draftAttachments", id: row.id) }
        let attachment = DraftAttachment(
            id: row.id,
            draftID: row.draftID,
            position: Int(clamping: row.position),
            filename: decoded.filename,
            contentType: decoded.contentType,
            size: decoded.size
        )
        return (attachment, row.file)
    }
}

/// A row of `draftAttachments`, decoded strictly (see ``StrictRow``).
struct DraftAttachmentRow: Sendable {
    var id: Int64
    var draftID: Int64
    var position: Int64
    var file: String
    var info: Data

    init(row: Row) throws {
        let strict = try StrictRow(row, table: "draftAttachments")
        id = strict.id
        draftID = try strict.int64("draftID")
        position = try strict.int64("position")
        file = try strict.text("file")
        info = try strict.blob("info")
    }
}
