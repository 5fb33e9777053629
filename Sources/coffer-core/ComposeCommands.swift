import ArgumentParser
import CofferAgentProtocol
import CofferApp
import CofferAttachments
import CofferCommandLine
import CofferCompose
import CofferMIME
import CofferOutbox
import CofferPush
import CofferReading
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// What `compose`, `reply` and `forward` share: the recipients and subject given on the command line, the files to
/// attach, a body from a file, whether the editor opens, and whether (and when) the message is sent.
struct WritingOptions: ParsableArguments {
    @Option(name: .long, help: "A To recipient: an address, or a name found in the address book (repeatable).")
    var to: [String] = []
    @Option(name: .long, help: "A Cc recipient (repeatable).") var cc: [String] = []
    @Option(name: .long, help: "A Bcc recipient (repeatable).") var bcc: [String] = []
    @Option(name: .long, help: "The subject.") var subject: String?
    @Option(name: .long, help: "A file to attach (repeatable).") var attach: [String] = []
    @Option(name: .long, help: "The body's text from this file ('-': standard input) instead of the editor's.")
    var bodyFile: String?
    @Flag(name: .long, help: "Do not open the editor (the default when standard input is not a terminal).")
    var noEdit = false
    @Flag(name: .long, help: "Send when written, without asking.") var send = false
    @Option(name: .long, help: "With --send: hold the message this long first (30s, 5m), to take it back.")
    var delay: String?
    @Option(name: .long, help: "The mail server account to send through (from `coffer account show`).")
    var server: Int64?
    @Flag(name: .long, help: "Sign the message with your default OpenPGP key (PGP/MIME).") var sign = false
    @Flag(
        name: .long,
        help: ArgumentHelp(
            "Encrypt the message (PGP/MIME) to every recipient's OpenPGP key and your own; a recipient without "
                + "one is an error before anything is sent."
        )
    )
    var encrypt = false
    @Flag(
        name: .long,
        help: "Do not encrypt, even when Autocrypt would (you and every recipient prefer encryption)."
    )
    var noEncrypt = false

    /// What `--sign`, `--encrypt` and `--no-encrypt` ask for, or nil.
    var openPGP: OpenPGPSending? {
        sign || encrypt || noEncrypt
            ? OpenPGPSending(sign: sign, encrypt: encrypt, noEncrypt: noEncrypt ? true : nil) : nil
    }

    func validate() throws {
        if encrypt && noEncrypt { throw ValidationError("--encrypt and --no-encrypt cannot be given together.") }
        if let delay { _ = try Self.seconds(delay) }
        if delay != nil && !send { throw ValidationError("--delay needs --send.") }
    }

    /// `30s`, `5m`, `1h` or a number of seconds, at most a day.
    static func seconds(_ text: String) throws -> Int {
        let units: [Character: Int] = ["s": 1, "m": 60, "h": 3600]
        var digits = Substring(text)
        var unit = 1
        if let last = text.last, let factor = units[last] {
            digits = text.dropLast()
            unit = factor
        }
        guard let count = Int(digits), count >= 0, count * unit <= 86_400 else {
            throw ValidationError("--delay takes a duration such as 30s, 5m or 1h (at most a day).")
        }
        return count * unit
    }
}

/// `coffer compose`: writes a new message (or goes on with a draft) in the editor, saves it as a draft, and sends it.
struct ComposeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "compose",
        abstract: "Write a message in $VISUAL or $EDITOR; it is kept as a sealed draft, then sent if you say so.",
        discussion: """
            The editor shows the headers (From, To, Cc, Bcc, Subject, Attach), a blank line, then the body, as \
            `git commit` does. Its file lives in a private folder on a memory file system ($XDG_RUNTIME_DIR, else \
            /dev/shm) that is deleted when the editor exits. Leaving the file unchanged abandons a new message. \
            A message you do not send is kept as a draft: `coffer drafts` lists them, `--draft ID` goes on.
            """
    )

    @OptionGroup var home: HomeOptions
    @OptionGroup var pinOptions: PINOptions
    @OptionGroup var writing: WritingOptions
    @Option(name: .long, help: "Go on with this draft (from `coffer drafts`).") var draft: Int64?
    @Option(name: .long, help: "Fill the message from a mailto: link (recipients, subject and body only).")
    var mailto: String?

    func run() async throws {
        try await runReportingErrors {
            try await Composer.write(
                start: draft.map { .draft($0) } ?? .new,
                home: home,
                pinOptions: pinOptions,
                writing: writing,
                mailto: mailto
            )
        }
    }
}

