import Foundation

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
}
