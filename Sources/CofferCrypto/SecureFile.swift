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
/// file or the new one, never a mix; leftovers are named `.*.tmp-*` and removed by ``removeTemporaryLeftovers(in:)``.
public enum SecureFile {
    /// A hook between the steps of an atomic write, called with the step and the target path, for crash tests
    /// (throw to stop there). `nil` in production.
    nonisolated(unsafe) public static var testCrashPoint: (@Sendable (_ step: String, _ path: String) throws -> Void)?

    /// Creates `path` and its missing parents with mode 0700, and checks that the last component is a directory
    /// owned by this user with no group or other access.
    public static func makePrivateDirectory(_ path: String) throws(CofferCryptoError) {
        var current = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            current += "/" + component
            if mkdir(current, 0o700) != 0 && errno != EEXIST {
                throw .io(operation: "create the folder \(current)", errno: errno)
            }
        }
        var info = stat()
        guard lstat(path, &info) == 0 else { throw .io(operation: "inspect the folder \(path)", errno: errno) }
        guard info.st_mode & S_IFMT == S_IFDIR else { throw .io(operation: "use \(path) as a folder", errno: ENOTDIR) }
        if info.st_mode & 0o077 != 0 {
            guard chmod(path, 0o700) == 0 else { throw .io(operation: "make \(path) private", errno: errno) }
        }
    }

    /// Writes `bytes` to `path` atomically with mode 0600.
    public static func writeAtomically(_ bytes: [UInt8], to path: String) throws(CofferCryptoError) {
        let (folder, name) = split(path)
        var random = SystemRandomNumberGenerator()
        let temporary = "\(folder)/.\(name).tmp-\(String(random.next() as UInt64, radix: 16))"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw .io(operation: "create a file in \(folder)", errno: errno) }
        var renamed = false
        defer { if !renamed { unlink(temporary) } }
        do throws(CofferCryptoError) {
            var sink = FileDescriptorSink(fd: fd)
            try sink.write(bytes)
            try crashPoint("written", path)
            guard fsync(fd) == 0 else { throw .io(operation: "flush \(path)", errno: errno) }
            close(fd)
        } catch {
            close(fd)
            throw error
        }
        try crashPoint("synced", path)
        guard rename(temporary, path) == 0 else { throw .io(operation: "replace \(path)", errno: errno) }
        renamed = true
        try crashPoint("renamed", path)
        try syncDirectory(folder)
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

    /// Deletes temporary files that an interrupted ``writeAtomically(_:to:)`` left in `folder`.
    public static func removeTemporaryLeftovers(in folder: String) throws(CofferCryptoError) {
        for name in try list(folder) where name.hasPrefix(".") && name.contains(".tmp-") {
            try remove("\(folder)/\(name)")
        }
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

    private static func crashPoint(_ step: String, _ path: String) throws(CofferCryptoError) {
        guard let hook = testCrashPoint else { return }
        do { try hook(step, path) } catch {
            throw .io(operation: "continue after test crash point \(step)", errno: EINTR)
        }
    }
}
