import ArgumentParser
import CofferAgentProtocol
import CofferCommandLine
import CofferReading
import CofferStore

#if canImport(Glibc)
import Glibc
#endif

extension CommandPath: MailCaller {
    /// The chosen account for a command that needs its key, and returns its name: one-shot, it is unlocked here
    /// first; an agent is asked as it is, and answers `locked` while it does not hold the key (`coffer unlock`
    /// gives it the key; a mail command never unlocks the agent on the side).
    func mailAccount(_ home: HomeOptions, _ pin: PINOptions) async throws -> String {
        if isAgent { return try await account(home).account }
        return try await unlock(home, pinFromStdin: pin.pinStdin).status.account
    }

    /// Runs `request` by this path.
    func reply(to request: AgentRequest) async throws -> AgentReply { try await call(request) }
}

struct ImportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Import a .eml file, an mbox file or a Maildir folder into the sealed mail store.",
        discussion: """
            Messages are sealed in transactions of --batch messages; an interrupted import loses at most the batch in \
            flight, and running it again completes it (messages already stored are skipped).
            """
    )

    @OptionGroup var home: HomeOptions
    @OptionGroup var pinOptions: PINOptions
    @Argument(help: "The .eml file, mbox file or Maildir folder.") var path: String
    @Option(name: .long, help: "The label for the imported messages.") var label = "Inbox"
    @Option(name: .long, help: "Messages per transaction.") var batch = MailStore.defaultBatchSize

    func validate() throws {
        guard batch > 0 else { throw ValidationError("--batch must be positive.") }
    }

    func run() async throws {
        try await runReportingErrors {
            try await CommandPath.with(home) { path in
                let account = try await path.mailAccount(home, pinOptions)
                let line = ProgressLine(descriptor: 1)
                let request = AgentRequest.import(
                    account: account,
                    path: absolutePath(self.path),
                    label: label,
                    batch: batch
                )
                let reply = try await path.call(request) { event in
                    guard case .progress(let progress) = event else { return }
                    if line.isActive {
                        line.show("\(progress.total) messages, \(Int(progress.rate.rounded()))/s")
                    } else {
                        print("progress: \(progress.total) messages")
                    }
                }
                line.finish()
                guard case .imported(let result) = reply else { throw AppError.malformedMessage }
                print(
                    "Imported \(result.imported) messages (\(result.duplicates) already stored, \(result.malformed) "
                        + "unreadable) in \(String(format: "%.1f", result.elapsedSeconds)) s."
                )
            }
        }
    }
}
