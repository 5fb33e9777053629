import CofferBlocking
import CofferCrypto
import GRDB

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The sealed files beside the database: draft attachments, outbox messages and the large attachments of stored
/// messages (migration `v6-attachment-files`), one streaming-AEAD file each in `<store folder>/outgoing`
/// (`docs/STORE.md`, "Outgoing files").
///
/// A file is written to a temporary name (`O_EXCL`, 0600), `fsync`ed, renamed to its final name (32 random hex
/// digits and the kind's extension) and the folder `fsync`ed, and only then is the row that names it committed. A
/// file is deleted only after the transaction that dropped its row committed. So a crash leaves at most a file that
/// no row names, never a row without its file; such orphans (and temporary files of dead writers) are deleted when
/// the store is opened, once they are a minute old (a younger one may be another process's write about to commit).
extension MailStore {
    /// The folder of sealed files inside the store folder.
    public static let sealedFilesFolderName = "outgoing"
    /// How old an unreferenced file must be before the sweep at open deletes it.
    static let orphanMinimumAge = 60

    /// The folder of sealed files.
    var sealedFilesFolder: String { "\(folder)/\(Self.sealedFilesFolderName)" }

    /// Creates the folder if needed and deletes what interrupted writes and deletions left (no key needed).
    static func sweepSealedFiles(folder: String, database: DatabasePool) throws(StoreError) {
        let files = "\(folder)/\(sealedFilesFolderName)"
        do {
            try SecureFile.makePrivateDirectory(files)
            try SecureFile.removeTemporaryLeftovers(in: files)
        } catch {
            throw .crypto(error)
        }
        let referenced: Set<String>
        do {
            referenced = try database.read { db in
                Set(
                    try String.fetchAll(
                        db,
                        sql: """
                            SELECT file FROM draftAttachments UNION SELECT file FROM outbox
                            UNION SELECT file FROM attachments WHERE file IS NOT NULL
                            """
                    )
                )
            }
        } catch {
            throw StoreError.wrap(error)
        }
        let names: [String]
        do { names = try SecureFile.list(files) } catch { throw .crypto(error) }
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        for name in names where isSealedFileName(name) && !referenced.contains(name) {
            var info = stat()
            guard lstat("\(files)/\(name)", &info) == 0, info.st_mode & S_IFMT == S_IFREG,
                Int(now.tv_sec) - Int(info.st_mtim.tv_sec) >= orphanMinimumAge
            else { continue }
            do { try SecureFile.remove("\(files)/\(name)") } catch { throw .crypto(error) }
        }
    }

    /// Whether `name` is a final sealed file's name: 32 lower-case hex digits and a known extension.
    static func isSealedFileName(_ name: String) -> Bool {
        for kind in SealedFileKind.allCases where name.hasSuffix(kind.fileExtension) {
            let stem = name.utf8.dropLast(kind.fileExtension.utf8.count)
            return stem.count == 32 && stem.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
        }
        return false
    }

    /// A fresh random name for a sealed file of `kind`.
    static func newSealedFileName(_ kind: SealedFileKind) -> String {
        var random = SystemRandomNumberGenerator()
        let high = String(random.next() as UInt64, radix: 16)
        let low = String(random.next() as UInt64, radix: 16)
        func padded(_ text: String) -> String { String(repeating: "0", count: 16 - text.count) + text }
        return padded(high) + padded(low) + kind.fileExtension
    }

    /// Seals everything `source` yields into a new file of `kind` through a ``SealedFileWriter`` (temporary name,
    /// `fsync`, rename, folder `fsync`) and returns its name and the plaintext size. Blocking: call on the
    /// ``BlockingPool``.
    static func writeSealedFile<Source: ByteSource>(
        _ kind: SealedFileKind,
        folder: String,
        key: EnvelopeKey,
        from source: inout CountingSource<Source>
    ) throws(CofferCryptoError) -> (name: String, size: Int64) {
        let writer = try SealedFileWriter(kind, folder: folder, key: key)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: StreamingAEAD.chunkSize, alignment: 1)
        defer {
            buffer.initializeMemory(as: UInt8.self, repeating: 0)
            buffer.deallocate()
        }
        while true {
            let count = try source.read(into: buffer)
            if count == 0 { break }
            try writer.append(Array(buffer[0..<count]))
        }
        return try writer.finish()
    }

    /// Deletes sealed files whose rows are gone (after the deleting transaction committed). A failure leaves an
    /// orphan, which the next open deletes.
    func removeSealedFiles(_ names: [String]) async {
        guard !names.isEmpty else { return }
        let files = sealedFilesFolder
        await BlockingPool.run {
            for name in names where Self.isSealedFileName(name) { try? SecureFile.remove("\(files)/\(name)") }
        }
    }
}

/// Counts the bytes a source hands out.
struct CountingSource<Source: ByteSource>: ByteSource {
    var source: Source
    private(set) var count: Int64 = 0

    init(_ source: Source) { self.source = source }

    mutating func read(into buffer: UnsafeMutableRawBufferPointer) throws(CofferCryptoError) -> Int {
        let got = try source.read(into: buffer)
        count += Int64(got)
        return got
    }
}
