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

/// An attachment's body as its sealed `body` cell gives it: the content itself, or the sealed file that holds it
/// (migration `v6-attachment-files`).
enum AttachmentBody: Equatable {
    case inline([UInt8])
    case file(String, size: Int64)
}

/// Attachment file reference v1: the payload of the `body` cell of an attachment whose content is in a sealed file
/// (`docs/STORE.md`, "Schema (migration `v6-attachment-files`)"): empty bytes, the file's name, its plaintext size.
/// The empty bytes first make it unambiguous: read as an inline body it has trailing fields, and an inline body
/// read as a reference has no file name after its bytes (or non-empty bytes), so both fail.
enum AttachmentFileReference {
    static func payload(file: String, size: Int64) -> [UInt8] {
        var writer = CellWriter(capacity: 64)
        writer.raw([])
        writer.string(file)
        writer.int64(size)
        return writer.bytes
    }
}

/// A Sent copy read from its outbox file and not yet stored (``MailStore/prepareOutboxImport(_:flags:labels:)``):
/// its large attachments are already in sealed files, which ``MailStore/commitOutboxImport(_:)`` references and
/// ``MailStore/discardOutboxImport(_:)`` deletes.
public struct PreparedOutboxImport: Sendable {
    enum Content: Sendable {
        /// Parsed, with the sealed files of its spilled attachments.
        case scanned(PreparedMessage, files: [String])
        /// To be imported whole at the commit (the streaming pass could not reproduce it exactly).
        case whole(OutboxRow, size: Int64)
    }

    let content: Content
    let flags: MessageFlags
    let labels: [String]
}

extension MailStore {
    /// A base64 attachment whose decoded body grows past this many bytes goes to a sealed file of its own when a
    /// message is imported from the outbox (``importOutboxMessage(_:flags:labels:)``).
    public static let attachmentFileThreshold = 1 << 20

    /// The sealed files of the attachments of `messageIDs`, read inside the transaction that deletes them.
    static func attachmentFiles(of messageIDs: [Int64], db: Database) throws -> [String] {
        let statement = try db.cachedStatement(
            sql: "SELECT file FROM attachments WHERE messageID = ? AND file IS NOT NULL"
        )
        var files: [String] = []
        for id in messageIDs { files += try String.fetchAll(statement, arguments: [id]) }
        return files
    }

    /// Opens an attachment's `body` cell: its content, or the file its reference names (which must be the row's
    /// clear `file` column, so swapped clear columns are detected).
    static func attachmentBody(_ record: AttachmentRecord, keys: StoreKeys) throws -> AttachmentBody {
        let body = keys.decode(record.body, .attachmentBody, row: record.id, extra: String(record.messageID)) {
            plain -> AttachmentBody in
            var reader = try CellReader(plain)
            let content = try reader.raw()
            guard let file = record.file else {
                try reader.finish()
                return .inline(content)
            }
            guard content.isEmpty else { throw CellReader.Malformed() }
            let named = try reader.requiredString()
            let size = try reader.int64()
            try reader.finish()
            guard named == file, size >= 0, isSealedFileName(file),
                file.hasSuffix(SealedFileKind.attachmentFile.fileExtension)
            else { throw CellReader.Malformed() }
            return .file(file, size: size)
        }
        guard let body else { throw CellReader.Malformed() }
        return body
    }

    /// Reads a large attachment's sealed file whole, verifying every chunk, on the ``BlockingPool``.
    ///
    /// - Throws: ``StoreError/corruptFile(table:id:)`` when the file is missing, damaged or not `size` bytes long.
    func readAttachmentFile(_ file: String, size: Int64, id: Int64) async throws(StoreError) -> [UInt8] {
        let keys = try await keys()
        let path = "\(sealedFilesFolder)/\(file)"
        return try await BlockingPool.run { () throws(StoreError) -> [UInt8] in
            let reader = try SealedFileReader(
                path: path,
                key: keys.fileKey(.attachmentFile),
                context: SealedFileKind.attachmentFile.context(file: file),
                size: size,
                table: "attachments",
                id: id
            )
            var bytes: [UInt8] = []
            bytes.reserveCapacity(Int(clamping: size))
            while let chunk = try reader.nextChunk() {
                bytes += chunk
                guard bytes.count <= size else { throw .corruptFile(table: "attachments", id: id) }
            }
            guard bytes.count == size else { throw .corruptFile(table: "attachments", id: id) }
            return bytes
        }
    }

