import CofferCrypto
import Crypto

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A keychain that can hold a named exclusive lock across threads and processes that share its storage, so a
/// caller can make a read, a decision and a write of its items one step (the Keymaker's PIN attempt counter).
///
/// The lock is separate from the one each item operation takes, so item operations run normally inside `body`.
public protocol KeychainLocking: Keychain {
    /// Runs `body` while holding the exclusive lock `name`; waits for any other holder, in this process or another.
    ///
    /// - Throws: ``KeychainError/storage(_:)`` when the lock cannot be taken; `body`'s result is returned as is.
    func withExclusiveLock<R>(named name: String, _ body: () -> R) throws(KeychainError) -> R
}

extension FileKeychain: KeychainLocking {
    /// Holds `flock(LOCK_EX)` on `<folder>/.lock-<32 hex digits of SHA-256(name)>` while `body` runs. `flock` locks
    /// belong to the open file description, so two threads of one process exclude each other as two processes do.
    public func withExclusiveLock<R>(named name: String, _ body: () -> R) throws(KeychainError) -> R {
        let digest = Array(SHA256.hash(data: Array("coffer.keychain.lock.v1.\(name)".utf8)).prefix(16))
        let path = "\(folder)/.lock-\(digest.hexString)"
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .storage(.io(operation: "open a keychain lock", errno: errno)) }
        defer { close(fd) }
        while flock(fd, LOCK_EX) != 0 {
            guard errno == EINTR else { throw .storage(.io(operation: "take a keychain lock", errno: errno)) }
        }
        return body()
    }
}
