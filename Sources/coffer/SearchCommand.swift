import ArgumentParser
import CofferAgentProtocol
import CofferStore

struct SearchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "search",
        abstract: "Find messages containing every word (subject, sender, recipients, text), newest first.",
        discussion: "The search uses the blind index: keyed hashes of words, never the words themselves."
    )

    @OptionGroup var home: HomeOptions
    @OptionGroup var pinOptions: PINOptions
    @Option(name: .long, help: "How many messages.") var limit = 50
    @Option(name: .long, help: "How many of the newest matches to skip.") var offset = 0
    @Argument(help: "The words.") var words: [String]

    func run() async throws {
        try await runReportingErrors {
            try await CommandPath.with(home) { path in
                let account = try await path.mailAccount(home, pinOptions)
                let request = AgentRequest.search(
                    account: account,
                    words: words.joined(separator: " "),
                    limit: limit,
                    offset: offset
                )
                guard case .summaries(let found) = try await path.call(request) else { throw AppError.malformedMessage }
                for summary in found { print(MessageLine.format(summary)) }
                if found.isEmpty { print("No messages match.") }
            }
        }
    }
}