/// `coffer reply`: a reply to a stored message, quoting its text.
struct ReplyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reply",
        abstract: "Reply to a message (to its Reply-To or From; --all adds its other recipients but your own)."
    )

    @OptionGroup var home: HomeOptions
    @OptionGroup var pinOptions: PINOptions
    @OptionGroup var writing: WritingOptions
    @Argument(help: "The message's id (from `coffer list`).") var id: Int64
    @Flag(name: .long, help: "Reply to every recipient.") var all = false

    func run() async throws {
        try await runReportingErrors {
            try await Composer.write(
                start: .reply(message: id, all: all),
                home: home,
                pinOptions: pinOptions,
                writing: writing,
                mailto: nil
            )
        }
    }
}

/// `coffer forward`: a stored message forwarded, its text inline with its attachments, or attached whole.
struct ForwardCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "forward",
        abstract: "Forward a message: its text inline under a summary of its headers, with its attachments.",
        discussion: """
            With --attach-original the message is attached whole (message/rfc822, a file named after its subject) \
            and the body is left for your note. Either way the attachments are sealed in a draft at once, so \
            `coffer drafts` and `coffer send` find them; leaving the editor's file unchanged deletes that draft.
            """
    )

    @OptionGroup var home: HomeOptions
    @OptionGroup var pinOptions: PINOptions
    @OptionGroup var writing: WritingOptions
    @Argument(help: "The message's id (from `coffer list`).") var id: Int64
    @Flag(name: .long, help: "Attach the message whole (message/rfc822) instead of its text inline.")
    var attachOriginal = false

    func run() async throws {
        try await runReportingErrors {
            try await Composer.write(
                start: .forward(message: id, attachOriginal: attachOriginal),
                home: home,
                pinOptions: pinOptions,
                writing: writing,
                mailto: nil
            )
        }
    }
}

/// `coffer send`: queues a saved draft and sends it.
struct SendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Send a saved draft (from `coffer drafts`) through the account's SMTP submission server."
    )

    @OptionGroup var home: HomeOptions
    @OptionGroup var pinOptions: PINOptions
    @Argument(help: "The draft's id.") var draft: Int64
    @Option(name: .long, help: "Hold the message this long first (30s, 5m), to take it back.") var delay: String?
    @Option(name: .long, help: "The mail server account to send through.") var server: Int64?
    @Flag(name: .long, help: "Sign the message with your default OpenPGP key (PGP/MIME).") var sign = false
    @Flag(name: .long, help: "Encrypt the message to every recipient's OpenPGP key and your own (PGP/MIME).")
    var encrypt = false
    @Flag(name: .long, help: "Do not encrypt, even when Autocrypt would.") var noEncrypt = false

    func validate() throws {
        if encrypt && noEncrypt { throw ValidationError("--encrypt and --no-encrypt cannot be given together.") }
    }

    func run() async throws {
        try await runReportingErrors {
            let seconds = try delay.map(WritingOptions.seconds) ?? 0
            try await CommandPath.with(home) { path in
                let account = try await path.mailAccount(home, pinOptions)
                try await Composer.send(
                    draft: draft,
                    account: account,
                    server: server,
                    delay: seconds,
                    openPGP: sign || encrypt || noEncrypt
                        ? OpenPGPSending(sign: sign, encrypt: encrypt, noEncrypt: noEncrypt ? true : nil) : nil,
                    path: path
                )
            }
        }
    }
}

