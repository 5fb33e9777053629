import ArgumentParser
import CofferAgentProtocol
import CofferCommandLine
import CofferReading

struct AttachmentsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "attachments",
        abstract: "List a message's attachments: id, size, type, file name."
    )

    @OptionGroup var home: HomeOptions
    @OptionGroup var pinOptions: PINOptions
    @Argument(help: "The message id.") var id: Int64

    func run() async throws {
        try await runReportingErrors {
            try await CommandPath.with(home) { path in
                let account = try await path.mailAccount(home, pinOptions)
                guard
                    case .attachments(let attachments) = try await path.call(
                        .attachments(account: account, message: id)
                    )
                else { throw AppError.malformedMessage }
                for attachment in attachments {
                    print(
                        "\(attachment.id)\t\(attachment.size)\t\(attachment.contentType)\t\(attachment.filename ?? "")"
                    )
                }
                if attachments.isEmpty { print("Message \(id) has no attachments.") }
            }
        }
    }
}

struct AttachmentCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "attachment",
        abstract: "Open an attachment in a viewer, or save a cleartext copy.",
        subcommands: [Open.self, Save.self]
    )

    struct Open: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "open",
            abstract: "Decrypt to a private temporary folder, run the viewer, and delete the file when it returns."
        )

        @OptionGroup var home: HomeOptions
        @OptionGroup var pinOptions: PINOptions
        @Option(
            name: .long,
            help:
                "The viewer command (run through /bin/sh with the file as its argument; default: xdg-open, then Enter)."
        )
        var viewer: String?
        @Argument(help: "The attachment id.") var id: Int64

        func run() async throws {
            try await runReportingErrors {
                let status = try await CommandPath.with(home) { path in
                    let account = try await path.mailAccount(home, pinOptions)
                    return try await path.view(.attachment(id: id), account: account, viewer: viewer)
                }
                // A viewer that fails (cannot open the file, is killed) is the command failing: say so and exit
                // non-zero. The preview is deleted either way.
                guard status == 0 else {
                    throw CLIError("The viewer failed (exit status \(status)); the decrypted copy was deleted.")
                }
                print("The viewer exited with status 0; the decrypted copy was deleted.")
            }
        }
    }

    struct Save: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "save",
            abstract: "Save a cleartext copy (mode 0600): the only way to keep one outside Coffer."
        )

        @OptionGroup var home: HomeOptions
        @OptionGroup var pinOptions: PINOptions
        @Argument(help: "The attachment id.") var id: Int64
        @Option(name: .long, help: "Where to write the file (must not exist).") var to: String

        func run() async throws {
            try await runReportingErrors {
                try await CommandPath.with(home) { path in
                    let account = try await path.mailAccount(home, pinOptions)
                    try await path.call(.save(account: account, id: id, path: absolutePath(to)))
                }
                print("Saved attachment \(id) to \(to).")
            }
        }
    }
}
