import CofferTesting
import Foundation
import Testing

@Suite(.serialized) struct CLITests {
    @Test func theTourRunsAndFindsNothingOnDisk() async throws {
        let cli = CLIRunner()
        let result = try await cli.run([], withHome: false)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("the planted control found, 0 containing the token, the key or the mail"))
        #expect(result.stdout.contains("Wrong PIN. 9 attempts left."))
        #expect(result.stdout.contains("(0 keychain items left)"))
    }

    @Test func theLifecycleWithAPINFromStandardInput() async throws {
        let cli = CLIRunner()
        #expect(try await cli.run(["init", "--account", "alice@example.com"]).status == 0)
        let status = try await cli.run(["status"])
        #expect(status.stdout.contains("protection: none"))
        let protect = try await cli.run(["protect", "pin", "--pin-stdin"], input: "739146\n")
        #expect(protect.status == 0, "\(protect.stderr)")
        #expect(protect.stdout.contains("protected by: pin"))

        let wrong = try await cli.run(["unlock", "--pin-stdin"], input: "0000\n")
        #expect(wrong.status == 1)
        #expect(wrong.stderr == "coffer: Wrong PIN. 9 attempts left.\n")
        #expect(try await cli.run(["status"]).stdout.contains("failed PIN attempts: 1 of 10"))

        let right = try await cli.run(["unlock", "--pin-stdin"], input: "739146\n")
        #expect(right.status == 0, "\(right.stderr)")
        #expect(try await cli.run(["status"]).stdout.contains("failed PIN attempts: 0 of 10"))

        let autolock = try await cli.run(["autolock", "5m", "--pin-stdin"], input: "739146\n")
        #expect(autolock.stdout.contains("Autolock for alice@example.com: 5m"))

        let none = try await cli.run(["protect", "none", "--pin-stdin"], input: "739146\n")
        #expect(none.stdout.contains("protected by: none"))
        #expect(try await cli.run(["logout", "--yes"]).status == 0)
        #expect(try await cli.run(["status"]).stdout.contains("accounts: none"))
        let all = [status, protect, wrong, right, autolock, none].map { $0.stdout + $0.stderr }.joined()
        #expect(!all.contains("739146"), "the PIN must never be echoed")
    }

    @Test(arguments: [
        (["unlock"], "There is no account on this device yet; run `coffer init --account NAME`."),
        (["init"], "init needs --account NAME."),
        (
            ["autolock", "sometimes"],
            "The autolock policy must be never, background, or a duration such as 30s, 5m or 1h."
        ),
    ])
    func badInputIsOneSentenceAndExitsNonZero(arguments: [String], message: String) async throws {
        let result = try await CLIRunner().run(arguments)
        #expect(result.status != 0)
        #expect(result.stderr.contains(message))
        #expect(result.stderr.split(separator: "\n").count <= 3)
    }

    @Test(arguments: [["--pin", "739146"], ["--pin=739146"]])
    func aPINIsNeverTakenFromArguments(pinArguments: [String]) async throws {
        // The account exists and its PIN is 739146, so only the argument itself can be the reason for a refusal.
        let cli = CLIRunner()
        #expect(try await cli.run(["init", "--account", "alice"]).status == 0)
        #expect(try await cli.run(["protect", "pin", "--pin-stdin"], input: "739146\n").status == 0)
        let result = try await cli.run(["unlock"] + pinArguments)
        #expect(result.status != 0)
        #expect(result.stderr.contains("Unknown option '--pin'"), "\(result.stderr)")
        #expect(!result.stdout.contains("Unlocked"))
        // Nothing was tried: the count did not move, and the right PIN from standard input still works.
        #expect(try await cli.run(["status"]).stdout.contains("failed PIN attempts: 0 of 10"))
        #expect(try await cli.run(["unlock", "--pin-stdin"], input: "739146\n").status == 0)
    }

    @Test func logoutRefusesWithoutConfirmationWhenNotAtATerminal() async throws {
        let cli = CLIRunner()
        _ = try await cli.run(["init", "--account", "bob"])
        let result = try await cli.run(["logout"])
        #expect(result.status == 1)
        #expect(result.stderr.contains("pass --yes"))
        #expect(try await cli.run(["status"]).stdout.contains("account: bob"))
    }

    @Test func theSecureElementNeedsPresenceOnTheTerminal() async throws {
        let cli = CLIRunner()
        _ = try await cli.run(["init", "--account", "carol"])
        let protect = try await cli.run(["protect", "secure-element"])
        #expect(protect.status == 0, "\(protect.stderr)")

        // Without a terminal (a pipe, setsid): refused.
        let piped = try await cli.run(["unlock"], input: "0000\n")
        #expect(piped.status == 1)
        #expect(piped.stderr.contains("Presence cannot be confirmed: there is no terminal"))

        // On a terminal, the wrong code is refused and the right one unlocks.
        let refused = try cli.runOnTerminal(["unlock"], answerPresence: false)
        #expect(refused.status == 1)
        #expect(refused.stdout.contains("presence, not identity"))
        let answered = try cli.runOnTerminal(["unlock"], answerPresence: true)
        #expect(answered.status == 0, "\(answered.stdout)")
        #expect(answered.stdout.contains("Unlocked carol"))
    }
}