/// `coffer drafts`: lists the saved drafts, or deletes one.
struct DraftsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "drafts",
        abstract: "List the saved drafts: id, date, recipients, subject, attachments."
    )

    @OptionGroup var home: HomeOptions
    @OptionGroup var pinOptions: PINOptions
    @Option(name: .long, help: "Delete this draft with its attachments.") var delete: Int64?

    func run() async throws {
        try await runReportingErrors {
            try await CommandPath.with(home) { path in
                let account = try await path.mailAccount(home, pinOptions)
                if let delete {
                    _ = try await path.call(.deleteDraft(account: account, draft: delete))
                    print("Deleted draft \(delete).")
                    return
                }
                guard case .drafts(let drafts) = try await path.call(.drafts(account: account)) else {
                    throw AppError.malformedMessage
                }
                if drafts.isEmpty { print("No drafts.") }
                for draft in drafts {
                    let recipients = (draft.fields.to + draft.fields.cc + draft.fields.bcc).map(\.address)
                    let attached = draft.attachments.isEmpty ? "" : "\t@\(draft.attachments.count)"
                    print(
                        "\(draft.id)\t\(Composer.date(draft.updated))\t"
                            + PushMessage.clean(recipients.joined(separator: ", "))
                            + "\t\(PushMessage.clean(draft.fields.subject))\(attached)"
                    )
                }
            }
        }
    }
}

/// `coffer outbox`: what is queued, being sent or failed; retry, cancel, or send now.
struct OutboxCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "outbox",
        abstract: "List the messages waiting to be sent, being sent or failed; retry, cancel, or send them now.",
        discussion: """
            A message is sent by the agent when one runs (as background work, which never keeps the account \
            unlocked), else by the command that queued it. A temporary failure (a 4xx reply, the network) is \
            retried with backoff from a minute to an hour; a refusal (5xx) or a certificate that does not match \
            its pins stays here as failed, with the reason, until you retry or cancel it.
            """
    )

    @OptionGroup var home: HomeOptions
    @OptionGroup var pinOptions: PINOptions
    @Option(name: .long, help: "Try this message again now.") var retry: Int64?
    @Option(name: .long, help: "Take this queued or failed message back out of the outbox.") var cancel: Int64?
    @Flag(name: .long, help: "Send every message that is due now.") var flush = false
    @Option(name: .long, help: "With --flush: the mail server account.") var server: Int64?

    func run() async throws {
        try await runReportingErrors {
            try await CommandPath.with(home) { path in
                let account = try await path.mailAccount(home, pinOptions)
                if let cancel {
                    _ = try await path.call(.outboxCancel(account: account, id: cancel))
                    print("Message \(cancel) was taken out of the outbox; it will not be sent.")
                    return
                }
                if let retry {
                    guard case .outboxEntry(let entry) = try await path.call(.outboxRetry(account: account, id: retry))
                    else { throw AppError.malformedMessage }
                    print(Composer.describe(entry, id: retry))
                    return
                }
                if flush {
                    guard
                        case .outboxSent(let report) = try await path.call(
                            .outboxFlush(account: account, server: server)
                        )
                    else { throw AppError.malformedMessage }
                    print(Composer.describe(report))
                    return
                }
                guard case .outbox(let entries) = try await path.call(.outbox(account: account)) else {
                    throw AppError.malformedMessage
                }
                if entries.isEmpty { print("The outbox is empty.") }
                for entry in entries { print(Composer.line(entry)) }
            }
        }
    }
}