    /// Imports the message of outbox item `id` (its Sent copy) from its sealed file without holding it whole:
    /// ``prepareOutboxImport(_:flags:labels:)`` then ``commitOutboxImport(_:)``.
    ///
    /// - Throws: ``StoreError/outboxItemNotFound(_:)``, ``StoreError/corruptRecord(table:id:)``,
    ///   ``StoreError/corruptFile(table:id:)``, ``StoreError/locked``.
    public func importOutboxMessage(
        _ id: Int64,
        flags: MessageFlags = [],
        labels: [String] = []
    ) async throws(StoreError) -> ImportOutcome {
        try await commitOutboxImport(try await prepareOutboxImport(id, flags: flags, labels: labels))
    }

    /// Reads the message of outbox item `id` for its import, without storing anything yet and without holding it
    /// whole: one streaming pass computes its content hash and size and keeps everything but the bodies of base64
    /// parts that decode to more than ``attachmentFileThreshold`` bytes, which are decoded into sealed files of their
    /// own as they are read. What is kept is parsed as any message is, each spilled part's body standing for its
    /// file. ``commitOutboxImport(_:)`` then stores the message exactly as ``importMessage(_:)`` would store the same
    /// bytes (same cells, same content hash, so a later sync of the Sent folder finds it), except that those
    /// attachments' bodies are in files; ``discardOutboxImport(_:)`` deletes the files instead. Files of a
    /// preparation that is neither (a crash) are orphans, deleted by the sweep at open.
    ///
    /// A message the pass cannot reproduce exactly (a base64 body with anything but whole, clean lines once it is
    /// large, or a part the parser does not list as an attachment) is imported whole at the commit.
    ///
    /// - Throws: ``StoreError/outboxItemNotFound(_:)``, ``StoreError/corruptRecord(table:id:)``,
    ///   ``StoreError/corruptFile(table:id:)``, ``StoreError/locked``.
    public func prepareOutboxImport(
        _ id: Int64,
        flags: MessageFlags = [],
        labels: [String] = []
    ) async throws(StoreError) -> PreparedOutboxImport {
        let keys = try await keys()
        let row = try await outboxRow(id)
        let record = try Self.openOutboxRecord(row, keys: keys)
        let folder = sealedFilesFolder
        let size = record.size
        let whole = PreparedOutboxImport(content: .whole(row, size: size), flags: flags, labels: labels)
        let scanned = try await BlockingPool.run { () throws(StoreError) -> SpillingScan.Result? in
            let reader = try Self.outboxReader(row, size: size, folder: folder, keys: keys)
            var scan = SpillingScan(
                folder: folder,
                key: keys.fileKey(.attachmentFile),
                hash: keys.lookup.start(tag: HashTag.content)
            )
            return try scan.run(reader)
        }
        guard let scanned else { return whole }
        let spilledFiles = scanned.spills.map(\.file)
        let message: MIMEMessage
        do { message = try MIMEParser.parse(scanned.reduced) } catch {
            await removeSealedFiles(spilledFiles)
            return whole
        }
        // A PGP/MIME or inline PGP Sent copy (`--sign`, `--encrypt`) is imported whole, through the path that
        // decrypts it and checks its signatures.
        if Self.pgpMIMECiphertext(message) != nil || Self.inlineCiphertext(message) != nil
            || Self.hasEnclosedEncryptedPart(message) || Self.isPGPMIMESigned(message)
        {
            await removeSealedFiles(spilledFiles)
            return whole
        }
        var files: [[UInt8]: (file: String, size: Int64)] = [:]
        for spill in scanned.spills { files[spill.token] = (spill.file, spill.size) }
        let listed = message.attachments.filter { files[$0.body] != nil }.map(\.body)
        guard listed.count == files.count, Set(listed).count == files.count else {
            await removeSealedFiles(spilledFiles)
            return whole
        }
        let prepared = Self.prepare(
            message,
            contentHash: Data(scanned.contentHash.prefix(16)),
            size: scanned.size,
            flags: flags,
            labels: labels,
            keys: keys,
            now: Schema.seconds(Date()),
            files: files
        )
        return PreparedOutboxImport(content: .scanned(prepared, files: spilledFiles), flags: flags, labels: labels)
    }

