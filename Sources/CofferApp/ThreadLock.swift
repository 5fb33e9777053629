import Foundation

/// A value behind a pthread mutex (`NSLock`), for the agent's own threads.
///
/// Swift's `Mutex` synchronises through futex operations inside the standard library, which ThreadSanitizer does not
/// see, so TSan reports false races between the agent's connection threads. A pthread mutex is intercepted by TSan,
/// so real races stay visible. The NIO rework of the agent (issue 9) replaces these threads and this type.
final class ThreadLock<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    /// Runs `body` with the value while holding the lock.
    func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
