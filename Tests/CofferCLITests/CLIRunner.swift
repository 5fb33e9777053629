import CofferTesting
import Foundation

extension CLIRunner {
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
        process.environment = environment
        let stdout = Pipe()
        process.standardOutput = stdout
        process.standardError = stdout
        try process.run()
        let out = stdout.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Result(status: process.terminationStatus, stdout: String(decoding: out, as: UTF8.self), stderr: "")
    }
}