    /// Stores a message read by ``prepareOutboxImport(_:flags:labels:)``. Its files are deleted when the message
    /// is not imported (it is already in the store, or the commit fails).
    ///
    /// - Throws: ``StoreError/locked`` when the account locked since the preparation (its files are deleted),
    ///   ``StoreError/corruptRecord(table:id:)``, ``StoreError/corruptFile(table:id:)``.
    public func commitOutboxImport(_ prepared: PreparedOutboxImport) async throws(StoreError) -> ImportOutcome {
        switch prepared.content {
        case .whole(let row, let size):
            return try await importOutboxMessageWhole(
                row,
                size: size,
                keys: try await keys(),
                flags: prepared.flags,
                labels: prepared.labels
            )
        case .scanned(let message, let files):
            let outcome: ImportOutcome
            do {
                let keys = try await keys()
                outcome = try await write { db in try Self.insert([.success(message)], keys: keys, db: db) }[0]
            } catch {
                await removeSealedFiles(files)
                throw error
            }
            if case .imported = outcome {} else { await removeSealedFiles(files) }
            return outcome
        }
    }

    /// Deletes the files of a message read by ``prepareOutboxImport(_:flags:labels:)`` and not to be stored.
    public func discardOutboxImport(_ prepared: PreparedOutboxImport) async {
        if case .scanned(_, let files) = prepared.content { await removeSealedFiles(files) }
    }

    /// The fallback of ``importOutboxMessage(_:flags:labels:)``: the whole message read into memory and imported
    /// (the row and its record's size as that call read them).
    private func importOutboxMessageWhole(
        _ row: OutboxRow,
        size: Int64,
        keys: StoreKeys,
        flags: MessageFlags,
        labels: [String]
    ) async throws(StoreError) -> ImportOutcome {
        let folder = sealedFilesFolder
        let bytes = try await BlockingPool.run { () throws(StoreError) -> [UInt8] in
            try Self.outboxReader(row, size: size, folder: folder, keys: keys).readAll()
        }
        return try await importMessage(RawMessage(bytes: bytes, flags: flags, labels: labels))
    }
}

/// Seals bytes pushed to it into a new sealed file of the store, the one writer of every sealed file (drafts'
/// attachments, outbox messages and large attachments; ``MailStore/writeSealedFile(_:folder:key:from:)`` pumps a
/// source through it): a temporary name (`O_EXCL`, 0600), 64 KiB chunks sealed as they fill, then `fsync`, rename
/// and folder `fsync` in ``finish()``. Dropped unfinished, it deletes its temporary file. Blocking: use it on the
/// ``BlockingPool``.
final class SealedFileWriter {
    /// The file's final name.
    let name: String
    private let folder: String
    private let temporary: String
    private let fd: Int32
    private var sealer: StreamSealer
    private var sink: FileDescriptorSink
    private var pending: [UInt8] = []
    /// Sealed chunks not written yet.
    private var batch: [UInt8] = []
    private var finished = false
    /// Plaintext bytes pushed so far.
    private(set) var size: Int64 = 0

