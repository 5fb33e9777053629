import ArgumentParser
import CofferApp

/// Options every command shares: where the data is and which account.
struct HomeOptions: ParsableArguments {
    @Option(name: .long, help: "Folder for all of Coffer's data (default: $COFFER_HOME, else the XDG folders).")
    var home: String?

    @Option(name: .long, help: "The account (default: the only account on this device).")
    var account: String?

    /// Refuses a hostile `--account` before any command touches a file (the rule is ``AccountName``'s).
    func validate() throws {
        if let account, let problem = AccountName.problem(account) {
            throw ValidationError(AppError.invalidAccountName(problem).description)
        }
    }

    /// The resolved home.
    func resolve() throws(CLIError) -> CofferHome { try CofferHome.resolve(home: home) }
}

/// How a PIN is entered.
struct PINOptions: ParsableArguments {
    @Flag(name: .long, help: "Read the PIN from the first line of standard input instead of the terminal.")
    var pinStdin = false
}
