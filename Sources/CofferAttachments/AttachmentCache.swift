import CofferBlocking
import CofferCrypto
import CofferKeymaker
import Crypto
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The encrypted attachment cache: each attachment is one streaming-AEAD file (v1, 64 KiB chunks, constant memory)
/// in a private folder, named by a keyed hash of the caller's key so names reveal neither message ids nor file
/// names, bound to that name by the stream's context.
///
/// Entries expire ``ttlSeconds`` after they were written (the file's modification time, set from the injected
/// clock). Whoever holds the cache calls ``purgeExpired()`` at unlock and periodically, and ``purgeAll()`` at logout.
/// ``preview(_:suggestedName:viewer:)`` decrypts to a fresh 0700 folder, runs a viewer and deletes the cleartext as
/// soon as it returns; ``save(_:to:)`` is the only way to keep a cleartext copy. Leftovers of a killed process
/// (temporary files, preview folders of processes that no longer run) are deleted when a cache is created.
///
/// See `docs/STORE.md`, "Attachment cache".
public final class AttachmentCache: Sendable {
    /// The default time to live: three days.
    public static let defaultTTLSeconds: Int64 = 3 * 24 * 3600
    /// The extension of cache files.
    static let fileExtension = ".cfa"

    /// The cache folder (mode 0700).
    public let folder: String
    /// The folder under which previews get their own random folder (mode 0700).
    public let previewFolder: String
    /// Seconds an entry lives.
    public let ttlSeconds: Int64

    private let keys: any MainKeySource
    private let clock: any KeymakerClock
    private let derivedKeys = DerivedKeyCache<CacheKeys>()

    /// Opens the cache, creating its folders, and deletes leftovers of killed processes.
    ///
    /// - Parameters:
    ///   - folder: The cache folder.
    ///   - previewFolder: Where previews are decrypted; by default ``PreviewFolder/choose(cacheFolder:)`` (memory:
    ///     `$XDG_RUNTIME_DIR`, else `/dev/shm`; the disk only when neither is usable).
    ///   - keys: The account's key source (the running task's ``KeyUse`` decides whether a use is activity).
    ///   - ttlSeconds: Seconds an entry lives (3 days by default); must be positive.
    ///   - clock: The clock used for expiry (tests inject one).
    public init(
        folder: String,
        previewFolder: String? = nil,
        keys: any MainKeySource,
        ttlSeconds: Int64 = AttachmentCache.defaultTTLSeconds,
        clock: any KeymakerClock = SystemClock()
    ) throws(AttachmentError) {
        guard ttlSeconds > 0 else { throw .invalidArgument("the time to live must be positive") }
        self.folder = folder
        if let previewFolder {
            self.previewFolder = previewFolder
        } else {
            self.previewFolder = PreviewFolder.choose(cacheFolder: folder)
        }
        self.ttlSeconds = ttlSeconds
        self.keys = keys
        self.clock = clock
        do {
            try SecureFile.makePrivateDirectory(folder)
            try SecureFile.makePrivateDirectory(self.previewFolder)
        } catch {
            throw AttachmentError.wrap(error)
        }
        try removeLeftovers()
    }

    // MARK: - Writing and reading

    /// Encrypts `content` into the cache under `key` (replacing an older entry).
    ///
    /// - Parameter key: The caller's name for the entry, for example `"attachment:42"`; it is never written.
    public func put(_ content: [UInt8], for key: String) async throws(AttachmentError) {
        var source = BufferSource(content)
        try await put(from: &source, for: key)
    }

