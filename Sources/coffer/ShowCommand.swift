import ArgumentParser
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
    @Argument(help: "The message id (from list or search).") var id: Int64

    func run() async throws {
        try await runReportingErrors {
            let mail = try await MailSession.open(home, pinOptions)
            let message = try await mail.store.message(id)
            func addresses(_ list: [MailAddress]) -> String { list.map(\.description).joined(separator: ", ") }
            if headers {
                for field in message.headers { print("\(field.name): \(field.value)") }
            } else {
                print("From: \(addresses(message.summary.from))")
                print("To: \(addresses(message.to))")
                if !message.cc.isEmpty { print("Cc: \(addresses(message.cc))") }
                print("Date: \(MessageLine.date(message.summary)) UTC")
                print("Subject: \(message.summary.subject ?? "")")
            }
            print("")
            print(message.textBody ?? (message.htmlBody == nil ? "(no text)" : "(HTML only; no plain text part)"))
            if !message.attachments.isEmpty {
                print("")
                for attachment in message.attachments {
                    print(
                        "[attachment \(attachment.id)] \(attachment.filename ?? "(unnamed)") "
                            + "\(attachment.contentType), \(attachment.size) bytes"
                    )
                }
            }
            try mail.close()
        }
    }
}
