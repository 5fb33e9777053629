import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The one way Coffer starts a child process (a viewer, `notify-send`): started on ``BlockingPool`` (spawning
/// blocks), and waited for through its termination handler, so no thread waits while it runs.
public enum ChildProcess {
    /// Why a child process did not run.
    public struct Failure: Error, Equatable, CustomStringConvertible {
        /// The program that could not be started.
        public var executable: String

        /// See `CustomStringConvertible`.
        public var description: String { "The program \(executable) could not be started." }
    }

    /// Runs `executable` with `arguments` (no shell unless `executable` is one) and returns its exit status once it
    /// exited. The caller's task is suspended meanwhile; cancelling it does not stop the child.
    ///
    /// - Parameters:
    ///   - discardingOutput: Sends the child's standard output and error to `/dev/null` (else it shares this
    ///     process's).
    /// - Throws: ``Failure`` when the program cannot be started.
    public static func run(
        _ executable: String,
        arguments: [String],
        discardingOutput: Bool = false
    ) async throws(Failure) -> Int32 {
        let outcome: Result<Int32, Failure> = await withCheckedContinuation { continuation in
            BlockingPool.submit {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: executable)
                process.arguments = arguments
                if discardingOutput {
                    process.standardOutput = FileHandle.nullDevice
                    process.standardError = FileHandle.nullDevice
                }
                // The handler holds the process until it has exited, then lets it go.
                process.terminationHandler = { [process] _ in
                    process.terminationHandler = nil
                    continuation.resume(returning: .success(process.terminationStatus))
                }
                do {
                    try process.run()
                } catch {
                    process.terminationHandler = nil
                    continuation.resume(returning: .failure(Failure(executable: executable)))
                }
            }
        }
        return try outcome.get()
    }

    /// Runs `executable` with `arguments` on this process's terminal and in this process's process group (an editor),
    /// and returns its exit status once it exited (128 + the signal's number when a signal ended it).
    ///
    /// ``run(_:arguments:discardingOutput:)`` starts children through Foundation's `Process`, which always puts the
    /// child in a process group of its own: not the terminal's foreground group, so a program that reads the
    /// terminal is stopped by SIGTTIN, and Ctrl-C and Ctrl-Z do not reach it. This one spawns with `posix_spawn` in
    /// the caller's group, as `git` runs its editor: the terminal's keys reach both, and the caller decides what
    /// SIGINT means meanwhile. The child gets default signal actions and mask, and no descriptor above 2. A pool
    /// thread waits for it in `waitpid` (the caller's task is suspended; cancelling it does not stop the child).
    ///
    /// - Throws: ``Failure`` when the program cannot be started.
    public static func runOnTerminal(_ executable: String, arguments: [String]) async throws(Failure) -> Int32 {
        let outcome: Result<Int32, Failure> = await BlockingPool.run {
            guard let pid = spawn(executable, arguments: arguments) else {
                return .failure(Failure(executable: executable))
            }
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 {
                if errno != EINTR { return .failure(Failure(executable: executable)) }
            }
            let signal = status & 0x7F
            return .success(signal == 0 ? (status >> 8) & 0xFF : 128 + signal)
        }
        return try outcome.get()
    }

    /// Starts `executable` with `posix_spawn` in the caller's process group (no `POSIX_SPAWN_SETPGROUP`), with
    /// default signal actions, no signal blocked and no descriptor above 2; the caller waits for it (`waitpid`).
    /// `nil` when it cannot start.
    public static func spawn(_ executable: String, arguments: [String]) -> pid_t? {
        var actions = posix_spawn_file_actions_t()
        var attributes = posix_spawnattr_t()
        guard posix_spawn_file_actions_init(&actions) == 0 else { return nil }
        defer { posix_spawn_file_actions_destroy(&actions) }
        guard posix_spawnattr_init(&attributes) == 0 else { return nil }
        defer { posix_spawnattr_destroy(&attributes) }
        // Descriptors of this process (sockets, the store) are not the editor's.
        // (glibc ignores a close action for a descriptor closed meanwhile; addclosefrom_np is not in Swift's Glibc.)
        let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        for fd in open.compactMap({ Int32($0) }) where fd > 2 {
            guard posix_spawn_file_actions_addclose(&actions, fd) == 0 else { return nil }
        }
        // Signals this process handles or ignores start with their default action, and none is blocked.
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for number in [SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU, SIGCHLD] {
            sigaddset(&defaults, number)
        }
        var mask = sigset_t()
        sigemptyset(&mask)
        guard posix_spawnattr_setsigdefault(&attributes, &defaults) == 0,
            posix_spawnattr_setsigmask(&attributes, &mask) == 0,
            posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK)) == 0
        else { return nil }
        let argv = ([executable] + arguments).map { strdup($0) }
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let result = (argv + [nil]).withUnsafeBufferPointer { pointers in
            posix_spawn(&pid, executable, &actions, &attributes, pointers.baseAddress!, environ)
        }
        return result == 0 ? pid : nil
    }
}
