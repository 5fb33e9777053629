import CofferTesting
import Foundation
import Testing

/// `coffer protect pin --tpm` and `coffer status` against a private swtpm (COFFER_TPM_TCTI), and without a TPM.
@Suite("TPM-bound PIN through the CLI (TPMCLITests)", .timeLimit(.minutes(3)))
struct TPMCLITests {
    static let pin = "246813"

    func initialized(tcti: String) async throws -> CLIRunner {
        var cli = CLIRunner(prefix: "coffer-tpm-cli")
        cli.extraEnvironment["COFFER_TPM_TCTI"] = tcti
        #expect(try await cli.run(["init", "--account", "alice"]).status == 0)
        return cli
    }

    @Test func protectPinTPMBindsThePINAndStatusSaysSo() async throws {
        let folder = TemporaryDirectory(prefix: "coffer-tpm-cli-state")
        let tpm = try SoftwareTPM(stateDirectory: folder.path)
        let cli = try await initialized(tcti: tpm.configuration)
        let protect = try await cli.run(["protect", "pin", "--tpm", "--pin-stdin"], input: "\(Self.pin)\n")
        #expect(protect.status == 0, "\(protect.stderr)")
        #expect(protect.stdout.contains("bound to this machine's TPM"), "\(protect.stdout)")
        #expect(protect.stdout.contains("protected by: pin (TPM)"), "\(protect.stdout)")
        let status = try await cli.run(["status"])
        #expect(status.stdout.contains("protection: pin (TPM)"), "\(status.stdout)")
        let wrong = try await cli.run(["unlock", "--pin-stdin"], input: "900001\n")
        #expect(wrong.status != 0)
        #expect(wrong.stderr.contains("Wrong PIN. 9 attempts left."), "\(wrong.stderr)")
        let right = try await cli.run(["unlock", "--pin-stdin"], input: "\(Self.pin)\n")
        #expect(right.status == 0, "\(right.stderr)")
        // The same home with the TPM gone: the bound PIN cannot be tried, and nothing is counted or erased.
        var away = cli
        away.extraEnvironment["COFFER_TPM_TCTI"] = "swtpm:host=127.0.0.1,port=1"
        let refused = try await away.run(["unlock", "--pin-stdin"], input: "\(Self.pin)\n")
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("No TPM is available"), "\(refused.stderr)")
        #expect(try await cli.run(["status"]).stdout.contains("failed PIN attempts: 0 of 10"))
        #expect(try await cli.run(["unlock", "--pin-stdin"], input: "\(Self.pin)\n").status == 0)
    }

    @Test func withoutATPMProtectPinTPMSaysSoInOneSentenceAndChangesNothing() async throws {
        let cli = try await initialized(tcti: "swtpm:host=127.0.0.1,port=1")
        let refused = try await cli.run(["protect", "pin", "--tpm", "--pin-stdin"], input: "\(Self.pin)\n")
        #expect(refused.status != 0)
        let lines = refused.stderr.split(separator: "\n")
        #expect(lines.count == 1, "\(refused.stderr)")
        #expect(refused.stderr.contains("nothing was changed"), "\(refused.stderr)")
        #expect(try await cli.run(["status"]).stdout.contains("protection: none"))
        // The software PIN still works.
        let software = try await cli.run(["protect", "pin", "--pin-stdin"], input: "\(Self.pin)\n")
        #expect(software.status == 0, "\(software.stderr)")
        #expect(try await cli.run(["status"]).stdout.contains("protection: pin (software)"))
        #expect(try await cli.run(["unlock", "--pin-stdin"], input: "\(Self.pin)\n").status == 0)
    }

    /// Through the agent, `status` names the element too: the agent reports `pin (TPM)`, not a bare `pin`.
    @Test func theAgentsStatusNamesTheTPM() async throws {
        let folder = TemporaryDirectory(prefix: "coffer-tpm-cli-state")
        let tpm = try SoftwareTPM(stateDirectory: folder.path)
        var (cli, runtime) = AgentProcess.runner()
        cli.extraEnvironment["COFFER_TPM_TCTI"] = tpm.configuration
        #expect(try await cli.run(["init", "--account", "alice"]).status == 0)
        let protect = try await cli.run(["protect", "pin", "--tpm", "--pin-stdin"], input: "\(Self.pin)\n")
        try #require(protect.status == 0, "\(protect.stderr)")
        let agent = try await AgentProcess(cli, runtime: runtime)
        defer { agent.stop() }
        let status = try await cli.run(["status"])
        #expect(status.stdout.contains("mode: agent"), "\(status.stdout)")
        #expect(status.stdout.contains("protection: pin (TPM)"), "\(status.stdout)")
    }
}