/// `coffer contacts`: the sealed address book.
struct ContactsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "contacts",
        abstract: "Find people in the address book (filled from your mail and by --add), or export it as vCard."
    )

    @OptionGroup var home: HomeOptions
    @OptionGroup var pinOptions: PINOptions
    @Argument(help: "The start of a word of the name or address (default: everyone).") var query: String?
    @Option(name: .long, help: "Add this address to the address book.") var add: String?
    @Option(name: .long, help: "With --add: the person's name.") var name: String?
    @Flag(name: .long, help: "Print the address book as vCard 4.0.") var vcard = false

    func run() async throws {
        try await runReportingErrors {
            try await CommandPath.with(home) { path in
                let account = try await path.mailAccount(home, pinOptions)
                if let add {
                    let address = try Composer.address(add, field: "--add")
                    let contacts = try await path.call(
                        .contactAdd(account: account, name: name ?? address.name, address: address.address)
                    )
                    guard case .contacts(let added) = contacts else { throw AppError.malformedMessage }
                    for contact in added { print(Composer.line(contact)) }
                    return
                }
                if vcard {
                    guard case .text(let text) = try await path.call(.contactsExport(account: account)) else {
                        throw AppError.malformedMessage
                    }
                    print(text, terminator: "")
                    return
                }
                guard case .contacts(let contacts) = try await path.call(.contacts(account: account, query: query))
                else { throw AppError.malformedMessage }
                if contacts.isEmpty { print(query == nil ? "The address book is empty." : "Nobody matches.") }
                for contact in contacts { print(Composer.line(contact)) }
            }
        }
    }
}

/// The writing flow every command shares.
enum Composer {
    /// Opens (or fills) the message, saves it as a draft, and sends it when asked.
    static func write(
        start: ComposeStart,
        home: HomeOptions,
        pinOptions: PINOptions,
        writing: WritingOptions,
        mailto: String?
    ) async throws {
        let paths = try home.paths()
        try await CommandPath.with(home) { path in
            let account = try await path.mailAccount(home, pinOptions)
            guard
                case .composeContext(let context) = try await path.call(
                    .compose(account: account, server: writing.server, start: start)
                )
            else { throw AppError.malformedMessage }
            var draft = ComposeDraft(
                to: context.fields.to,
                cc: context.fields.cc,
                bcc: context.fields.bcc,
                subject: context.fields.subject,
                body: context.fields.text,
                inReplyTo: context.fields.inReplyTo,
                references: context.fields.references
            )
            if let mailto {
                let link = try MailtoLink(parsing: mailto)
                draft.to += link.to
                draft.cc += link.cc
                draft.bcc += link.bcc
                if let subject = link.subject { draft.subject = subject }
                if let body = link.body { draft.body = body + draft.body }
            }
            draft.to += try await resolve(writing.to, field: "--to", account: account, path: path)
            draft.cc += try await resolve(writing.cc, field: "--cc", account: account, path: path)
            draft.bcc += try await resolve(writing.bcc, field: "--bcc", account: account, path: path)
            if let subject = writing.subject { draft.subject = subject }
            draft.attachmentPaths = writing.attach
            if let bodyFile = writing.bodyFile { draft.body = try readBody(bodyFile) + draft.body }

            let interactive = isatty(0) == 1 && isatty(1) == 1
            // A forward with attachments starts as a draft made to hold them: abandoned, it goes.
            let madeDraft: Int64? = if case .draft = start { nil } else { context.draft?.id }
            if interactive && !writing.noEdit {
                guard let edited = try await edit(draft, context: context, paths: paths, madeDraft: madeDraft != nil)
                else {
                    if let madeDraft { _ = try await path.call(.deleteDraft(account: account, draft: madeDraft)) }
                    print("Nothing was written; nothing was saved.")
                    return
                }
                draft = edited
            }
            let attach = draft.attachmentPaths.map(absolutePath)
            let fields = WritingHandler.fields(draft)
            // Sent at once (--send), the files go straight into the outbox with the send: the draft, saved first so
            // nothing written is lost, holds only the text until then.
            guard
                case .draftSaved(let saved) = try await path.call(
                    .saveDraft(
                        account: account,
                        draft: context.draft?.id,
                        fields: fields,
                        attach: writing.send ? [] : attach
                    )
                )
            else { throw AppError.malformedMessage }
            if writing.send {
                let delay = try writing.delay.map(WritingOptions.seconds) ?? 0
                do {
                    try await Self.send(
                        draft: saved.id,
                        account: account,
                        server: writing.server,
                        delay: delay,
                        attach: attach,
                        openPGP: writing.openPGP,
                        path: path
                    )
                } catch {
                    // Not queued (no recipient, a file that cannot be read…): the draft keeps the files after all.
                    _ = try? await path.call(
                        .saveDraft(account: account, draft: saved.id, fields: fields, attach: attach)
                    )
                    throw error
                }
                return
            }
            var send = false
            if interactive {
                Terminal.writeString("Send it now? [y/N] ", to: 1)
                send = Terminal.readLine(fd: 0).map { String(decoding: $0, as: UTF8.self).lowercased() } == "y"
            }
            guard send else {
                let flags = (writing.sign ? " --sign" : "") + (writing.encrypt ? " --encrypt" : "")
                print(
                    "Kept as draft \(saved.id): `coffer compose --draft \(saved.id)` goes on with it, "
                        + "`coffer send \(saved.id)\(flags)` sends it."
                )
                return
            }
            let delay = try writing.delay.map(WritingOptions.seconds) ?? 0
            try await Self.send(
                draft: saved.id,
                account: account,
                server: writing.server,
                delay: delay,
                openPGP: writing.openPGP,
                path: path
            )
        }
    }

