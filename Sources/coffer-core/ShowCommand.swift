import ArgumentParser
import CofferCommandLine

struct ShowCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Show one message: its main headers, its text and its attachments."
    )

    @OptionGroup var options: ShowOptions

    func run() async throws {
        try await runReportingErrors {
            try await CommandPath.with(options.home) { path in
                guard options.html else { return try await options.run(path) }
                let account = try await path.mailAccount(options.home, options.pinOptions)
                let status = try await path.view(
                    .message(id: options.id, allowRemote: options.allowRemote),
                    account: account,
                    viewer: options.viewer
                )
                print("The viewer exited with status \(status); the page was deleted.")
            }
        }
    }
}
