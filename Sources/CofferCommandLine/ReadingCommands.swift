import ArgumentParser
import CofferAgentProtocol
import CofferMIME

/// What runs the requests of `list`, `search` and `show` in `coffer-core`: its command path (the agent, or the
/// in-process dispatcher when no agent runs). The small `coffer` runs them over an ``AgentClient`` synchronously
/// (`MailReading.run(_:)` with an ``AgentClient``). The options, the requests and what is printed are the ``MailReading``
/// types' alone, so both programs answer a command the same way.
public protocol MailCaller {
    /// The account the command works on, by `--account` or the only one (unlocked first where the caller does that).
    func mailAccount(_ home: HomeOptions, _ pin: PINOptions) async throws -> String
    /// Runs `request` and returns its reply; a failure reply is thrown.
    func reply(to request: AgentRequest) async throws -> AgentReply
}

/// A reading command's options: one request for the account, and what its reply prints.
public protocol MailReading: ParsableArguments {
    /// The home and account.
    var home: HomeOptions { get }
    /// How a PIN is read.
    var pinOptions: PINOptions { get }
    /// The request for `account`, or for the only account when `nil` (the agent chooses).
    func request(account: String?) -> AgentRequest
    /// Prints `reply`; throws ``AppError/malformedMessage`` for a reply of another kind.
    func printReply(_ reply: AgentReply) throws
}

extension MailReading {
    /// Runs the command through `caller` (`coffer-core`).
    public func run(_ caller: some MailCaller) async throws {
        let account = try await caller.mailAccount(home, pinOptions)
        try printReply(try await caller.reply(to: request(account: account)))
    }

    /// Runs the command over `client`, without the concurrency runtime (`coffer`): one request, for `--account` or
    /// the only account as the agent chooses; the agent answers `locked` if it does not hold the key.
    public func run(_ client: AgentClient) throws {
        try printReply(try client.callNow(request(account: home.account)))
    }
}

/// `coffer list`: the options, and the page printed one message a line.
public struct ListOptions: MailReading {
    /// The home and account.
    @OptionGroup public var home: HomeOptions
    /// How a PIN is read.
    @OptionGroup public var pinOptions: PINOptions
    /// Only messages under this label.
    @Option(name: .long, help: "Only messages under this label.") public var label: String?
    /// How many messages.
    @Option(name: .long, help: "How many messages.") public var limit = 50
    /// How many of the newest to skip.
    @Option(name: .long, help: "How many of the newest to skip.") public var offset = 0

    /// Options with nothing given.
    public init() {}

    /// The page's request.
    public func request(account: String?) -> AgentRequest {
        .list(account: account, label: label, limit: limit, offset: offset)
    }

    /// Prints the page, one message a line.
    public func printReply(_ reply: AgentReply) throws {
        guard case .summaries(let summaries) = reply else { throw AppError.malformedMessage }
        for summary in summaries { print(MessageLine.format(summary)) }
    }
}

/// `coffer search`: the options, and the matches printed as `list` prints.
public struct SearchOptions: MailReading {
    /// The home and account.
    @OptionGroup public var home: HomeOptions
    /// How a PIN is read.
    @OptionGroup public var pinOptions: PINOptions
    /// How many messages.
    @Option(name: .long, help: "How many messages.") public var limit = 50
    /// How many of the newest matches to skip.
    @Option(name: .long, help: "How many of the newest matches to skip.") public var offset = 0
    /// The words.
    @Argument(help: "The words.") public var words: [String]

    /// Options with nothing given.
    public init() {}

    /// The search's request.
    public func request(account: String?) -> AgentRequest {
        .search(account: account, words: words.joined(separator: " "), limit: limit, offset: offset)
    }

    /// Prints the matches as `list` prints, or that there are none.
    public func printReply(_ reply: AgentReply) throws {
        guard case .summaries(let found) = reply else { throw AppError.malformedMessage }
        for summary in found { print(MessageLine.format(summary)) }
        if found.isEmpty { print("No messages match.") }
    }
}

