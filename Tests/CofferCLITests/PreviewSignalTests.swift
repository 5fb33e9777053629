import CofferTesting
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A decrypted preview never outlives its command: Enter, Ctrl-C, a hung-up terminal or SIGTERM at the "press Enter"
/// prompt all delete it, and a command that opens the cache deletes what a killed process left.
@Suite(.serialized) struct PreviewSignalTests {
    enum Interruption: String, CaseIterable {
        case enter = "ENTER"
        case interrupt = "SIGINT"
        case terminate = "SIGTERM"
        case hangUp = "SIGHUP"

        /// The exit status the driver reports: 0, or minus the signal that ended the process.
        var expectedExit: String {
            switch self {
            case .enter: "exit: 0"
            case .interrupt: "exit: -\(SIGINT)"
            case .terminate: "exit: -\(SIGTERM)"
            case .hangUp: "exit: -\(SIGHUP)"
            }
        }
    }

    static let commands: [[String]] = [["attachment", "open", "1"], ["show", "1", "--html"]]

    /// A home with one message that has an attachment, and its own runtime folder.
    static func home() async throws -> (CLIRunner, TemporaryDirectory) {
        let runtime = TemporaryDirectory(prefix: "coffer-xdg")
        var cli = CLIRunner()
        cli.extraEnvironment["XDG_RUNTIME_DIR"] = runtime.path
        #expect(try await cli.run(["init", "--account", "alice"]).status == 0)
        let eml = "\(cli.home.path)/one.eml"
        try messageWithAttachment(canary: "C-SIGNAL").write(toFile: eml, atomically: true, encoding: .utf8)
        #expect(try await cli.run(["import", eml]).status == 0)
        return (cli, runtime)
    }

    /// Runs `coffer arguments` on a pseudo-terminal through the pty driver, with no `xdg-open` on the path (so
    /// coffer prints the file's path and waits for Enter), and interrupts it at the prompt.
    static func interrupt(
        _ cli: CLIRunner,
        _ arguments: [String],
        with interruption: Interruption,
        environment: [String: String]
    ) throws -> String {
        let variables = environment.merging(["PATH": "/nonexistent"]) { $1 }.map { "\($0.key)=\($0.value)" }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments =
            [
                "python3", CLIRunner.ptyDriver.path, "preview", interruption.rawValue, "/usr/bin/env", "-u",
                "COFFER_HOME",
            ] + variables
            + [CLIRunner.binary] + arguments + ["--home", cli.home.path]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return text
    }

    @Test(arguments: commands, Interruption.allCases)
    func thePreviewIsGoneHoweverThePromptEnds(command: [String], interruption: Interruption) async throws {
        let (cli, runtime) = try await Self.home()
        let output = try Self.interrupt(
            cli,
            command,
            with: interruption,
            environment: ["XDG_RUNTIME_DIR": runtime.path]
        )
        let previews = "\(runtime.path)/coffer-previews"
        #expect(output.contains("preview: \(previews)/"), "\(output)")
        #expect(output.contains("before: present"), "the prompt must wait with the file in place: \(output)")
        #expect(output.contains("after: absent"), "\(output)")
        #expect(output.contains(interruption.expectedExit), "\(output)")
        #expect(TemporaryDirectory.files(below: previews).isEmpty, "a cleartext preview survived \(interruption)")
        let folders = (try? FileManager.default.contentsOfDirectory(atPath: previews)) ?? []
        #expect(folders.isEmpty, "\(folders)")
    }

    @Test(.enabled(if: Self.sharedMemoryIsUsable, "needs /dev/shm as a tmpfs with mode 1777"))
    func withoutARuntimeFolderThePreviewStaysInMemory() async throws {
        let (cli, _) = try await Self.home()
        let output = try Self.interrupt(cli, ["attachment", "open", "1"], with: .interrupt, environment: [:])
        // `env -u` is not needed: the driver's environment has no XDG_RUNTIME_DIR when the test's has none.
        let expected = "/dev/shm/coffer-previews-\(getuid())/"
        if ProcessInfo.processInfo.environment["XDG_RUNTIME_DIR"] == nil {
            #expect(output.contains("preview: \(expected)"), "\(output)")
        }
        #expect(output.contains("before: present") && output.contains("after: absent"), "\(output)")
    }

    static var sharedMemoryIsUsable: Bool {
        var info = stat()
        return lstat("/dev/shm", &info) == 0 && info.st_mode & 0o7777 == 0o1777
            && ProcessInfo.processInfo.environment["XDG_RUNTIME_DIR"] == nil
    }

    @Test func aCommandThatOpensTheCacheDeletesADeadProcesssPreview() async throws {
        let (cli, runtime) = try await Self.home()
        let previews = "\(runtime.path)/coffer-previews"
        // A process that has ended, and one that runs (this test).
        let ended = Process()
        ended.executableURL = URL(fileURLWithPath: "/bin/true")
        try ended.run()
        ended.waitUntilExit()
        let dead = "\(previews)/\(ended.processIdentifier)-0123456789abcdef"
        let alive = "\(previews)/\(getpid())-fedcba9876543210"
        for folder in [dead, alive] {
            try FileManager.default.createDirectory(
                atPath: folder,
                withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700]
            )
            try "cleartext".write(toFile: "\(folder)/attachment.txt", atomically: true, encoding: .utf8)
        }
        #expect(chmod(previews, 0o700) == 0)
        let list = try await cli.run(["list"])
        #expect(list.status == 0, "\(list.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dead), "a dead process's preview survived")
        #expect(FileManager.default.fileExists(atPath: "\(alive)/attachment.txt"), "a live process's preview was taken")
    }
}
