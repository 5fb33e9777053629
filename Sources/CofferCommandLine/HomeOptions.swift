import ArgumentParser
import CofferAgentProtocol
import CofferReading

/// Options every command shares: where the data is and which account.
public struct HomeOptions: ParsableArguments {
    @Option(name: .long, help: "Folder for all of Coffer's data (default: $COFFER_HOME, else the XDG folders).")
    public var home: String?

    @Option(name: .long, help: "The account (default: the only account on this device).")
    public var account: String?

    /// Options with nothing given.
    public init() {}

    /// Refuses a hostile `--account` before any command touches a file (the rule is ``AccountName``'s).
    public func validate() throws {
        if let account, let problem = AccountName.problem(account) {
            throw ValidationError(AppError.invalidAccountName(problem).description)
        }
    }

    /// The home's folders.
    public func paths() throws(CLIError) -> AppPaths { try AppPaths.forHome(home) }
}

/// How a PIN is entered.
public struct PINOptions: ParsableArguments {
    @Flag(name: .long, help: "Read the PIN from the first line of standard input instead of the terminal.")
    public var pinStdin = false

    /// Options with nothing given.
    public init() {}
}
