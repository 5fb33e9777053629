import ArgumentParser
import CofferCommandLine

struct SearchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "search",
        abstract: "Find messages containing every word (subject, sender, recipients, text), newest first.",
        discussion: "The search uses the blind index: keyed hashes of words, never the words themselves."
    )

    @OptionGroup var options: SearchOptions

    func run() async throws {
        try await runReportingErrors {
            try await CommandPath.with(options.home) { path in try await options.run(path) }
        }
    }
}
