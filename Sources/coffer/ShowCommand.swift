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
    @Flag(name: .long, help: "Show the HTML body as a sanitized page in a viewer instead of printing the text.")
    var html = false
    @Flag(name: .long, help: "With --html: load remote content for this message (tracking pixels stay blocked).")
    var allowRemote = false
    @Option(name: .long, help: "With --html: the viewer command (run through /bin/sh with the file as its argument).")
    var viewer: String?
    @Argument(help: "The message id (from list or search).") var id: Int64

    func run() async throws {
        try await runReportingErrors {
            let mail = try await MailSession.open(home, pinOptions)
            let message = try await mail.store.readMessage(id)
            if html {
                try await showPage(mail, message)
                try mail.close()
                return
            }
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

    /// Sanitizes the body into a page in the attachment preview folder, with the message's `cid:` parts inlined.
    private func showPage(_ mail: MailSession, _ message: MessageDetail) async throws {
        var parts: [(contentID: String, mediaType: String, data: [UInt8])] = []
        for attachment in message.attachments where attachment.contentType.lowercased().hasPrefix("image/") {
            guard let contentID = attachment.contentID else { continue }
            let content = try await mail.store.attachmentContent(attachment.id).content
            parts.append((contentID, attachment.contentType, content))
        }
        let rendered = MessagePage.render(
            html: message.htmlBody.map { Array($0.utf8) },
            text: message.textBody,
            title: message.summary.subject ?? "",
            allowRemote: allowRemote,
            resolver: MessagePage.resolver(parts)
        )
        MessagePage.printReport(rendered.sanitized, allowRemote: allowRemote)
        let previews = try MailSession.cache(mail.session).previewFolder
        try await MessagePage.show(rendered.page, viewer: viewer, under: previews)
    }
}
