import CofferTesting
import Foundation

/// Runs the built `coffer` executable as a user would.
struct CLIRunner {
    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    let home = TemporaryDirectory(prefix: "coffer-cli")
    /// Variables added to every command's environment (an agent test's own `XDG_RUNTIME_DIR`).
    var extraEnvironment: [String: String] = [:]

    /// The `coffer` binary: `$COFFER_BIN` (set by scripts/test.sh), else `.build/debug/coffer` in the repository.
    static var binary: String {
        if let path = ProcessInfo.processInfo.environment["COFFER_BIN"], !path.isEmpty { return path }
        let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        return repository.appendingPathComponent(".build/debug/coffer").path
    }

    /// Runs `coffer --home <temp> args…` detached from any terminal (`setsid`), with `input` on standard input.
    func run(_ arguments: [String], input: String = "", withHome: Bool = true) throws -> Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setsid")
        var full = [Self.binary]
        if withHome, let command = arguments.first {
            full += [command, "--home", home.path] + arguments.dropFirst()
        } else {
            full += arguments
        }
        process.arguments = ["--wait"] + full
        var environment = ProcessInfo.processInfo.environment
        environment["COFFER_HOME"] = nil
        environment.merge(extraEnvironment) { $1 }
        process.environment = environment
        let stdin = Pipe()
        let stdout = Pipe()
        let stderr = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stderr
        try process.run()
        stdin.fileHandleForWriting.write(Data(input.utf8))
        try stdin.fileHandleForWriting.close()
        let out = stdout.fileHandleForReading.readDataToEndOfFile()
        let err = stderr.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Result(
            status: process.terminationStatus,
            stdout: String(decoding: out, as: UTF8.self),
            stderr: String(decoding: err, as: UTF8.self)
        )
    }

    /// The pseudo-terminal driver, `Tests/CofferCLITests/pty_driver.py` (the person at the keyboard).
    static let ptyDriver = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
        "pty_driver.py"
    )

    /// Runs `coffer` inside a pseudo-terminal through ``ptyDriver``, which answers the secure element's presence
    /// prompt by typing the code it shows (as a person at the terminal would).
    /// `mode` overrides the driver's mode (`ignore`: never type anything).
    func runOnTerminal(_ arguments: [String], answerPresence: Bool, mode: String? = nil) throws -> Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        let command = arguments.first.map { [$0, "--home", home.path] + arguments.dropFirst() } ?? []
        process.arguments =
            ["python3", Self.ptyDriver.path, "presence", mode ?? (answerPresence ? "answer" : "refuse"), Self.binary]
            + command
        process.environment = ProcessInfo.processInfo.environment.merging(extraEnvironment) { $1 }
        let stdout = Pipe()
        process.standardOutput = stdout
        process.standardError = stdout
        try process.run()
        let out = stdout.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Result(status: process.terminationStatus, stdout: String(decoding: out, as: UTF8.self), stderr: "")
    }
}
