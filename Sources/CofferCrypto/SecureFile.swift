#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Private folders and crash-safe file writes.
///
/// Every write that matters goes through ``writeAtomically(_:to:)``: a temporary file in the same folder
/// (`O_EXCL`, mode 0600), `fsync`, `rename` over the target, `fsync` of the folder. A crash leaves either the old
/// file or the new one, never a mix; leftovers are named `.<name>.tmp-<pid>-<random>` and removed by
/// ``removeTemporaryLeftovers(in:)`` once their writer is dead.
public enum SecureFile {
    /// The steps of an atomic write, at which a test's ``CrashPoint`` may stop it.
    package enum WriteStep: String, Sendable, CaseIterable {
        /// The temporary file holds the bytes but is not yet flushed.
        case written
        /// The temporary file is flushed, not yet renamed over the target.
        case synced
        /// The target is replaced; its folder is not yet flushed.
        case renamed
    }

    /// A hook between the steps of an atomic write, called with the step and the target path: throw to stop the
    /// write there, or block to pause it. Tests pass one to the write they exercise; production passes none.
    package typealias CrashPoint = @Sendable (_ step: WriteStep, _ path: String) throws -> Void

    /// How old a dead writer's temporary file must be before ``removeTemporaryLeftovers(in:)`` deletes it.
    package static let leftoverMinimumAge: Int = 60

