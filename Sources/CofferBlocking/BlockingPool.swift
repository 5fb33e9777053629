import NIOConcurrencyHelpers
import NIOPosix

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The one place blocking work runs (docs/ARCHITECTURE.md, "Concurrency"): the PIN KDF, keychain `flock` and
/// `fsync`, child processes, a TPM's socket. Never on an event loop, never on Swift's cooperative pool (two threads
/// on a two-core machine, so one blocked call halves every task's throughput).
///
/// The pool is one `NIOThreadPool` for the process, started on first use and never shut down (like NIO's own
/// singletons). It has at least four threads, so that a PIN KDF (about a second) and a `flock` wait do not hold
/// up a `status` between them.
public enum BlockingPool {
    /// The process's pool.
    static let pool: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: max(4, sysconf(Int32(_SC_NPROCESSORS_ONLN))))
        pool.start()
        return pool
    }()

    /// Marks the pool's threads, so that ``isCurrentThreadInPool`` can tell them apart.
    private static let marker = ThreadSpecificVariable<Marker>()
    private final class Marker: Sendable {}
    private static let mark = Marker()

    /// Runs `body` on a thread of the pool and returns what it returns; the caller's task is suspended meanwhile
    /// (no thread waits for it). `body` is not cancelled: a blocking call cannot be interrupted.
    public static func run<T: Sendable, E: Error>(
        _ body: @escaping @Sendable () throws(E) -> T
    ) async throws(E) -> T {
        let result: Result<T, E> = await withCheckedContinuation { continuation in
            submit { continuation.resume(returning: Result(catching: body)) }
        }
        return try result.get()
    }

    /// Runs `body` on a thread of the pool, later.
    static func submit(_ body: @escaping @Sendable () -> Void) {
        pool.submit { _ in
            // A pool that never shuts down runs every item; the state is `.cancelled` only after a shutdown.
            if marker.currentValue == nil { marker.currentValue = mark }
            body()
        }
    }

    /// Whether the calling thread is one of the pool's.
    public static var isCurrentThreadInPool: Bool { marker.currentValue != nil }

    /// A task executor over the pool: a task (or a request) that may block somewhere inside runs here with
    /// `withTaskExecutorPreference(BlockingPool.taskExecutor)`, and so does any default actor it calls.
    public static let taskExecutor = PoolTaskExecutor()

    /// See ``BlockingPool/taskExecutor``.
    public final class PoolTaskExecutor: TaskExecutor {
        fileprivate init() {}

        /// Runs `job` on a thread of the pool.
        public func enqueue(_ job: consuming ExecutorJob) {
            let job = UnownedJob(job)
            submit { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
        }
    }
}

/// A serial executor whose jobs run one at a time on threads of ``BlockingPool``: an actor that makes blocking calls
/// in its isolated code (the Keymaker and its keychain) uses one as its executor, so that its code never runs on an
/// event loop or the cooperative pool, and keeps its plain synchronous code (no suspension points added).
///
/// Jobs run in the order they were enqueued; a drain takes one pool thread until the queue is empty.
public final class BlockingSerialExecutor: SerialExecutor {
    private struct State {
        var jobs: [UnownedJob] = []
        var draining = false
        var thread: pthread_t?
    }

    private let state = NIOLockedValueBox(State())

    /// A new executor (one per actor).
    public init() {}

    /// Queues `job`; starts a drain on the pool unless one runs.
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let start = state.withLockedValue { state in
            state.jobs.append(job)
            if state.draining { return false }
            state.draining = true
            return true
        }
        if start { BlockingPool.submit { self.drain() } }
    }

    /// Crashes unless the calling thread is running this executor's jobs now.
    public func checkIsolated() {
        let current = pthread_self()
        let isolated = state.withLockedValue { state in state.thread.map { pthread_equal($0, current) != 0 } ?? false }
        precondition(isolated, "not on the actor's blocking serial executor")
    }

    private func drain() {
        let current = pthread_self()
        while true {
            let batch = state.withLockedValue { state -> [UnownedJob] in
                guard !state.jobs.isEmpty else {
                    state.draining = false
                    state.thread = nil
                    return []
                }
                state.thread = current
                defer { state.jobs.removeAll(keepingCapacity: true) }
                return state.jobs
            }
            guard !batch.isEmpty else { return }
            for job in batch { job.runSynchronously(on: asUnownedSerialExecutor()) }
        }
    }
}
