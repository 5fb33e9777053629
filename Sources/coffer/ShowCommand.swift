import ArgumentParser
import CofferAgentProtocol
import CofferMIME
import CofferStore

struct ShowCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Show one message: its main headers, its text and its attachments."
    )

    @OptionGroup var home: HomeOptions
    @OptionGroup var pinOptions: PINOptions
    @Flag(name: .long, help: "Print every header field.") var headers = false
    @Flag(name: .long, help: "Show the HTML body as a sanitized page in a viewer instead of printing the text.")
    var html = false
    @Flag(name: .long, help: "With --html: load remote content for this message (tracking pixels stay blocked).")
    var allowRemote = false
    @Option(name: .long, help: "With --html: the viewer command (run through /bin/sh with the file as its argument).")
    var viewer: String?
    @Argument(help: "The message id (from list or search).") var id: Int64

    func run() async throws {
        try await runReportingErrors {
            try await CommandPath.with(home) { path in
                let account = try await path.mailAccount(home, pinOptions)
                if html {
                    let status = try await path.view(
                        .message(id: id, allowRemote: allowRemote),
                        account: account,
                        viewer: viewer
                    )
                    print("The viewer exited with status \(status); the page was deleted.")
                    return
                }
                guard case .message(let message) = try await path.call(.message(account: account, id: id)) else {
                    throw AppError.malformedMessage
                }
                print(Self.text(message, headers: headers))
            }
        }
    }

    /// The message as `show` prints it: the main headers (or all with `headers`), a blank line, the text, and the
    /// attachments.
    static func text(_ message: MessageDetail, headers: Bool) -> String {
        func addresses(_ list: [MailAddress]) -> String { list.map(\.description).joined(separator: ", ") }
        var lines: [String] = []
        if headers {
            for field in message.headers { lines.append("\(field.name): \(field.value)") }
        } else {
            lines.append("From: \(addresses(message.summary.from))")
            lines.append("To: \(addresses(message.to))")
            if !message.cc.isEmpty { lines.append("Cc: \(addresses(message.cc))") }
            lines.append("Date: \(MessageLine.date(message.summary)) UTC")
            lines.append("Subject: \(message.summary.subject ?? "")")
        }
        lines.append("")
        lines.append(message.textBody ?? (message.htmlBody == nil ? "(no text)" : "(HTML only; no plain text part)"))
        if !message.attachments.isEmpty {
            lines.append("")
            for attachment in message.attachments {
                lines.append(
                    "[attachment \(attachment.id)] \(attachment.filename ?? "(unnamed)") "
                        + "\(attachment.contentType), \(attachment.size) bytes"
                )
            }
        }
        return lines.joined(separator: "\n")
    }
}
