import ArgumentParser
import CofferCommandLine

struct ListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List messages, newest first: id, date, flags (N new, F flagged, @ attachments), sender, subject."
    )

    @OptionGroup var options: ListOptions

    func run() async throws {
        try await runReportingErrors {
            try await CommandPath.with(options.home) { path in try await options.run(path) }
        }
    }
}
