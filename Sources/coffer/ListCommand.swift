import ArgumentParser
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
            let mail = try await MailSession.open(home, pinOptions)
            for summary in try await mail.store.list(label: label, limit: limit, offset: offset) {
                print(MessageLine.format(summary))
            }
            try mail.close()
        }
    }
}
