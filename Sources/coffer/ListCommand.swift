import ArgumentParser
import CofferAgentProtocol
import CofferStore

struct ListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List messages, newest first: id, date, flags (N new, F flagged, @ attachments), sender, subject."
    )

    @OptionGroup var home: HomeOptions
    @OptionGroup var pinOptions: PINOptions
    @Option(name: .long, help: "Only messages under this label.") var label: String?
    @Option(name: .long, help: "How many messages.") var limit = 50
    @Option(name: .long, help: "How many of the newest to skip.") var offset = 0

    func run() async throws {
        try await runReportingErrors {
            try await CommandPath.with(home) { path in
                let account = try await path.mailAccount(home, pinOptions)
                let request = AgentRequest.list(account: account, label: label, limit: limit, offset: offset)
                guard case .summaries(let summaries) = try await path.call(request) else {
                    throw AppError.malformedMessage
                }
                for summary in summaries { print(MessageLine.format(summary)) }
            }
        }
    }
}
