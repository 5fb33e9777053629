import CofferCrypto
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Where decrypted previews go: a memory-backed folder whenever one is available, so a preview never reaches the
/// persistent disk, and a crash or power cut leaves nothing behind.
///
/// In order: `$XDG_RUNTIME_DIR/coffer-previews` (a per-user tmpfs that systemd creates and removes at logout);
/// else `/dev/shm/coffer-previews-<uid>`, when `/dev/shm` is a tmpfs with mode 1777 and the folder is (or can be
/// made) a folder of this user with mode 0700 (a folder someone else planted there is never used); else
/// `<cache>/previews` on the disk, the last resort. See docs/STORE.md, "Attachment cache".
public enum PreviewFolder {
    /// The preview folder for the cache at `cacheFolder`.
    public static func choose(cacheFolder: String) -> String {
        memoryFolder(named: "coffer-previews") ?? "\(cacheFolder)/previews"
    }

    /// The parent of the editor's folders while a message is written (`CofferCompose.EditorSession`), chosen as the
    /// preview folder is: `$XDG_RUNTIME_DIR/coffer-compose`, else `/dev/shm/coffer-compose-<uid>` under the same
    /// checks, else `fallback` (on the disk; the caller's private folder).
    public static func chooseCompose(fallback: String) -> String {
        memoryFolder(named: "coffer-compose") ?? fallback
    }

    /// `$XDG_RUNTIME_DIR/<name>`, else the checked `/dev/shm/<name>-<uid>`, else `nil`.
    static func memoryFolder(named name: String) -> String? {
        if let runtime = getenv("XDG_RUNTIME_DIR").map({ String(cString: $0) }), runtime.hasPrefix("/") {
            return "\(runtime)/\(name)"
        }
        let shared = "/dev/shm/\(name)-\(getuid())"
        if isSharedMemory("/dev/shm"), claimPrivateFolder(shared) { return shared }
        return nil
    }

    /// Deletes what is under `parent` but the folders (``SecureFile/makeProcessFolder(under:)``) of processes that
    /// still run: what a SIGKILL or a crash left. This process's own folders are kept: another part of it may be
    /// using one.
    ///
    /// - Returns: How many entries were deleted.
    @discardableResult
    public static func removeFoldersOfEndedProcesses(under parent: String) -> Int {
        let own = getpid()
        var removed = 0
        for name in (try? SecureFile.list(parent)) ?? [] {
            if let owner = SecureFile.folderOwner(name), owner == own || SecureFile.isAlive(owner) { continue }
            SecureFile.removeTree("\(parent)/\(name)")
            removed += 1
        }
        return removed
    }

    /// Whether `path` is a tmpfs mount with mode 1777 (sticky, writable by all), as `/dev/shm` should be.
    static func isSharedMemory(_ path: String) -> Bool {
        var info = stat()
        guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR, info.st_mode & 0o7777 == 0o1777 else {
            return false
        }
        // The last mount on `path` in /proc/self/mounts is the one in effect. Read to the end: procfs files report
        // size 0, and a size-based read stops after the first page (a desktop's mount table is often longer).
        guard let handle = FileHandle(forReadingAtPath: "/proc/self/mounts"), let data = try? handle.readToEnd()
        else { return false }
        let mounts = String(decoding: data, as: UTF8.self)
        let type = mounts.split(separator: "\n").map { $0.split(separator: " ") }
            .last { $0.count > 2 && $0[1] == path }?[2]
        return type == "tmpfs"
    }

    /// Creates `path` (mode 0700) or accepts it only when it is a real folder (not a link) owned by this user that
    /// nobody else can enter.
    static func claimPrivateFolder(_ path: String) -> Bool {
        if mkdir(path, 0o700) != 0 && errno != EEXIST { return false }
        var info = stat()
        guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR, info.st_uid == getuid() else { return false }
        if info.st_mode & 0o077 != 0 && chmod(path, 0o700) != 0 { return false }
        return true
    }
}
