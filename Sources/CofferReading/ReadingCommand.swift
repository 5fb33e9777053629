import CofferAgentProtocol

/// `list`, `search` or `show` (as text) as a plain value: its home, its account, what it asks the agent and how the
/// reply prints. Both programs run it: `coffer-core` after ArgumentParser parsed its options (`MailReading` in
/// CofferCommandLine), and the small `coffer` after ``recognize(_:)`` read the usual forms of the command line itself.
public struct ReadingCommand: Equatable, Sendable {
    /// What the command reads.
    public enum Action: Equatable, Sendable {
        /// A page of messages, newest first, optionally under a label.
        case list(label: String?, limit: Int, offset: Int)
        /// A page of the messages that hold every word.
        case search(words: [String], limit: Int, offset: Int)
        /// One message as text, with every header field when `headers`.
        case show(id: Int64, headers: Bool)
    }

    /// What the command reads.
    public var action: Action
    /// `--home`, when given.
    public var home: String?
    /// `--account`, when given.
    public var account: String?

    /// A command.
    public init(_ action: Action, home: String?, account: String?) {
        self.action = action
        self.home = home
        self.account = account
    }

    /// The request for `account`, or for the only account when `nil` (the agent chooses).
    public func request(account: String?) -> AgentRequest {
        switch action {
        case .list(let label, let limit, let offset):
            .list(account: account, label: label, limit: limit, offset: offset)
        case .search(let words, let limit, let offset):
            .search(account: account, words: words.joined(separator: " "), limit: limit, offset: offset)
        case .show(let id, _):
            .message(account: account, id: id)
        }
    }

    /// Prints `reply`: a page one message a line (a search with no match says so), or a message as text.
    ///
    /// - Throws: ``AppError/malformedMessage`` for a reply of another kind.
    public func printReply(_ reply: AgentReply) throws(AppError) {
        switch (action, reply) {
        case (.list, .summaries(let summaries)):
            for summary in summaries { print(MessageLine.format(summary)) }
        case (.search, .summaries(let found)):
            for summary in found { print(MessageLine.format(summary)) }
            if found.isEmpty { print("No messages match.") }
        case (.show(_, let headers), .message(let message)):
            print(MessageText.text(message, headers: headers))
        default:
            throw .malformedMessage
        }
    }

    /// Runs the command over `client`, without the concurrency runtime (`coffer`): one request, for `--account` or
    /// the only account as the agent chooses; the agent answers `locked` if it does not hold the key.
    public func run(_ client: AgentClient) throws {
        try printReply(try client.callNow(request(account: account)))
    }
}

extension ReadingCommand {
    /// The command that `arguments` (the program's whole argument vector, its name first) runs, when it is `list`,
    /// `search` or `show` written in the forms people type; `nil` for anything else, which `coffer-core` then parses
    /// with ArgumentParser (the one full parser, with help and error messages).
    ///
    /// Read: the command name, then in any order its long options (`--name value` or `--name=value`, each at most
    /// once) and its positional arguments. `nil` for: another command; an option this form does not take, or any
    /// other word starting with `-` (`--help`, `-h`, `--pin-stdin`, `--html`, `--`, a negative number, a search word
    /// such as `-draft`); an option given twice; an option's value that is empty or starts with `-`; a number that
    /// does not read as one; an account name that ``AccountName`` refuses; `list` with a word, `search` without one,
    /// `show` without exactly one id. Every command it reads, ArgumentParser reads the same way
    /// (`ReadingRecognizerTests` compares the two over generated command lines).
    public static func recognize(_ arguments: [String]) -> ReadingCommand? {
        guard arguments.count >= 2 else { return nil }
        let valued: Set<String>
        let flags: Set<String>
        switch arguments[1] {
        case "list": (valued, flags) = (["home", "account", "label", "limit", "offset"], [])
        case "search": (valued, flags) = (["home", "account", "limit", "offset"], [])
        case "show": (valued, flags) = (["home", "account"], ["headers"])
        default: return nil
        }
        var values: [String: String] = [:]
        var set: Set<String> = []
        var words: [String] = []
        var index = 2
        while index < arguments.count {
            let token = arguments[index]
            index += 1
            guard token.hasPrefix("-") else {
                words.append(token)
                continue
            }
            guard token.hasPrefix("--"), token.utf8.count > 2 else { return nil }
            let body = token.dropFirst(2)
            let equals = body.firstIndex(of: "=")
            let name = String(body[..<(equals ?? body.endIndex)])
            if flags.contains(name) {
                guard equals == nil, set.insert(name).inserted else { return nil }
                continue
            }
            guard valued.contains(name), values[name] == nil else { return nil }
            let value: String
            if let equals {
                value = String(body[body.index(after: equals)...])
            } else {
                guard index < arguments.count else { return nil }
                value = arguments[index]
                index += 1
            }
            guard !value.isEmpty, !value.hasPrefix("-") else { return nil }
            values[name] = value
        }
        if let account = values["account"], AccountName.problem(account) != nil { return nil }
        guard let limit = values["limit"].map({ Int($0) }) ?? 50,
            let offset = values["offset"].map({ Int($0) }) ?? 0
        else {
            return nil
        }
        let action: Action
        switch arguments[1] {
        case "list":
            guard words.isEmpty else { return nil }
            action = .list(label: values["label"], limit: limit, offset: offset)
        case "search":
            guard !words.isEmpty else { return nil }
            action = .search(words: words, limit: limit, offset: offset)
        default:
            guard words.count == 1, let id = Int64(words[0]) else { return nil }
            action = .show(id: id, headers: set.contains("headers"))
        }
        return ReadingCommand(action, home: values["home"], account: values["account"])
    }
}
