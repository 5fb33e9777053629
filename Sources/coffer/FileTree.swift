import CofferCrypto

#if canImport(Glibc)
import Glibc
#endif

/// Walking and deleting folders.
enum FileTree {
    /// Every regular file below `root`, recursively, without following symbolic links.
    static func files(below root: String) -> [String] {
        var found: [String] = []
        for name in (try? SecureFile.list(root)) ?? [] {
            let path = "\(root)/\(name)"
            var info = stat()
            guard lstat(path, &info) == 0 else { continue }
            if info.st_mode & S_IFMT == S_IFDIR { found += files(below: path) } else { found.append(path) }
        }
        return found
    }

    /// Deletes `root` and everything below it, without following symbolic links.
    static func remove(_ root: String) {
        for name in (try? SecureFile.list(root)) ?? [] {
            let path = "\(root)/\(name)"
            var info = stat()
            guard lstat(path, &info) == 0 else { continue }
            if info.st_mode & S_IFMT == S_IFDIR { remove(path) } else { unlink(path) }
        }
        rmdir(root)
    }
}
