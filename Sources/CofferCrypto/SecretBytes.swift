import Logging
import NIOConcurrencyHelpers
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Key material held in memory that is locked against swapping where the system allows, zeroed when released, and
/// never printed.
///
/// Each value owns its own page-aligned allocation, so locking and unlocking one secret never touches another's
/// pages. The bytes are reachable only inside ``withUnsafeBytes(_:)``.
///
/// - Warning: Copying the bytes out of the closure (into an `Array`, `Data` or `String`) creates a copy that is not
///   zeroed. Keep such copies inside the closure or derive from them at once.
public final class SecretBytes: @unchecked Sendable {
    // The storage is written only in `init` and in `wipe()`/`deinit`, which callers serialise by ownership: a value
    // is wiped only by the one who owns it (the Keymaker on lock). Reads are otherwise immutable.
    private let pointer: UnsafeMutableRawPointer
    private let allocationSize: Int
    private let isMemoryLocked: Bool
    private let wiped = Atomic<Bool>(false)

    /// The number of secret bytes.
    public let count: Int

    /// Creates `count` bytes from the system's cryptographically secure random number generator.
    public convenience init(randomCount count: Int) {
        self.init(uninitializedCount: count) { buffer in SystemRandom.fill(UnsafeMutableRawBufferPointer(buffer)) }
    }

    /// Copies `bytes` into locked storage.
    ///
    /// - Warning: The source is not zeroed; clear it yourself if it held a secret.
    public convenience init(copying bytes: some Collection<UInt8>) {
        self.init(uninitializedCount: bytes.count) { buffer in
            _ = buffer.initialize(from: bytes)
        }
    }

    /// Creates storage of `count` bytes and lets `initializer` fill it in place, so a secret need never exist
    /// outside locked memory.
    public init(uninitializedCount count: Int, initializer: (UnsafeMutableBufferPointer<UInt8>) throws -> Void) rethrows
    {
        precondition(count >= 0, "SecretBytes count must not be negative")
        let page = Self.pageSize
        let size = max(page, (count + page - 1) / page * page)
        var raw: UnsafeMutableRawPointer?
        guard posix_memalign(&raw, page, size) == 0, let raw else {
            fatalError("SecretBytes: out of memory allocating \(size) bytes")
        }
        memset(raw, 0, size)
        self.pointer = raw
        self.allocationSize = size
        self.count = count
        self.isMemoryLocked = mlock(raw, size) == 0
        if !isMemoryLocked { Self.reportMemoryLockFailure(errno: errno) }
        let buffer = UnsafeMutableBufferPointer(start: raw.assumingMemoryBound(to: UInt8.self), count: count)
        do {
            try initializer(buffer)
        } catch {
            Self.release(raw, size: size, locked: isMemoryLocked)
            throw error
        }
    }

    deinit {
        Self.release(pointer, size: allocationSize, locked: isMemoryLocked)
    }

    /// Gives `body` read access to the secret bytes.
    ///
    /// - Warning: Do not let the buffer escape the closure.
    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// Zeroes the bytes now, before the value is released. Used when a key must stop working at once (autolock,
    /// logout) even if something else still holds a reference. Afterwards ``isWiped`` is `true`.
    public func wipe() {
        explicit_bzero(pointer, allocationSize)
        wiped.store(true, ordering: .releasing)
    }

    /// Whether ``wipe()`` has run. A wiped value must not be used as a key.
    public var isWiped: Bool { wiped.load(ordering: .acquiring) }

    /// Compares two secrets in time that depends only on their lengths.
    public func constantTimeEquals(_ other: SecretBytes) -> Bool {
        withUnsafeBytes { mine in other.withUnsafeBytes { theirs in ConstantTime.equals(mine, theirs) } }
    }

    private static func release(_ pointer: UnsafeMutableRawPointer, size: Int, locked: Bool) {
        explicit_bzero(pointer, size)
        if locked { munlock(pointer, size) }
        free(pointer)
    }

    private static let pageSize: Int = {
        let size = sysconf(Int32(_SC_PAGESIZE))
        return size > 0 ? size : 4096
    }()

    private static let memoryLockWarned = Atomic<Bool>(false)
    private static let installedLogger = NIOLockedValueBox(
        Logger(label: "coffer.crypto", factory: { _ in SwiftLogNoOpLogHandler() })
    )

    /// Where CofferCrypto reports what its callers cannot see in a return value: today only that key memory could
    /// not be locked against swapping. A no-op logger until the program gives one; the library never writes to
    /// standard error itself.
    public static var logger: Logger {
        get { installedLogger.withLockedValue { $0 } }
        set { installedLogger.withLockedValue { $0 = newValue } }
    }

    /// Reports once per process, through ``logger``, that key memory could not be locked (for example when
    /// `RLIMIT_MEMLOCK` is exhausted). Keys still work and are still zeroed; they may reach swap.
    private static func reportMemoryLockFailure(errno code: Int32) {
        guard !memoryLockWarned.exchange(true, ordering: .relaxed) else { return }
        reportMemoryLockFailure(errno: code, to: logger)
    }

    /// The warning itself, apart from the once-per-process gate (tests).
    static func reportMemoryLockFailure(errno code: Int32, to logger: Logger) {
        logger.warning(
            "could not lock key memory against swapping; keys are still zeroed when released",
            metadata: ["errno": "\(code)", "reason": "\(SystemError.message(for: code))"]
        )
    }

    /// Whether memory locking has failed at least once in this process.
    public static var memoryLockFailed: Bool { memoryLockWarned.load(ordering: .relaxed) }
}

extension SecretBytes: Equatable {
    /// Constant-time comparison of the bytes; see ``constantTimeEquals(_:)``.
    public static func == (lhs: SecretBytes, rhs: SecretBytes) -> Bool { lhs.constantTimeEquals(rhs) }
}

extension SecretBytes: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Always `SecretBytes(<redacted>)`: the bytes never reach logs.
    public var description: String { "SecretBytes(<redacted>)" }
    /// Always `SecretBytes(<redacted>)`.
    public var debugDescription: String { description }
    /// An empty mirror, so `dump` and debuggers that use mirrors show nothing.
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}

/// Comparisons whose running time does not depend on where two byte strings differ.
public enum ConstantTime {
    /// Returns whether `lhs` and `rhs` hold the same bytes, in time that depends only on their lengths.
    public static func equals(_ lhs: UnsafeRawBufferPointer, _ rhs: UnsafeRawBufferPointer) -> Bool {
        guard lhs.count == rhs.count else { return false }
        var difference: UInt8 = 0
        for index in 0..<lhs.count { difference |= lhs[index] ^ rhs[index] }
        return difference == 0
    }

    /// Returns whether two byte collections are equal, in time that depends only on their lengths.
    public static func equals(_ lhs: some Collection<UInt8>, _ rhs: some Collection<UInt8>) -> Bool {
        let left = Array(lhs)
        let right = Array(rhs)
        return left.withUnsafeBytes { l in right.withUnsafeBytes { r in equals(l, r) } }
    }
}
