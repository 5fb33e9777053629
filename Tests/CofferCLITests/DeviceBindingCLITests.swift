import CofferTesting
import Foundation
import Testing

/// Files from another device, a lost device secret, and read-only commands on a home that does not exist.
@Suite(.serialized) struct DeviceBindingCLITests {
    static let otherDevice = "coffer: These files belong to another device (or the device secret is gone)"

    /// Every file and folder below `root`, with its bytes (folders as `nil`), to show that nothing changed.
    static func snapshot(_ root: String) -> [String: Data?] {
        var found: [String: Data?] = [:]
        let enumerator = FileManager.default.enumerator(atPath: root)
        while let relative = enumerator?.nextObject() as? String {
            let path = "\(root)/\(relative)"
            var isFolder: ObjCBool = false
            _ = FileManager.default.fileExists(atPath: path, isDirectory: &isFolder)
            found[relative] = isFolder.boolValue ? nil : FileManager.default.contents(atPath: path)
        }
        return found
    }

    @Test func filesFromAnotherDeviceAreReportedNotTakenForNoAccount() async throws {
        let cli = CLIRunner()
        #expect(try await cli.run(["init", "--account", "alice"]).status == 0)
        // Another device: the same folders under another device secret (a new machine id changes the item keys the
        // same way for the this-device-only items that hold the MainKey).
        let secret = "\(cli.home.path)/state/device-secret"
        var other = Array("CFDS".utf8) + [1]
        other += (0..<32).map { _ in UInt8.random(in: 0...255) }
        try Data(other).write(to: URL(fileURLWithPath: secret))
        chmod(secret, 0o600)
        let before = Self.snapshot(cli.home.path)
        for command in [["status"], ["unlock"], ["list"], ["logout", "--yes"]] {
            let result = try await cli.run(command)
            #expect(result.status == 1, "\(command)")
            #expect(result.stderr.hasPrefix(Self.otherDevice), "\(command): \(result.stderr)")
            #expect(!result.stdout.contains("accounts: none"))
        }
        #expect(Self.snapshot(cli.home.path) == before, "a refused command changed the home")
    }

    /// Runs `coffer args… --home <cli's home>` in a private mount namespace where `/etc/machine-id` reads
    /// `machineID`: the binary itself, on "another machine".
    static func runOnAnotherMachine(
        _ cli: CLIRunner,
        machineID: String,
        _ arguments: [String]
    ) throws -> CLIRunner.Result {
        let file = "\(cli.home.path)/other-machine-id"
        try Data("\(machineID)\n".utf8).write(to: URL(fileURLWithPath: file))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
        process.arguments =
            [
                "-m", "sh", "-c", "mount --bind \"$0\" /etc/machine-id && exec \"$@\"", file, CLIRunner.binary,
            ] + arguments + ["--home", cli.home.path]
        var environment = ProcessInfo.processInfo.environment
        environment["COFFER_HOME"] = nil
        process.environment = environment
        let stdout = Pipe()
        let stderr = Pipe()
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = stdout
        process.standardError = stderr
        try process.run()
        let out = stdout.fileHandleForReading.readDataToEndOfFile()
        let err = stderr.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return CLIRunner.Result(
            status: process.terminationStatus,
            stdout: String(decoding: out, as: UTF8.self),
            stderr: String(decoding: err, as: UTF8.self)
        )
    }

    /// Whether this machine lets a test give a process its own `/etc/machine-id` (root, mount namespaces).
    static let canChangeTheMachineID: Bool = {
        guard geteuid() == 0, FileManager.default.fileExists(atPath: "/etc/machine-id"),
            FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare")
        else { return false }
        let probe = Process()
        probe.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
        probe.arguments = ["-m", "sh", "-c", "mount --bind /dev/null /etc/machine-id"]
        probe.standardError = FileHandle.nullDevice
        guard (try? probe.run()) != nil else { return false }
        probe.waitUntilExit()
        return probe.terminationStatus == 0
    }()

    @Test(.enabled(if: canChangeTheMachineID, "needs root and mount namespaces to give coffer another machine id"))
    func anotherMachineIDIsReportedNotTakenForNoAccount() async throws {
        let cli = CLIRunner()
        #expect(try await cli.run(["init", "--account", "alice"]).status == 0)
        let before = Self.snapshot(cli.home.path)
        // Positive control: the same machine id through the same namespace trick still opens the account.
        let own = try String(contentsOfFile: "/etc/machine-id", encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let same = try Self.runOnAnotherMachine(cli, machineID: own, ["status"])
        #expect(same.status == 0, "\(same.stderr)")
        #expect(same.stdout.contains("account: alice"))
        for command in [["status"], ["unlock"], ["list"]] {
            let result = try Self.runOnAnotherMachine(cli, machineID: "0000000000000000000000000000beef", command)
            #expect(result.status == 1, "\(command)")
            #expect(result.stderr.hasPrefix(Self.otherDevice), "\(command): \(result.stderr)")
            #expect(!result.stdout.contains("accounts: none"))
        }
        var after = Self.snapshot(cli.home.path)
        after["other-machine-id"] = nil
        #expect(after == before, "a refused command changed the home")
    }

    @Test func aLostDeviceSecretIsReportedAndNeverRegenerated() async throws {
        let cli = CLIRunner()
        #expect(try await cli.run(["init", "--account", "alice"]).status == 0)
        let secret = "\(cli.home.path)/state/device-secret"
        try FileManager.default.removeItem(atPath: secret)
        for command in [["status"], ["unlock"], ["init", "--account", "bob"]] {
            let result = try await cli.run(command)
            #expect(result.status == 1, "\(command)")
            #expect(result.stderr.hasPrefix(Self.otherDevice), "\(command): \(result.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: secret), "a new device secret was made over the keychain")
    }

    @Test(arguments: [["status"], ["unlock"], ["list"], ["search", "word"], ["show", "1"], ["lock"]])
    func readOnlyCommandsOnAMissingHomeCreateNothing(command: [String]) async throws {
        let cli = CLIRunner()
        let home = "\(cli.home.path)/nonexistent/deep"
        let result = try await cli.run(command + ["--home", home], withHome: false)
        #expect(!FileManager.default.fileExists(atPath: "\(cli.home.path)/nonexistent"), "\(command) created \(home)")
        if command == ["status"] {
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdout.contains("accounts: none"))
        } else {
            #expect(result.status == 1)
            #expect(result.stderr.contains("There is no account on this device yet"), "\(command): \(result.stderr)")
        }
    }

    @Test func initCreatesTheHome() async throws {
        let cli = CLIRunner()
        let home = "\(cli.home.path)/new/deep"
        let result = try await cli.run(["init", "--home", home, "--account", "alice"], withHome: false)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(FileManager.default.fileExists(atPath: "\(home)/state/device-secret"))
        #expect(try await cli.run(["status", "--home", home], withHome: false).stdout.contains("account: alice"))
    }

    @Test func aDeviceSecretOpenToOthersIsRefused() async throws {
        let cli = CLIRunner()
        #expect(try await cli.run(["init", "--account", "alice"]).status == 0)
        chmod("\(cli.home.path)/state/device-secret", 0o644)
        let result = try await cli.run(["status"])
        #expect(result.status == 1)
        #expect(result.stderr.contains("refuses to use"), "\(result.stderr)")
        #expect(result.stderr.contains("mode 644"))
        chmod("\(cli.home.path)/state/device-secret", 0o600)
        #expect(try await cli.run(["status"]).status == 0)
    }
}