    init(_ kind: SealedFileKind, folder: String, key: EnvelopeKey) throws(CofferCryptoError) {
        name = MailStore.newSealedFileName(kind)
        self.folder = folder
        temporary = SecureFile.temporaryPath(for: "\(folder)/\(name)")
        fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw .io(operation: "create a sealed file in the store", errno: errno) }
        sealer = StreamSealer(key: key, context: kind.context(file: name))
        sink = FileDescriptorSink(fd: fd)
        // Fully initialised here: if this throws, deinit closes and deletes the temporary file.
        try sink.write(sealer.header)
    }

    deinit {
        Glibc.close(fd)
        if !finished { unlink(temporary) }
    }

    /// Adds plaintext; every full chunk that more bytes follow is sealed and written.
    func append(_ bytes: [UInt8]) throws(CofferCryptoError) {
        size += Int64(bytes.count)
        let chunkSize = StreamingAEAD.chunkSize
        var input = bytes[...]
        // A chunk is the last exactly when nothing follows it, so a full chunk waits until a byte follows it.
        if !pending.isEmpty || input.count <= chunkSize {
            let taken = min(chunkSize - pending.count, input.count)
            pending += input.prefix(taken)
            input = input.dropFirst(taken)
            guard !input.isEmpty else { return }
            try write(try sealer.seal(pending, isLast: false))
            pending.removeAll(keepingCapacity: true)
        }
        // Whole chunks straight from the input, without going through `pending`.
        while input.count > chunkSize {
            try write(try sealer.seal(Array(input.prefix(chunkSize)), isLast: false))
            input = input.dropFirst(chunkSize)
        }
        pending += input
    }

    /// Writes sealed chunks in batches of about 1 MiB (fewer `write` calls).
    private func write(_ sealed: [UInt8]) throws(CofferCryptoError) {
        batch += sealed
        if batch.count >= 1 << 20 { try flushBatch() }
    }

    private func flushBatch() throws(CofferCryptoError) {
        guard !batch.isEmpty else { return }
        try sink.write(batch)
        batch.removeAll(keepingCapacity: true)
    }

    /// Seals the last chunk and stores the file under its final name.
    func finish() throws(CofferCryptoError) -> (name: String, size: Int64) {
        try write(try sealer.seal(pending, isLast: true))
        try flushBatch()
        pending = []
        guard fsync(fd) == 0 else { throw .io(operation: "flush a sealed file of the store", errno: errno) }
        guard rename(temporary, "\(folder)/\(name)") == 0 else {
            throw .io(operation: "store a sealed file", errno: errno)
        }
        finished = true
        try SecureFile.syncDirectory(folder)
        return (name, size)
    }
}

/// One streaming pass over a message (``MailStore/importOutboxMessage(_:flags:labels:)``): it hashes every byte,
/// keeps the lines of the message but the bodies of large base64 leaves, and decodes those into sealed files, each
/// replaced in what is kept by one base64 line of a random 16-byte token that stands for the file.
///
/// It follows the MIME structure line by line: a header section ends at its first empty line and is parsed by
/// ``MIMEParser`` itself (so content types and encodings are read as an import reads them); a multipart pushes its
/// delimiter; a line that is `--boundary` or `--boundary--` of an open multipart (trailing spaces and tabs allowed)
/// ends the current part. Enclosed messages are leaves. A leaf's body is spilled only while each of its lines is
/// clean base64 (whole quanta, no spaces, padding only at the end of the last data line), where decoding line by
/// line gives the bytes the parser's decoder gives for the whole body. Anything the pass cannot be sure of ends it
/// with `nil` (the caller imports the message whole); the parser's own reading of what is kept is checked by the
/// caller, which needs every token as an attachment body.
struct SpillingScan {
    struct Spill {
        var token: [UInt8]
        var file: String
        var size: Int64
    }

    struct Result: Sendable {
        var reduced: [UInt8]
        var size: Int64
        var contentHash: [UInt8]
        var spills: [(token: [UInt8], file: String, size: Int64)]
    }

