import CofferTesting
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `coffer` answers `list`, `search` and `show` through a running agent by itself, and becomes `coffer-core` for the
/// rest (docs/APP.md, "Two programs").
@Suite(.serialized) struct TwoProgramsTests {
    /// A home with an unlocked agent and three messages.
    static func unlockedAgent() async throws -> (CLIRunner, AgentProcess) {
        let (cli, runtime) = AgentProcess.runner()
        #expect(try await cli.run(["init", "--account", "alice"]).status == 0)
        let agent = try await AgentProcess(cli, runtime: runtime)
        #expect(try await cli.run(["unlock"]).status == 0)
        for index in 1...3 {
            let eml = "\(cli.home.path)/\(index).eml"
            try messageWithAttachment(canary: "C-\(index)").replacingOccurrences(
                of: "Subject: Quarterly numbers",
                with: "Subject: Quarterly numbers \(index)"
            ).write(toFile: eml, atomically: true, encoding: .utf8)
            #expect(try await cli.run(["import", eml]).status == 0)
        }
        return (cli, agent)
    }

    static let reads = [
        ["list"], ["list", "--limit", "1", "--offset", "1"], ["list", "--limit=2"], ["search", "quarterly", "numbers"],
        ["search", "nothing"], ["show", "2"], ["show", "2", "--headers"], ["show", "--headers", "1"],
    ]

    @Test func bothProgramsPrintTheSameForEveryRead() async throws {
        let (cli, agent) = try await Self.unlockedAgent()
        var core = cli
        core.executable = CLIRunner.coreBinary
        for arguments in Self.reads {
            let small = try await cli.run(arguments)
            let full = try await core.run(arguments)
            #expect(small.status == 0 && full.status == 0, "\(arguments): \(small.stderr) \(full.stderr)")
            #expect(!small.stdout.isEmpty && small.stdout == full.stdout, "\(arguments)")
        }
        agent.stop()
    }

    @Test func readsNeedNoCoreAndEverythingElseBecomesIt() async throws {
        let (cli, agent) = try await Self.unlockedAgent()
        // `coffer` alone in a folder: the reads still work, so it answered them itself.
        let folder = TemporaryDirectory(prefix: "coffer-alone")
        let alone = "\(folder.path)/coffer"
        try FileManager.default.copyItem(atPath: CLIRunner.binary, toPath: alone)
        var small = cli
        small.executable = alone
        for arguments in Self.reads {
            let result = try await small.run(arguments)
            #expect(result.status == 0, "\(arguments): \(result.stderr)")
        }
        #expect(try await small.run(["list"]).stdout.contains("Quarterly numbers 3"))
        // A command it does not answer, bad options, help, a message that is not there and the HTML view each
        // become coffer-core, which is missing here: a clear error, not a crash.
        for arguments in [
            ["status"], ["list", "--bogus"], ["list", "--help"], ["show", "99"], ["show", "2", "--html"],
        ] {
            let result = try await small.run(arguments)
            #expect(result.status == 127, "\(arguments)")
            #expect(result.stderr.contains("could not start \(folder.path)/coffer-core"), "\(arguments)")
            #expect(result.stdout.isEmpty, "\(arguments): nothing is printed before coffer-core runs")
        }
        // With coffer-core beside it, the same commands run there.
        #expect(try await cli.run(["show", "99"]).stderr.contains("There is no message 99."))
        #expect(try await cli.run(["status"]).stdout.contains("mode: agent"))
        // Locked: coffer-core says so, with the way out.
        #expect(try await cli.run(["lock"]).status == 0)
        let locked = try await cli.run(["list"])
        #expect(locked.status == 1 && locked.stderr.contains("Run `coffer unlock`"), "\(locked.stderr)")
        agent.stop()
    }

    /// `coffer` sends its one request with `--account` or none, and the agent chooses as for every command: the
    /// only account, or none of two (then coffer-core, beside it or not, says how to choose).
    @Test func theAgentChoosesTheAccountOfARead() async throws {
        let (cli, agent) = try await Self.unlockedAgent()
        let folder = TemporaryDirectory(prefix: "coffer-alone")
        var small = cli
        small.executable = "\(folder.path)/coffer"
        try FileManager.default.copyItem(atPath: CLIRunner.binary, toPath: small.executable)
        #expect(try await small.run(["list"]).stdout.contains("Quarterly numbers 3"))
        #expect(try await cli.run(["init", "--account", "bob"]).status == 0)
        #expect(try await cli.run(["lock", "--account", "bob"]).status == 0)
        for arguments in [["list"], ["search", "quarterly"], ["show", "2"]] {
            #expect(try await small.run(arguments).status == 127, "\(arguments): coffer-core is needed to say why")
            let refused = try await cli.run(arguments)
            #expect(refused.status == 1 && refused.stderr.contains("choose one with --account"), "\(refused.stderr)")
            let chosen = try await small.run(arguments + ["--account", "alice"])
            #expect(chosen.status == 0 && chosen.stdout.contains("Quarterly numbers"), "\(arguments): \(chosen.stderr)")
            #expect(try await small.run(arguments + ["--account", "bob"]).status == 127, "bob is locked")
        }
        agent.stop()
    }
}