    /// Queues draft `draft` and reports what became of it. Without an agent and with a delay, this process holds
    /// the message for the delay and then sends it (Ctrl-C leaves it queued for the next send).
    static func send(
        draft: Int64,
        account: String,
        server: Int64?,
        delay: Int,
        attach: [String] = [],
        openPGP: OpenPGPSending? = nil,
        path: CommandPath
    ) async throws {
        guard
            case .outboxEntry(let entry) = try await path.call(
                .sendDraft(
                    account: account,
                    draft: draft,
                    server: server,
                    delay: delay,
                    attach: attach.isEmpty ? nil : attach,
                    openPGP: openPGP
                )
            )
        else { throw AppError.malformedMessage }
        switch entry.autocrypt {
        case "encrypted":
            print("Encrypted (Autocrypt: you and every recipient prefer encryption; --no-encrypt sends it in clear).")
        case "not-encrypted":
            print("Not encrypted (--no-encrypt), though you and every recipient prefer encryption (Autocrypt).")
        default: break
        }
        print(describe(entry, id: entry.id))
        guard delay > 0, entry.state == .queued else { return }
        if path.isAgent {
            print("The agent sends it in \(delay) s; `coffer outbox --cancel \(entry.id)` takes it back before then.")
            return
        }
        print(
            "Sending in \(delay) s; Ctrl-C keeps it in the outbox, `coffer outbox --cancel \(entry.id)` takes it back."
        )
        try await Task.sleep(for: .seconds(delay))
        guard case .outboxSent(let report) = try await path.call(.outboxFlush(account: account, server: server)) else {
            throw AppError.malformedMessage
        }
        print(describe(report))
    }

    /// Runs the editor until the text parses (a mistake reopens it with the reason on top) or is abandoned.
    private static func edit(
        _ draft: ComposeDraft,
        context: ComposeContext,
        paths: AppPaths,
        madeDraft: Bool
    ) async throws
        -> ComposeDraft?
    {
        let session = try EditorSession(parent: PreviewFolder.chooseCompose(fallback: "\(paths.state)/compose"))
        var instructions = ComposeTemplate.defaultInstructions
        if let attached = context.draft?.attachments, !attached.isEmpty {
            instructions.append(
                "Already attached: "
                    + attached.map { "\($0.filename ?? "(no name)") (\($0.size) bytes)" }
                    .joined(separator: ", ")
            )
        }
        var text = ComposeTemplate.render(draft, from: context.from, instructions: instructions)
        while true {
            let outcome = try await session.edit(text)
            if outcome.isAbandoned && (context.draft == nil || madeDraft) { return nil }
            do {
                return try ComposeTemplate.parse(outcome.text, from: context.from, basedOn: draft)
            } catch {
                // Nothing is lost: the text comes back with the reason on top.
                text = "# " + OutgoingMessage.headerSafe(error.description) + "\n" + outcome.text
                Terminal.printError("The message cannot be read: \(error.description) The editor opens again.")
            }
        }
    }