    /// The leaf whose body is being read.
    private struct Leaf {
        /// Where its body starts in ``reduced``.
        var bodyStart: Int
        /// Whether every line so far is clean base64.
        var clean: Bool
        /// Whether a line ended with padding (only empty lines may follow).
        var padded = false
        /// Decoded bytes of the lines so far.
        var decoded = 0
        var writer: SealedFileWriter?
        /// Clean lines read since spilling began, without their line ends, decoded in batches (each line is whole
        /// quanta, so decoding them together gives what decoding each gives).
        var encoded: [UInt8] = []
    }

    /// Thrown inside the pass when it cannot go on exactly.
    private struct Unsure: Error {}

    let folder: String
    let key: EnvelopeKey
    var hash: HMAC<SHA256>
    var threshold = MailStore.attachmentFileThreshold
    /// Encoded bytes decoded at once while spilling (an instance constant: a static read on every line costs a
    /// `swift_once` call each time).
    private let decodeBatch = 65_536
    /// The most multipart levels followed; deeper ones end the pass (the parser's default limit is 64).
    static let maximumDepth = 32

    private var reduced: [UInt8] = []
    private var size: Int64 = 0
    private var delimiters: [[UInt8]] = []
    private var headerStart: Int? = 0
    private var leaf: Leaf?
    private var spills: [Spill] = []

    init(folder: String, key: EnvelopeKey, hash: HMAC<SHA256>) {
        self.folder = folder
        self.key = key
        self.hash = hash
    }

    /// Reads `reader` to its end. `nil` when the message must be imported whole (any file it made is deleted).
    mutating func run(_ reader: SealedFileReader) throws(StoreError) -> Result? {
        do {
            var carry: [UInt8] = []
            while let chunk = try reader.nextChunk() {
                hash.update(data: chunk)
                size += Int64(chunk.count)
                var start = 0
                while let newline = chunk[start...].firstIndex(of: 0x0A) {
                    if carry.isEmpty {
                        try line(chunk[start...newline])
                    } else {
                        carry += chunk[start...newline]
                        try line(carry[...])
                        carry = []
                    }
                    start = newline + 1
                }
                carry += chunk[start...]
            }
            if !carry.isEmpty { try line(carry[...]) }
            try endLeaf()
        } catch is Unsure {
            removeSpilled()
            return nil
        } catch let error as StoreError {
            removeSpilled()
            throw error
        } catch let error as CofferCryptoError {
            removeSpilled()
            throw .crypto(error)
        } catch {
            removeSpilled()
            throw .crypto(.io(operation: "import a sent message", errno: EIO))
        }
        return Result(
            reduced: reduced,
            size: size,
            contentHash: Array(hash.finalize()),
            spills: spills.map { ($0.token, $0.file, $0.size) }
        )
    }

    private mutating func removeSpilled() {
        leaf = nil
        for spill in spills { try? SecureFile.remove("\(folder)/\(spill.file)") }
        spills = []
    }

    /// One line with its line ending (the last line of the message may have none).
    private mutating func line(_ line: ArraySlice<UInt8>) throws {
        if let start = headerStart {
            reduced += line
            guard Self.isEmpty(line) else { return }
            try endHeaders(Array(reduced[start...]))
            return
        }
        if let (index, closing) = delimiter(line) {
            try endLeaf()
            delimiters.removeSubrange((closing ? index : index + 1)...)
            reduced += line
            headerStart = closing ? nil : reduced.count
            return
        }
        guard var current = leaf else {
            reduced += line
            return
        }
        leaf = nil
        defer { leaf = current }
        let quanta = cleanBase64(Self.content(line))
        if let writer = current.writer {
            guard let quanta, !current.padded || quanta.count == 0 else { throw Unsure() }
            current.encoded += Self.content(line)
            if current.encoded.count >= decodeBatch {
                try writer.append(TransferDecoding.base64(bytes: current.encoded))
                current.encoded.removeAll(keepingCapacity: true)
            }
            current.padded = current.padded || quanta.padded
            return
        }
        reduced += line
        guard current.clean, let quanta, !current.padded || quanta.count == 0 else {
            current.clean = false
            return
        }
        current.padded = current.padded || quanta.padded
        current.decoded += quanta.count
        if current.decoded > threshold {
            let writer = try SealedFileWriter(.attachmentFile, folder: folder, key: key)
            try writer.append(TransferDecoding.base64(bytes: Array(reduced[current.bodyStart...])))
            reduced.removeSubrange(current.bodyStart...)
            current.writer = writer
        }
    }