    /// Creates `path` and its missing parents with mode 0700, and checks that the last component is a directory
    /// owned by this user with no group or other access.
    ///
    /// - Throws: ``CofferCryptoError/notPrivate(_:reason:)`` if the folder exists but belongs to another user or is
    ///   open to the group or others (Coffer refuses rather than repairs: someone may already have read it), or
    ///   ``CofferCryptoError/io(operation:errno:)``.
    public static func makePrivateDirectory(_ path: String) throws(CofferCryptoError) {
        var current = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            current += "/" + component
            if mkdir(current, 0o700) != 0 && errno != EEXIST {
                throw .io(operation: "create the folder \(current)", errno: errno)
            }
        }
        try checkPrivate(path, folder: true)
    }

    /// Checks that `path` (not following a final symbolic link) is a folder or regular file, as `folder` says,
    /// owned by this process's user, with no group or other permission bits.
    ///
    /// - Throws: ``CofferCryptoError/notPrivate(_:reason:)`` or ``CofferCryptoError/io(operation:errno:)``.
    public static func checkPrivate(_ path: String, folder: Bool) throws(CofferCryptoError) {
        var info = stat()
        guard lstat(path, &info) == 0 else { throw .io(operation: "inspect \(path)", errno: errno) }
        let kind: mode_t = folder ? S_IFDIR : S_IFREG
        guard info.st_mode & S_IFMT == kind else {
            throw .io(operation: "use \(path) as a \(folder ? "folder" : "file")", errno: folder ? ENOTDIR : EINVAL)
        }
        guard info.st_uid == geteuid() else {
            throw .notPrivate(path, reason: "it belongs to another user (uid \(info.st_uid))")
        }
        let mode = info.st_mode & 0o777
        guard mode & 0o077 == 0 else {
            throw .notPrivate(path, reason: "other users may access it (mode \(String(mode, radix: 8)))")
        }
    }

    /// Writes `bytes` to `path` atomically with mode 0600.
    public static func writeAtomically(_ bytes: [UInt8], to path: String) throws(CofferCryptoError) {
        try writeAtomically(bytes, to: path, crashPoint: nil)
    }

    /// Writes `bytes` to `path` atomically with mode 0600, calling `crashPoint` between the steps (tests).
    package static func writeAtomically(
        _ bytes: [UInt8],
        to path: String,
        crashPoint: CrashPoint?
    ) throws(CofferCryptoError) {
        let folder = split(path).folder
        let temporary = temporaryPath(for: path)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw .io(operation: "create a file in \(folder)", errno: errno) }
        var renamed = false
        defer { if !renamed { unlink(temporary) } }
        do throws(CofferCryptoError) {
            var sink = FileDescriptorSink(fd: fd)
            try sink.write(bytes)
            try step(.written, path, crashPoint)
            guard fsync(fd) == 0 else { throw .io(operation: "flush \(path)", errno: errno) }
            close(fd)
        } catch {
            close(fd)
            throw error
        }
        try step(.synced, path, crashPoint)
        guard rename(temporary, path) == 0 else { throw .io(operation: "replace \(path)", errno: errno) }
        renamed = true
        try step(.renamed, path, crashPoint)
        try syncDirectory(folder)
    }

    /// Creates `path` with mode 0600 and writes `bytes`; the file must not exist yet and no symlink is followed.
    ///
    /// - Warning: Not atomic and not synced: for private copies the caller deletes, such as previews and pages.
    public static func writeNew(_ bytes: [UInt8], to path: String) throws(CofferCryptoError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw .io(operation: "create \(path)", errno: errno) }
        defer { close(fd) }
        var sink = FileDescriptorSink(fd: fd)
        try sink.write(bytes)
    }

    /// Reads a whole file; `nil` if it does not exist.
    public static func read(_ path: String, maxBytes: Int = 16 << 20) throws(CofferCryptoError) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw .io(operation: "open \(path)", errno: errno)
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw .io(operation: "inspect \(path)", errno: errno) }
        guard Int(info.st_size) <= maxBytes else { throw .io(operation: "read \(path) (too large)", errno: EFBIG) }
        var source = FileDescriptorSource(fd: fd)
        // One byte more than the size, to notice a file that grew while being read.
        let bytes = try StreamingAEAD.readFull(from: &source, count: min(Int(info.st_size), maxBytes) + 1)
        guard bytes.count <= maxBytes else { throw .io(operation: "read \(path) (too large)", errno: EFBIG) }
        return bytes
    }

    /// Removes `path` and makes the removal durable; succeeds if it is already gone.
    public static func remove(_ path: String) throws(CofferCryptoError) {
        if unlink(path) != 0 {
            if errno == ENOENT { return }
            throw .io(operation: "delete \(path)", errno: errno)
        }
        try syncDirectory(split(path).folder)
    }

    /// Whether `path` exists (without following a final symbolic link).
    public static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    /// The names in a folder, without `.` and `..`; empty if it does not exist.
    public static func list(_ folder: String) throws(CofferCryptoError) -> [String] {
        guard let dir = opendir(folder) else {
            if errno == ENOENT { return [] }
            throw .io(operation: "list \(folder)", errno: errno)
        }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    /// Every regular file below `root`, recursively, without following symbolic links.
    public static func files(below root: String) -> [String] {
        var found: [String] = []
        for name in (try? list(root)) ?? [] {
            let path = "\(root)/\(name)"
            var info = stat()
            guard lstat(path, &info) == 0 else { continue }
            if info.st_mode & S_IFMT == S_IFDIR {
                found += files(below: path)
            } else if info.st_mode & S_IFMT == S_IFREG {
                found.append(path)
            }
        }
        return found
    }

    /// Deletes `root` (a file, or a folder and everything below it), without following symbolic links; what cannot
    /// be deleted stays.
    public static func removeTree(_ root: String) {
        var rootInfo = stat()
        guard lstat(root, &rootInfo) == 0 else { return }
        guard rootInfo.st_mode & S_IFMT == S_IFDIR else {
            unlink(root)
            return
        }
        for name in (try? list(root)) ?? [] {
            let path = "\(root)/\(name)"
            var info = stat()
            guard lstat(path, &info) == 0 else { continue }
            if info.st_mode & S_IFMT == S_IFDIR { removeTree(path) } else { unlink(path) }
        }
        rmdir(root)
    }

    /// A fresh temporary path beside `target` for writing it atomically: `.<name>.tmp-<pid>-<random hex>`, which
    /// ``isAbandonedTemporary(_:)`` recognises once its writer is gone.
    public static func temporaryPath(for target: String) -> String {
        let (folder, name) = split(target)
        var random = SystemRandomNumberGenerator()
        return "\(folder)/.\(name).tmp-\(getpid())-\(String(random.next() as UInt64, radix: 16))"
    }

    /// Whether `path` is a temporary file (named as ``temporaryPath(for:)`` names them) that an interrupted write
    /// left: its writing process is gone and it is at least a minute old. A write in progress in another process,
    /// which holds its own lock and not the caller's, is never abandoned. A name without a process id (an older
    /// build's) counts as a dead writer's.
    public static func isAbandonedTemporary(_ path: String) -> Bool {
        let name = split(path).name
        guard name.hasPrefix("."), name.contains(".tmp-") else { return false }
        if let writer = writerProcess(ofTemporary: name), writer == getpid() || isAlive(writer) { return false }
        var info = stat()
        guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return false }
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int(now.tv_sec) - Int(info.st_mtim.tv_sec) >= leftoverMinimumAge
    }

    /// Deletes the temporary files that interrupted ``writeAtomically(_:to:)`` calls left in `folder` (see
    /// ``isAbandonedTemporary(_:)``), so that a start-up never breaks another process's write in progress.
    public static func removeTemporaryLeftovers(in folder: String) throws(CofferCryptoError) {
        for name in try list(folder) where isAbandonedTemporary("\(folder)/\(name)") {
            try remove("\(folder)/\(name)")
        }
    }

    /// The process id in a temporary file's name `.<name>.tmp-<pid>-<random>`, or `nil` for an older name.
    static func writerProcess(ofTemporary name: String) -> pid_t? {
        let bytes = Array(name.utf8)
        let marker = Array(".tmp-".utf8)
        var start = bytes.count - marker.count
        while start >= 0 && !bytes[start..<start + marker.count].elementsEqual(marker) { start -= 1 }
        guard start >= 0 else { return nil }
        let parts = bytes[(start + marker.count)...].split(separator: UInt8(ascii: "-"))
        guard parts.count == 2, let pid = pid_t(String(decoding: parts[0], as: UTF8.self)), pid > 0 else { return nil }
        return pid
    }

    /// Whether a process with id `pid` exists (one of another user counts).
    public static func isAlive(_ pid: pid_t) -> Bool {
        kill(pid, 0) == 0 || errno == EPERM
    }

    /// Linux process ids are below 2^22 (`PID_MAX_LIMIT`).
    static let processIDLimit: Int64 = 1 << 22

    /// This process as a claim a later reader can check (``isAlive(claim:)``): its start time (in clock ticks after
    /// boot, `/proc/self/stat` field 22) times 2^22 plus its process id. A process that later gets the same id has
    /// another start time, so it is not taken for this one. Where `/proc` cannot be read, the process id alone.
    public static func processClaim() -> Int64 {
        let pid = Int64(getpid())
        guard pid < processIDLimit, let ticks = startTicks(of: getpid()), ticks < (Int64.max / processIDLimit) else {
            return pid
        }
        return ticks * processIDLimit + pid
    }

    /// Whether the process that made `claim` (``processClaim()``) still runs: a process with its id exists and, when
    /// the claim has a start time, started then. A claim of a process id alone (older records) is checked by id.
    public static func isAlive(claim: Int64) -> Bool {
        guard claim > 0 else { return false }
        let pid = claim % processIDLimit
        let ticks = claim / processIDLimit
        guard pid > 0, pid <= Int64(Int32.max), isAlive(pid_t(pid)) else { return false }
        guard ticks > 0 else { return true }
        // The id is in use; it is the claimant only if that process started when the claim says. Unreadable (another
        // user's process, no /proc): counted as alive, so two processes never send one item at once.
        guard let started = startTicks(of: pid_t(pid)) else { return true }
        return started == ticks
    }

    /// Field 22 of `/proc/<pid>/stat` (the start time in clock ticks after boot), read after the command name's
    /// closing parenthesis, which may itself contain spaces and parentheses.
    static func startTicks(of pid: pid_t) -> Int64? {
        // procfs reports size 0, so not ``read(_:maxBytes:)``: read to the end (a stat line is far below 4 KiB).
        let fd = open("/proc/\(pid)/stat", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var source = FileDescriptorSource(fd: fd)
        guard let bytes = try? StreamingAEAD.readFull(from: &source, count: 4096) else { return nil }
        guard let close = bytes.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        // After ") " come fields 3 (state) onwards: field 22 is the 20th of them.
        let fields = bytes[(close + 1)...].split(separator: UInt8(ascii: " "))
        guard fields.count >= 20, let ticks = Int64(String(decoding: fields[19], as: UTF8.self)), ticks > 0 else {
            return nil
        }
        return ticks
    }

    /// Creates a fresh private folder (0700) under `parent`, named `<pid>-<random hex>` so that a sweep can tell
    /// when the process that made it is gone (``folderOwner(_:)``). For decrypted previews, one folder per view.
    public static func makeProcessFolder(under parent: String) throws(CofferCryptoError) -> String {
        var random = SystemRandomNumberGenerator()
        let nonce = (0..<2).map { _ in String(random.next() as UInt64, radix: 16) }.joined()
        let folder = "\(parent)/\(getpid())-\(nonce)"
        try makePrivateDirectory(folder)
        return folder
    }

    /// The process id in a folder name made by ``makeProcessFolder(under:)``, or `nil` for another name.
    public static func folderOwner(_ name: String) -> pid_t? {
        guard let first = name.split(separator: "-").first, let pid = pid_t(first), pid > 0 else { return nil }
        return pid
    }

    /// `fsync` on a folder, so a rename or unlink in it survives a crash.
    public static func syncDirectory(_ folder: String) throws(CofferCryptoError) {
        let fd = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw .io(operation: "open the folder \(folder)", errno: errno) }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw .io(operation: "flush the folder \(folder)", errno: errno) }
    }

    private static func split(_ path: String) -> (folder: String, name: String) {
        guard let slash = path.lastIndex(of: "/") else { return (".", path) }
        let folder = String(path[..<slash])
        return (folder.isEmpty ? "/" : folder, String(path[path.index(after: slash)...]))
    }

    private static func step(_ step: WriteStep, _ path: String, _ hook: CrashPoint?) throws(CofferCryptoError) {
        guard let hook else { return }
        do { try hook(step, path) } catch {
            throw .io(operation: "continue after test crash point \(step.rawValue)", errno: EINTR)
        }
    }
}