    /// Addresses as given, or the one contact a name matches.
    private static func resolve(
        _ values: [String],
        field: String,
        account: String,
        path: CommandPath
    ) async throws -> [MailAddress] {
        var result: [MailAddress] = []
        for value in values {
            if value.contains("@") {
                result.append(try address(value, field: field))
                continue
            }
            guard case .contacts(let found) = try await path.call(.contacts(account: account, query: value)) else {
                throw AppError.malformedMessage
            }
            guard found.count == 1, let contact = found.first else {
                if found.isEmpty { throw CLIError("Nobody in the address book matches \(field) \(value).") }
                throw CLIError(
                    "Several people match \(field) \(value): "
                        + found.prefix(10).map { line($0) }.joined(separator: "; ") + ". Give the address."
                )
            }
            result.append(MailAddress(name: contact.name, address: contact.address))
        }
        return result
    }

    /// One address from the command line.
    static func address(_ text: String, field: String) throws -> MailAddress {
        guard let parsed = MailAddress.parseList(text).first, parsed.address.contains("@") else {
            throw CLIError("\(field) \(text) is not an email address.")
        }
        return parsed
    }

    private static func readBody(_ file: String) throws -> String {
        let data: Data
        if file == "-" {
            data = FileHandle.standardInput.readDataToEndOfFile()
        } else {
            guard let read = FileManager.default.contents(atPath: file) else {
                throw CLIError("The body file \(file) cannot be read.")
            }
            data = read
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw CLIError("The body file \(file) is not UTF-8 text.")
        }
        return text
    }

    static func date(_ date: Date) -> String {
        date.formatted(.iso8601.year().month().day().dateSeparator(.dash).time(includingFractionalSeconds: false))
    }

    static func describe(_ entry: OutboxEntry, id: Int64) -> String {
        switch entry.state {
        case .sent: "Sent (message \(id))."
        case .sending: "Message \(id) is being sent."
        case .queued:
            entry.attempts == 0
                ? "Message \(id) is queued; it will be sent at \(date(entry.nextAttempt))."
                : "Message \(id) could not be sent yet (attempt \(entry.attempts)"
                    + (entry.reason.map { ": \(PushMessage.clean($0))" } ?? "")
                    + "); it will be tried again at \(date(entry.nextAttempt))."
        case .failed:
            "Message \(id) was not sent: \(PushMessage.clean(entry.reason ?? "it failed"))"
                + " (`coffer outbox --retry \(id)` tries again)."
        }
    }

    static func describe(_ report: OutboxReport) -> String {
        var parts = ["\(report.sent) sent"]
        if report.retrying > 0 { parts.append("\(report.retrying) to be tried again") }
        if !report.failed.isEmpty { parts.append("\(report.failed.count) failed") }
        var text = parts.joined(separator: ", ") + "."
        for failure in report.failed {
            text += "\n  \(failure.id) \(PushMessage.clean(failure.subject)): \(PushMessage.clean(failure.reason))"
        }
        if let copy = report.sentCopyFailure {
            text += "\nThe Sent copies were not stored yet (\(PushMessage.clean(copy))); the next send tries again."
        }
        return text
    }

    static func line(_ entry: OutboxEntry) -> String {
        "\(entry.id)\t\(entry.state.rawValue)\t\(date(entry.nextAttempt))\t"
            + PushMessage.clean(entry.recipients.joined(separator: ", ")) + "\t\(PushMessage.clean(entry.subject))"
            + (entry.reason.map { "\t\(PushMessage.clean($0))" } ?? "")
    }

    static func line(_ contact: ContactInfo) -> String {
        (contact.name.map { "\(PushMessage.clean($0)) " } ?? "") + "<\(PushMessage.clean(contact.address))>"
            + (contact.openPGPKeys.map { "\tOpenPGP key " + PushMessage.clean($0.joined(separator: ", ")) } ?? "")
    }
}