    /// The end of a header section: a multipart opens its delimiter; anything else is a leaf.
    private mutating func endHeaders(_ section: [UInt8]) throws {
        headerStart = nil
        let part: MIMEPart
        do { part = try MIMEParser.parse(section).root } catch { throw Unsure() }
        if part.contentType.type == "multipart" {
            guard let boundary = part.contentType.parameters["boundary"], !boundary.isEmpty,
                delimiters.count < Self.maximumDepth
            else { throw Unsure() }
            delimiters.append(Array("--\(boundary)".utf8))
            return
        }
        leaf = Leaf(bodyStart: reduced.count, clean: part.transferEncoding == "base64")
    }

    /// Ends the current leaf: a spilled body's file is stored and its token line put where the body was.
    private mutating func endLeaf() throws {
        guard let current = leaf else { return }
        leaf = nil
        guard let writer = current.writer else { return }
        try writer.append(TransferDecoding.base64(bytes: current.encoded))
        let (file, size) = try writer.finish()
        let token = SystemRandom.publicBytes(16)
        spills.append(Spill(token: token, file: file, size: size))
        reduced += Array(Data(token).base64EncodedString().utf8) + [0x0D, 0x0A]
    }

    /// The open multipart whose delimiter `line` is (innermost first), and whether it closes it.
    private func delimiter(_ line: ArraySlice<UInt8>) -> (index: Int, closing: Bool)? {
        guard line.count >= 3, line[line.startIndex] == 0x2D, line[line.startIndex + 1] == 0x2D else { return nil }
        var content = Self.content(line)
        while let last = content.last, last == 0x20 || last == 0x09 { content = content.dropLast() }
        for index in delimiters.indices.reversed() {
            let delimiter = delimiters[index]
            guard content.starts(with: delimiter) else { continue }
            let rest = content.dropFirst(delimiter.count)
            if rest.isEmpty { return (index, false) }
            if rest.elementsEqual([0x2D, 0x2D]) { return (index, true) }
        }
        return nil
    }

    /// A line without its CR LF or LF.
    private static func content(_ line: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var content = line
        if content.last == 0x0A { content = content.dropLast() }
        if content.last == 0x0D { content = content.dropLast() }
        return content
    }

    private static func isEmpty(_ line: ArraySlice<UInt8>) -> Bool { content(line).isEmpty }

    /// The decoded length of a clean base64 line (whole quanta of the alphabet, `=` only as the last one or two
    /// characters) and whether it is padded; `nil` for anything else.
    private func cleanBase64(_ content: ArraySlice<UInt8>) -> (count: Int, padded: Bool)? {
        guard content.count % 4 == 0 else { return nil }
        var padding = 0
        var end = content.endIndex
        while end > content.startIndex, padding < 2, content[end - 1] == 0x3D {
            padding += 1
            end -= 1
        }
        // Branch-free over the line: any byte outside the alphabet sets a bit.
        let outside = content[..<end].withUnsafeBufferPointer { bytes in
            base64Outside.withUnsafeBufferPointer { table in bytes.reduce(0) { $0 | table[Int($1)] } }
        }
        return outside == 0 ? (content.count / 4 * 3 - padding, padding > 0) : nil
    }

    /// 1 for each byte outside the base64 alphabet (padding included), 0 inside: an instance constant, which the
    /// check of every line reads without a `swift_once` call.
    private let base64Outside: [UInt8] = (0..<256).map { byte in
        SpillingScan.isBase64(UInt8(byte)) ? 0 : 1
    }

    private static func isBase64(_ byte: UInt8) -> Bool {
        (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || (0x30...0x39).contains(byte) || byte == 0x2B
            || byte == 0x2F
    }
}
