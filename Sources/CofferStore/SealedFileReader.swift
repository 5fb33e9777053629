import CofferBlocking
import CofferCrypto
import CofferMIME

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Reads a sealed file beside the store (a draft attachment or an outbox message, streaming AEAD v1) back as
/// plaintext chunks of 64 KiB, verifying each as it goes: memory stays flat whatever the file's size. It conforms to
/// CofferMIME's `AttachmentChunkReader`, so the MIME writer (and the SMTP client) can stream it.
///
/// The reader holds only this file's own key (the stream's per-file key), never the MainKey or a subkey, so a send
/// that started may finish after the account locks without holding anything that opens another file.
///
/// Each ``nextChunk()`` is a blocking `read(2)` of 64 KiB and one AEAD open: stream it from the ``BlockingPool``
/// (docs/ARCHITECTURE.md, "Concurrency"), never from an event loop. Not thread-safe: one reader, one consumer.
///
/// - Warning: Chunks are handed out as they verify, before the end of the file has been seen. If
///   ``nextChunk()`` throws, everything read so far must be discarded: an SMTP client must abort the transaction
///   (never send the final `.`), a writer must delete its partial output.
public final class SealedFileReader: AttachmentChunkReader {
    /// The plaintext size in bytes, as recorded when the file was written (sealed in its record).
    public let size: Int64
    private let fd: Int32
    private var opener: StreamOpener
    private var pending: [UInt8]
    private var finished = false
    private let table: String
    private let id: Int64

    /// Opens `path` and checks its header against `key` and `context`; the first chunk is read ahead.
    init(
        path: String,
        key: EnvelopeKey,
        context: EnvelopeContext,
        size: Int64,
        table: String,
        id: Int64
    ) throws(StoreError) {
        self.table = table
        self.id = id
        self.size = size
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else {
            if errno == ENOENT { throw .corruptFile(table: table, id: id) }
            throw .io(operation: "open a sealed file of the store", errno: errno)
        }
        do {
            let header = try Self.readFull(fd, count: StreamingAEAD.headerCount)
            opener = try StreamOpener(key: key, context: context, header: header)
            pending = try Self.readFull(fd, count: Self.sealedChunk)
        } catch {
            close(fd)
            if case .io = error { throw .crypto(error) }
            throw .corruptFile(table: table, id: id)
        }
    }

    deinit { Glibc.close(fd) }

    /// The next verified chunk of plaintext (at most 64 KiB), or `nil` at the end.
    ///
    /// - Throws: ``StoreError/corruptFile(table:id:)`` when a chunk fails its check (changed, cut short, extended,
    ///   reordered); ``StoreError/crypto(_:)`` when reading fails.
    public func nextChunk() throws(StoreError) -> [UInt8]? {
        guard !finished else { return nil }
        let current = pending
        let next: [UInt8]
        do {
            next = current.count == Self.sealedChunk ? try Self.readFull(fd, count: Self.sealedChunk) : []
        } catch {
            throw .crypto(error)
        }
        let isLast = next.isEmpty
        do {
            let plain = try opener.open(current, isLast: isLast)
            pending = next
            finished = isLast
            return plain
        } catch {
            finished = true
            throw .corruptFile(table: table, id: id)
        }
    }

    /// Reads the whole file into memory (small files and tests).
    public func readAll() throws(StoreError) -> [UInt8] {
        var bytes: [UInt8] = []
        while let chunk = try nextChunk() { bytes += chunk }
        return bytes
    }

    static let sealedChunk = StreamingAEAD.chunkSize + StreamingAEAD.tagCount

    /// Reads until `count` bytes or the end of the file.
    static func readFull(_ fd: Int32, count: Int) throws(CofferCryptoError) -> [UInt8] {
        var source = FileDescriptorSource(fd: fd)
        return try StreamingAEAD.readFull(from: &source, count: count)
    }
}

/// A `ByteSource` over an `AttachmentChunkReader` (the MIME writer, a caller's reader); a reader's own error is kept in ``failure`` so the caller can report it as it was.
struct ChunkReaderSource: ByteSource {
    var reader: any AttachmentChunkReader
    private var buffer: [UInt8] = []
    private var offset = 0
    /// The reader's error, when it failed.
    private(set) var failure: (any Error)?

    init(_ reader: any AttachmentChunkReader) { self.reader = reader }

    mutating func read(into target: UnsafeMutableRawBufferPointer) throws(CofferCryptoError) -> Int {
        while offset >= buffer.count {
            let next: [UInt8]?
            do { next = try reader.nextChunk() } catch {
                failure = error
                throw .io(operation: "read the data to seal", errno: EIO)
            }
            guard let next else { return 0 }
            buffer = next
            offset = 0
        }
        let length = min(target.count, buffer.count - offset)
        buffer.withUnsafeBytes { source in
            target.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[offset..<offset + length]))
        }
        offset += length
        return length
    }
}

/// The MIME writer as an `AttachmentChunkReader`.
struct MessageWriterChunks: AttachmentChunkReader {
    var writer: MessageWriter

    mutating func nextChunk() throws(ComposeError) -> [UInt8]? { try writer.nextChunk() }
}

extension MailStore {
    /// An attachment read from the file at `path` each time the message is written (``enqueue(_:accountID:sendAfter:replacingDraft:)``
    /// reads it once, into the sealed outbox), with `read(2)` in chunks of 64 KiB. Blocking: it is read where the
    /// message is written, on the ``BlockingPool``.
    public static func fileAttachment(path: String, filename: String?, contentType: String) -> OutgoingAttachment {
        OutgoingAttachment(filename: filename, contentType: contentType) { () throws -> any AttachmentChunkReader in
            let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { throw StoreError.io(operation: "open the file to attach", errno: errno) }
            return OwnedFileChunks(fd: fd)
        }
    }
}

/// ``FileChunks`` over a descriptor it closes when it goes.
final class OwnedFileChunks: AttachmentChunkReader {
    private var chunks: FileChunks

    init(fd: Int32) { chunks = FileChunks(fd: fd) }

    deinit { Glibc.close(chunks.fd) }

    func nextChunk() throws(CofferCryptoError) -> [UInt8]? { try chunks.nextChunk() }
}

/// A file read with `read(2)` as an `AttachmentChunkReader`, in chunks of 64 KiB (the descriptor is the caller's).
struct FileChunks: AttachmentChunkReader {
    let fd: Int32

    mutating func nextChunk() throws(CofferCryptoError) -> [UInt8]? {
        let chunk = try SealedFileReader.readFull(fd, count: StreamingAEAD.chunkSize)
        return chunk.isEmpty ? nil : chunk
    }
}