    /// Encrypts the file at `path` into the cache under `key`, streaming (memory stays flat whatever the size).
    public func put(contentsOf path: String, for key: String) async throws(AttachmentError) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw .io(operation: "open the file to cache", errno: errno) }
        defer { close(fd) }
        var source = FileDescriptorSource(fd: fd)
        try await put(from: &source, for: key)
    }

    /// Whether `key` has an entry that has not expired.
    public func contains(_ key: String) async throws(AttachmentError) -> Bool {
        let path = try await path(for: key)
        guard let age = age(of: path) else { return false }
        return !isExpired(age: age)
    }

    /// Whether `key` has a live entry whose whole file decrypts and verifies. An entry that fails its check (changed,
    /// cut short, damaged on disk) is deleted, so the caller fills it again from the intact store; it never stays
    /// stuck. Reads the file once, keeping nothing of the cleartext.
    public func containsIntact(_ key: String) async throws(AttachmentError) -> Bool {
        let keys: CacheKeys
        let path: String
        do {
            (keys, path) = try await liveEntry(key)
        } catch .notCached {
            return false
        }
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else {
            if errno == ENOENT { return false }
            throw .io(operation: "open a cache file", errno: errno)
        }
        defer { close(fd) }
        var source = FileDescriptorSource(fd: fd)
        var sink = DiscardingSink()
        do {
            try StreamingAEAD.decrypt(from: &source, to: &sink, key: keys.stream, context: Self.context(path))
        } catch {
            let failure = AttachmentError.wrap(error)
            guard case .crypto = failure else { throw failure }
            dropDamaged(path)
            return false
        }
        return true
    }

    /// Decrypts the entry for `key` into memory (small attachments; use ``save(_:to:)`` for large ones).
    ///
    /// - Throws: ``AttachmentError/notCached`` (an expired entry is deleted and reported so), or
    ///   ``AttachmentError/crypto(_:)`` when the file was changed.
    public func read(_ key: String) async throws(AttachmentError) -> [UInt8] {
        let (keys, path) = try await liveEntry(key)
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { throw errno == ENOENT ? .notCached : .io(operation: "open a cache file", errno: errno) }
        defer { close(fd) }
        var source = FileDescriptorSource(fd: fd)
        var sink = BufferSink()
        do {
            try StreamingAEAD.decrypt(from: &source, to: &sink, key: keys.stream, context: Self.context(path))
        } catch {
            let failure = AttachmentError.wrap(error)
            if case .crypto = failure { dropDamaged(path) }
            throw failure
        }
        return sink.bytes
    }

    /// Decrypts the entry for `key` to `target` (mode 0600): the only way to keep a cleartext copy. The file appears
    /// only once fully decrypted and verified; on any failure nothing is left at `target`.
    ///
    /// - Throws: ``AttachmentError/invalidArgument(_:)`` if `target` exists, ``AttachmentError/notCached``,
    ///   ``AttachmentError/crypto(_:)``.
    public func save(_ key: String, to target: String) async throws(AttachmentError) {
        guard !SecureFile.exists(target) else { throw .invalidArgument("the target file already exists") }
        let (keys, path) = try await liveEntry(key)
        let temporary = SecureFile.temporaryPath(for: target)
        try decrypt(path, keys: keys, to: temporary)
        guard rename(temporary, target) == 0 else {
            let code = errno
            unlink(temporary)
            throw .io(operation: "move the saved attachment into place", errno: code)
        }
    }

    /// Decrypts the entry for `key` into a fresh folder with a random name (mode 0700, under ``previewFolder``),
    /// runs `viewer` with the file's path appended to its arguments, and deletes the file and folder as soon as the
    /// viewer exits, whatever its status.
    ///
    /// - Parameters:
    ///   - key: The entry.
    ///   - suggestedName: The attachment's file name; only its extension (letters and digits) is kept, so the viewer
    ///     can tell the type without the name reaching the disk.
    ///   - viewer: The program and its first arguments, such as `["/usr/bin/xdg-open"]`.
    ///   - afterViewer: Runs with the file's path after the viewer exits and before the file is deleted (the CLI
    ///     waits there for Enter when the viewer hands the file to another program and returns at once).
    /// - Returns: The viewer's exit status.
    @discardableResult
    public func preview(
        _ key: String,
        suggestedName: String?,
        viewer: [String],
        afterViewer: @Sendable (String) async -> Void = { _ in }
    ) async throws(AttachmentError)
        -> Int32
    {
        guard let program = viewer.first, !program.isEmpty else { throw .invalidArgument("no viewer given") }
        let (file, folder) = try await openPreview(key, suggestedName: suggestedName)
        defer { SecureFile.removeTree(folder) }
        let status: Int32
        do {
            status = try await ChildProcess.run(program, arguments: Array(viewer.dropFirst()) + [file])
        } catch {
            throw .viewerFailed(program)
        }
        await afterViewer(file)
        return status
    }

    /// Decrypts the entry for `key` into a fresh folder with a random name (mode 0700, under ``previewFolder``,
    /// named after this process so a later open deletes it if the process is killed) and returns the file and the
    /// folder. The caller deletes the folder when the viewer is done (``preview(_:suggestedName:viewer:afterViewer:)``
    /// does, and so does the agent when its connection ends).
    ///
    /// - Parameter suggestedName: The attachment's file name; only its extension (1 to 8 ASCII letters and digits)
    ///   is kept, so a viewer can tell the type without the name reaching the disk.
    public func openPreview(
        _ key: String,
        suggestedName: String?
    ) async throws(AttachmentError) -> (file: String, folder: String) {
        let (keys, path) = try await liveEntry(key)
        let folder: String
        do { folder = try SecureFile.makeProcessFolder(under: previewFolder) } catch {
            throw AttachmentError.wrap(error)
        }
        let file = "\(folder)/attachment\(Self.safeExtension(suggestedName))"
        do { try decrypt(path, keys: keys, to: file) } catch {
            SecureFile.removeTree(folder)
            throw error
        }
        return (file, folder)
    }

    /// Writes `bytes` (a rendered page) as `name` into a fresh private folder under ``previewFolder``, the same way
    /// ``openPreview(_:suggestedName:)`` does for an entry, and returns the file and the folder.
    public func writePreview(_ bytes: [UInt8], name: String) throws(AttachmentError) -> (file: String, folder: String) {
        let folder: String
        do { folder = try SecureFile.makeProcessFolder(under: previewFolder) } catch {
            throw AttachmentError.wrap(error)
        }
        let file = "\(folder)/\(name)"
        do { try SecureFile.writeNew(bytes, to: file) } catch {
            SecureFile.removeTree(folder)
            throw AttachmentError.wrap(error)
        }
        return (file, folder)
    }

    /// Deletes the entry for `key`, if any.
    public func remove(_ key: String) async throws(AttachmentError) {
        let path = try await path(for: key)
        do { try SecureFile.remove(path) } catch { throw AttachmentError.wrap(error) }
    }

    // MARK: - Expiry and purging (no key needed)

    /// Deletes every expired entry (and any entry whose time is implausibly in the future, which a moved clock
    /// would cause). Call at unlock and periodically.
    ///
    /// - Returns: How many entries were deleted.
    @discardableResult
    public func purgeExpired() throws(AttachmentError) -> Int {
        var removed = 0
        for name in try list() where name.hasSuffix(Self.fileExtension) {
            let path = "\(folder)/\(name)"
            guard let age = age(of: path), isExpired(age: age) else { continue }
            do { try SecureFile.remove(path) } catch { throw AttachmentError.wrap(error) }
            removed += 1
        }
        return removed
    }

    /// Deletes every entry, temporary file and preview (logout).
    ///
    /// - Returns: How many entries were deleted.
    @discardableResult
    public func purgeAll() throws(AttachmentError) -> Int {
        var removed = 0
        for name in try list() where name != "previews" {
            let path = "\(folder)/\(name)"
            if name.hasSuffix(Self.fileExtension) { removed += 1 }
            SecureFile.removeTree(path)
        }
        for name in (try? SecureFile.list(previewFolder)) ?? [] { SecureFile.removeTree("\(previewFolder)/\(name)") }
        forgetKeys()
        return removed
    }

    /// Deletes what a killed process left: temporary cache files whose writer is gone
    /// (``SecureFile/isAbandonedTemporary(_:)``; another process's write in progress is kept), and preview folders
    /// (``SecureFile/makeProcessFolder(under:)``) of processes that no longer run. This process's own folders are
    /// left alone: another cache of the same process (the agent opens one per account, and they may share the
    /// preview folder) may be showing one. Runs when the cache is created.
    public func removeLeftovers() throws(AttachmentError) {
        do { try SecureFile.removeTemporaryLeftovers(in: folder) } catch { throw AttachmentError.wrap(error) }
        PreviewFolder.removeFoldersOfEndedProcesses(under: previewFolder)
    }

    /// Drops the derived keys from memory now; the next operation derives them again if unlocked.
    public func forgetKeys() { derivedKeys.forget() }

    /// The number of entry files present (expired or not).
    public func entryCount() throws(AttachmentError) -> Int {
        try list().filter { $0.hasSuffix(Self.fileExtension) }.count
    }

    // MARK: - Internals

    private func put(from source: inout some ByteSource, for key: String) async throws(AttachmentError) {
        let keys = try await keys()
        let path = "\(folder)/\(keys.fileName(for: key))"
        let temporary = SecureFile.temporaryPath(for: path)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw .io(operation: "create a cache file", errno: errno) }
        var done = false
        defer { if !done { unlink(temporary) } }
        do throws(CofferCryptoError) {
            defer { close(fd) }
            var sink = FileDescriptorSink(fd: fd)
            try StreamingAEAD.encrypt(from: &source, to: &sink, key: keys.stream, context: Self.context(path))
            guard fsync(fd) == 0 else { throw CofferCryptoError.io(operation: "flush a cache file", errno: errno) }
            let seconds = clock.now().wallSeconds
            var times = [timespec(tv_sec: Int(seconds), tv_nsec: 0), timespec(tv_sec: Int(seconds), tv_nsec: 0)]
            guard futimens(fd, &times) == 0 else {
                throw CofferCryptoError.io(operation: "date a cache file", errno: errno)
            }
        } catch {
            throw AttachmentError.wrap(error)
        }
        guard rename(temporary, path) == 0 else { throw .io(operation: "store a cache file", errno: errno) }
        done = true
        do { try SecureFile.syncDirectory(folder) } catch { throw AttachmentError.wrap(error) }
    }

    /// Decrypts a cache file to a new file at `target`; on failure the partial output is deleted.
    private func decrypt(_ path: String, keys: CacheKeys, to target: String) throws(AttachmentError) {
        let input = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard input >= 0 else { throw errno == ENOENT ? .notCached : .io(operation: "open a cache file", errno: errno) }
        defer { close(input) }
        let output = open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard output >= 0 else { throw .io(operation: "create the decrypted file", errno: errno) }
        var complete = false
        defer {
            close(output)
            if !complete { unlink(target) }
        }
        var source = FileDescriptorSource(fd: input)
        var sink = FileDescriptorSink(fd: output)
        do {
            try StreamingAEAD.decrypt(from: &source, to: &sink, key: keys.stream, context: Self.context(path))
        } catch {
            let failure = AttachmentError.wrap(error)
            if case .crypto = failure { dropDamaged(path) }
            throw failure
        }
        guard fsync(output) == 0 else { throw .io(operation: "flush the decrypted file", errno: errno) }
        complete = true
    }

    /// Deletes an entry whose file failed its integrity check, so the next ``containsIntact(_:)`` or
    /// ``contains(_:)`` reports it missing and the caller refills it. A failure to delete is ignored: the entry
    /// then fails again, which is what it would do anyway.
    private func dropDamaged(_ path: String) { try? SecureFile.remove(path) }

    /// The path of a live entry: an expired one is deleted and reported as not cached.
    private func liveEntry(_ key: String) async throws(AttachmentError) -> (CacheKeys, String) {
        let keys = try await keys()
        let path = "\(folder)/\(keys.fileName(for: key))"
        guard let age = age(of: path) else { throw .notCached }
        if isExpired(age: age) {
            try? SecureFile.remove(path)
            throw .notCached
        }
        return (keys, path)
    }

    private func path(for key: String) async throws(AttachmentError) -> String {
        "\(folder)/\(try await keys().fileName(for: key))"
    }

    private func keys() async throws(AttachmentError) -> CacheKeys {
        try await derivedKeys.value(from: keys) { error in
            error == .locked ? .locked : .keymaker(error)
        } derive: {
            (mainKey) throws(AttachmentError) in
            try CacheKeys(mainKey: mainKey)
        }
    }

    /// Seconds since the entry was written, or `nil` if there is none.
    private func age(of path: String) -> Int64? {
        var info = stat()
        guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
        return clock.now().wallSeconds - Int64(info.st_mtim.tv_sec)
    }

    /// Expired after the TTL, and also when written more than five minutes "in the future".
    private func isExpired(age: Int64) -> Bool { age >= ttlSeconds || age < -300 }

    private func list() throws(AttachmentError) -> [String] {
        do { return try SecureFile.list(folder) } catch { throw AttachmentError.wrap(error) }
    }

    /// The stream context: the file's name, so a file renamed over another entry fails to open.
    static func context(_ path: String) -> EnvelopeContext {
        EnvelopeContext(["attachments", "cache", String(path.split(separator: "/").last ?? "")])
    }

    static func safeExtension(_ name: String?) -> String {
        guard let name, let dot = name.lastIndex(of: ".") else { return "" }
        let ext = name[name.index(after: dot)...]
        guard !ext.isEmpty, ext.count <= 8, ext.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
            return ""
        }
        return "." + ext.lowercased()
    }

}

/// The cache's keys, derived once per unlock.
final class CacheKeys: Sendable {
    /// `attachments.cache`: the streaming AEAD key.
    let stream: EnvelopeKey
    private let names: HMAC<SHA256>

    init(mainKey: MainKey) throws(AttachmentError) {
        do { stream = try mainKey.subkey("attachments.cache") } catch {
            throw error == .locked ? .locked : .keymaker(error)
        }
        do { names = HMAC<SHA256>(key: try mainKey.hashKey("attachments.names")) } catch {
            throw error == .locked ? .locked : .keymaker(error)
        }
        guard !mainKey.isWiped else { throw .locked }
    }

    /// 32 hex digits of `HMAC-SHA256(names key, key)` and `.cfa`.
    func fileName(for key: String) -> String {
        var hmac = names
        hmac.update(data: Array(key.utf8))
        return Array(Array(hmac.finalize()).prefix(16)).hexString + AttachmentCache.fileExtension
    }
}

/// A sink that keeps nothing: ``AttachmentCache/containsIntact(_:)`` only needs the stream's verdict.
struct DiscardingSink: ByteSink {
    mutating func write(_ bytes: [UInt8]) {}
}
