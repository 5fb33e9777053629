#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One reading of the two clocks autolock needs.
public struct ClockReading: Sendable, Equatable {
    /// Nanoseconds on a monotonic clock that keeps counting through suspend (`CLOCK_BOOTTIME`).
    public var boot: UInt64
    /// Nanoseconds since the Unix epoch on the wall clock (`CLOCK_REALTIME`), which a user can set.
    public var wall: Int64

    /// Creates a reading.
    public init(boot: UInt64, wall: Int64) {
        self.boot = boot
        self.wall = wall
    }

    /// Whole seconds of wall time since the epoch.
    public var wallSeconds: Int64 { wall / 1_000_000_000 }
}

/// The clock the Keymaker uses: injected, so tests move time by hand instead of sleeping.
public protocol KeymakerClock: Sendable {
    /// Reads both clocks.
    func now() -> ClockReading
    /// Suspends until the boot clock reaches `deadline` (nanoseconds); throws if the task is cancelled.
    func sleep(untilBoot deadline: UInt64) async throws
}

/// The system's clocks: `CLOCK_BOOTTIME` and `CLOCK_REALTIME`.
public struct SystemClock: KeymakerClock {
    /// The system clock.
    public init() {}

    /// Reads `CLOCK_BOOTTIME` and `CLOCK_REALTIME`.
    public func now() -> ClockReading {
        var boot = timespec()
        var wall = timespec()
        clock_gettime(CLOCK_BOOTTIME, &boot)
        clock_gettime(CLOCK_REALTIME, &wall)
        return ClockReading(
            boot: UInt64(boot.tv_sec) * 1_000_000_000 + UInt64(boot.tv_nsec),
            wall: Int64(wall.tv_sec) * 1_000_000_000 + Int64(wall.tv_nsec)
        )
    }

    /// Sleeps in steps of at most one second and re-reads `CLOCK_BOOTTIME`, so time spent suspended counts.
    public func sleep(untilBoot deadline: UInt64) async throws {
        while true {
            let current = now().boot
            if current >= deadline { return }
            try await Task.sleep(nanoseconds: min(deadline - current, 1_000_000_000))
        }
    }
}