/// `coffer show`: the options, and the message printed as text (the HTML view is `coffer-core`'s: it runs a viewer).
public struct ShowOptions: MailReading {
    /// The home and account.
    @OptionGroup public var home: HomeOptions
    /// How a PIN is read.
    @OptionGroup public var pinOptions: PINOptions
    /// Print every header field.
    @Flag(name: .long, help: "Print every header field.") public var headers = false
    /// Show the sanitized page in a viewer.
    @Flag(name: .long, help: "Show the HTML body as a sanitized page in a viewer instead of printing the text.")
    public var html = false
    /// Load remote content in the page.
    @Flag(name: .long, help: "With --html: load remote content for this message (tracking pixels stay blocked).")
    public var allowRemote = false
    /// The viewer command.
    @Option(name: .long, help: "With --html: the viewer command (run through /bin/sh with the file as its argument).")
    public var viewer: String?
    /// The message id.
    @Argument(help: "The message id (from list or search).") public var id: Int64

    /// Options with nothing given.
    public init() {}

    /// The message's request.
    public func request(account: String?) -> AgentRequest { .message(account: account, id: id) }

    /// Prints the message as text (the `--html` view is `coffer-core`'s `ShowCommand`).
    public func printReply(_ reply: AgentReply) throws {
        guard case .message(let message) = reply else { throw AppError.malformedMessage }
        print(MessageText.text(message, headers: headers))
    }
}

/// A message as `show` prints it.
public enum MessageText {
    /// The message as `show` prints it: the main headers (or all with `headers`), a blank line, the text, and the
    /// attachments.
    public static func text(_ message: MessageDetail, headers: Bool) -> String {
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
        if let openPGP = message.openPGP { lines.append(openPGPLine(openPGP)) }
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

    /// What the store found of OpenPGP on the message, in one line: whether it was decrypted, and each signature's
    /// signer and check; or why it was not decrypted. User ids and fingerprints are the sender's words: they are
    /// cleaned of terminal controls.
    static func openPGPLine(_ status: MessageOpenPGP) -> String {
        switch status.outcome {
        case .decrypted:
            guard !status.signatures.isEmpty else { return "OpenPGP: encrypted, not signed" }
            let signatures = status.signatures.map(signatureText)
            let first = status.signatures[0].isValid ? "OpenPGP: encrypted, " : "OpenPGP: encrypted; "
            return first + signatures.joined(separator: "; ")
        case .noSecretKey: return "OpenPGP: could not be decrypted (no secret key for it)"
        case .integrityFailure:
            return
                "OpenPGP: could not be decrypted (its integrity check failed: it was changed; nothing of it is shown)"
        case .malformed: return "OpenPGP: could not be decrypted (the encrypted part is damaged or not OpenPGP data)"
        case .nestedNotDecrypted:
            return "OpenPGP: an encrypted part beside other parts was not decrypted "
                + "(only a message encrypted as a whole is; it stays an attachment)"
        case .signed:
            guard !status.signatures.isEmpty else {
                return "OpenPGP: signed, not encrypted; the signature could not be read"
            }
            return "OpenPGP: not encrypted; " + status.signatures.map(signatureText).joined(separator: "; ")
        }
    }

    /// One signature: its signer and what checking it showed.
    static func signatureText(_ signature: MessageOpenPGP.Signature) -> String {
        let fingerprint = PushMessage.clean(signature.fingerprint ?? "no fingerprint")
        let signer = signature.userID.map { "\(PushMessage.clean($0)) (\(fingerprint))" } ?? fingerprint
        switch signature.status {
        case "valid": return "signed by \(signer), verified"
        case "unknown key": return "signature could not be checked (unknown key \(fingerprint))"
        case "invalid": return "bad signature by \(signer) (the message or signature was changed)"
        case "revoked": return "signature by \(signer) is not trusted: its key has been revoked"
        default: return "signature by \(signer) could not be verified (\(PushMessage.clean(signature.status)))"
        }
    }
}
