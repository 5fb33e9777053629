import ArgumentParser
import CofferAttachments
import CofferStore

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
            let mail = try await MailSession.open(home, pinOptions)
            let attachments = try await mail.store.attachments(of: id)
            for attachment in attachments {
                print("\(attachment.id)\t\(attachment.size)\t\(attachment.contentType)\t\(attachment.filename ?? "")")
            }
            if attachments.isEmpty { print("Message \(id) has no attachments.") }
            try mail.close()
        }
    }
}

struct AttachmentCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "attachment",
        abstract: "Open an attachment in a viewer, or save a cleartext copy.",
        subcommands: [Open.self, Save.self]
    )

    /// Puts the attachment into the encrypted cache (if it is not there intact) and returns its cache key and name.
    static func cached(_ mail: MailSession, id: Int64) async throws -> (AttachmentCache, String, String?) {
        let cache = try MailSession.cache(mail.session)
        let key = "attachment:\(id)"
        // A missing, expired or damaged entry (the check deletes a damaged one) is filled again from the store.
        if try await !cache.containsIntact(key) {
            let (_, content) = try await mail.store.attachmentContent(id)
            try await cache.put(content, for: key)
        }
        let info = try await mail.store.attachmentContent(id).info
        return (cache, key, info.filename)
    }

    struct Open: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
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
                let mail = try await MailSession.open(home, pinOptions)
                if let agent = mail.agent {
                    defer { agent.close() }
                    return try await AgentLink.openAttachment(mail, agent: agent, id: id, viewer: viewer)
                }
                let (cache, key, filename) = try await AttachmentCommand.cached(mail, id: id)
                PreviewCleanup.protect(parent: cache.previewFolder)
                let status = try await cache.preview(
                    key,
                    suggestedName: filename,
                    viewer: ["/bin/sh", "-c", Viewer.script(viewer), "coffer-viewer"]
                ) { [viewer] file in Viewer.waitIfNeeded(viewer, file: file) }
                try mail.close()
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
            abstract: "Save a cleartext copy (mode 0600): the only way to keep one outside Coffer."
        )

        @OptionGroup var home: HomeOptions
        @OptionGroup var pinOptions: PINOptions
        @Argument(help: "The attachment id.") var id: Int64
        @Option(name: .long, help: "Where to write the file (must not exist).") var to: String

        func run() async throws {
            try await runReportingErrors {
                let mail = try await MailSession.open(home, pinOptions)
                if let agent = mail.agent {
                    defer { agent.close() }
                    return try await AgentLink.saveAttachment(mail, agent: agent, id: id, to: to)
                }
                let (cache, key, _) = try await AttachmentCommand.cached(mail, id: id)
                try await cache.save(key, to: to)
                print("Saved attachment \(id) to \(to).")
                try mail.close()
            }
        }
    }
}
