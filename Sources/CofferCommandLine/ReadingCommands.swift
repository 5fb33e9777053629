import ArgumentParser
import CofferAgentProtocol
import CofferReading

/// What runs the requests of `list`, `search` and `show` in `coffer-core`: its command path (the agent, or the
/// in-process dispatcher when no agent runs). The small `coffer` runs them over an ``AgentClient`` synchronously
/// (`ReadingCommand.run(_:)`). The requests and what is printed are ``ReadingCommand``'s alone, so both programs
/// answer a command the same way.
public protocol MailCaller {
    /// The account the command works on, by `--account` or the only one (unlocked first where the caller does that).
    func mailAccount(_ home: HomeOptions, _ pin: PINOptions) async throws -> String
    /// Runs `request` and returns its reply; a failure reply is thrown.
    func reply(to request: AgentRequest) async throws -> AgentReply
}

/// A reading command's options, as ArgumentParser parsed them in `coffer-core`.
public protocol MailReading: ParsableArguments {
    /// The home and account.
    var home: HomeOptions { get }
    /// How a PIN is read.
    var pinOptions: PINOptions { get }
    /// The command the options say, as the small `coffer` runs it too.
    var reading: ReadingCommand { get }
}

extension MailReading {
    /// Runs the command through `caller` (`coffer-core`).
    public func run(_ caller: some MailCaller) async throws {
        let account = try await caller.mailAccount(home, pinOptions)
        try reading.printReply(try await caller.reply(to: reading.request(account: account)))
    }
}

/// `coffer list`'s options; ``ReadingCommand`` sends the request and prints the page.
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

    /// The page to list.
    public var reading: ReadingCommand {
        ReadingCommand(.list(label: label, limit: limit, offset: offset), home: home.home, account: home.account)
    }
}

/// `coffer search`'s options; ``ReadingCommand`` sends the request and prints the matches.
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

    /// The search.
    public var reading: ReadingCommand {
        ReadingCommand(.search(words: words, limit: limit, offset: offset), home: home.home, account: home.account)
    }
}

/// `coffer show`'s options; ``ReadingCommand`` prints the message as text (the HTML view is `coffer-core`'s: it runs
/// a viewer).
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

    /// The message to print as text (the `--html` view is `coffer-core`'s `ShowCommand`).
    public var reading: ReadingCommand {
        ReadingCommand(.show(id: id, headers: headers), home: home.home, account: home.account)
    }
}
