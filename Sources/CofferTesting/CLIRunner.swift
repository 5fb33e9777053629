import Foundation

/// Runs the built `coffer` executable as a user would: detached from any terminal, with a private home and input on
/// standard input.
public struct CLIRunner: Sendable {
    /// What a command did.
    public struct Result: Sendable {
        /// The exit status.
        public var status: Int32
        /// Standard output.
        public var stdout: String
        /// Standard error.
        public var stderr: String

        /// A result.
        public init(status: Int32, stdout: String, stderr: String) {
            self.status = status
            self.stdout = stdout
            self.stderr = stderr
        }
    }

    /// The private home every command gets (`--home`).
    public let home: TemporaryDirectory
    /// This runner's own `XDG_RUNTIME_DIR` when it has one, so an agent it starts is its own.
    public let runtime: TemporaryDirectory?
    /// Variables added to every command's environment.
    public var extraEnvironment: [String: String] = [:]
    /// The program every command runs: ``binary`` unless a test chooses another (`coffer-core`, or a copy).
    public var executable = CLIRunner.binary

    /// A runner with a fresh home; with `ownRuntime`, also a fresh `XDG_RUNTIME_DIR`.
    public init(prefix: String = "coffer-cli", ownRuntime: Bool = false) {
        home = TemporaryDirectory(prefix: prefix)
        runtime = ownRuntime ? TemporaryDirectory(prefix: "\(prefix)-xdg") : nil
        if let runtime { extraEnvironment["XDG_RUNTIME_DIR"] = runtime.path }
    }

    /// The `coffer` binary: `$COFFER_BIN` (set by scripts/test.sh), else `.build/debug/coffer` in the repository.
    public static var binary: String {
        if let path = ProcessInfo.processInfo.environment["COFFER_BIN"], !path.isEmpty { return path }
        return TestServers.repoRoot.appendingPathComponent(".build/debug/coffer").path
    }

    /// `coffer-core`, beside ``binary``: what `coffer` becomes for every command it does not answer itself.
    public static var coreBinary: String {
        URL(fileURLWithPath: binary).deletingLastPathComponent().appendingPathComponent("coffer-core").path
    }

    /// The environment of a command: this process's, without `COFFER_HOME`, with ``extraEnvironment``.
    public var environment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["COFFER_HOME"] = nil
        environment.merge(extraEnvironment) { $1 }
        return environment
    }

    /// Starts `coffer args…` with `--home <home>` after the leading words (the command and its arguments) unless
    /// `withHome` is false, under `setsid`, writes `input` to its standard input and closes it; the caller waits.
    public func start(
        _ arguments: [String],
        input: String = "",
        withHome: Bool = true
    ) throws -> (process: Process, stdout: Pipe, stderr: Pipe) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setsid")
        var full = [executable]
        if withHome {
            // After the command's words (`account add`), before its options.
            let words = arguments.prefix { !$0.hasPrefix("-") }.count
            full += arguments[..<words] + ["--home", home.path] + arguments[words...]
        } else {
            full += arguments
        }
        process.arguments = ["--wait"] + full
        process.environment = environment
        let stdin = Pipe()
        let stdout = Pipe()
        let stderr = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stderr
        // A command that exits before reading its input (a refused option) closes the pipe: the write must fail
        // with EPIPE, not kill the test process with SIGPIPE.
        signal(SIGPIPE, SIG_IGN)
        try process.run()
        try? stdin.fileHandleForWriting.write(contentsOf: Data(input.utf8))
        try stdin.fileHandleForWriting.close()
        return (process, stdout, stderr)
    }

    /// Runs `coffer args…` as ``start(_:input:withHome:)`` does and waits for it, on the calling task's thread.
    ///
    /// The wait stays there on purpose. Awaited on ``BlockingPool``, the commands of parallel tests held its four
    /// threads, and an in-process agent's request queued behind them past its test's 60 s bound. Awaited on a thread
    /// of its own per command, `endingTheAgentWhileClientsConnectClosesEveryConnection` failed 8 times in one run.
    public func run(_ arguments: [String], input: String = "", withHome: Bool = true) async throws -> Result {
        try runBlocking(arguments, input: input, withHome: withHome)
    }

    /// ``run(_:input:withHome:)`` for code that is not async (a thread of its own).
    public func runBlocking(_ arguments: [String], input: String = "", withHome: Bool = true) throws -> Result {
        let (process, stdout, stderr) = try start(arguments, input: input, withHome: withHome)
        let out = stdout.fileHandleForReading.readDataToEndOfFile()
        let err = stderr.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Result(
            status: process.terminationStatus,
            stdout: String(decoding: out, as: UTF8.self),
            stderr: String(decoding: err, as: UTF8.self)
        )
    }

    /// A `coffer agent` that did not answer `status` within 20 s.
    public struct AgentDidNotStart: Error, CustomStringConvertible {
        public var description: String { "the agent did not come up within 20 s" }
    }

    /// Starts `coffer agent` for this home (its output discarded) and waits, at most 20 s, until `status` reaches
    /// it. End it with ``stopAgent(_:)``.
    public func startAgent() async throws -> Process {
        let agent = Process()
        agent.executableURL = URL(fileURLWithPath: Self.binary)
        agent.arguments = ["agent", "--home", home.path]
        agent.environment = environment
        agent.standardOutput = FileHandle.nullDevice
        agent.standardError = FileHandle.nullDevice
        try agent.run()
        for _ in 0..<200 {
            if try await run(["status"]).stdout.contains("mode: agent") { return agent }
            try await Task.sleep(for: .milliseconds(100))
        }
        Self.stopAgent(agent)
        throw AgentDidNotStart()
    }

    /// SIGTERM to an agent from ``startAgent()``, then waits for it to exit.
    public static func stopAgent(_ agent: Process) {
        kill(agent.processIdentifier, SIGTERM)
        agent.waitUntilExit()
    }
}
