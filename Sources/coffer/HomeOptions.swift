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

/// How a server is trusted: `coffer account add` and `coffer notify register` take the same three options.
struct PinnedServerOptions: ParsableArguments {
    @Option(name: .customLong("pin-sha256"), help: "An SPKI pin (base64 SHA-256); repeat for the backup key.")
    var pins: [String] = []
    @Option(name: .customLong("ca-file"), help: "Trust only the CAs of this PEM bundle (else the system's).")
    var caFile: String?
    @Option(name: .long, help: "Connect to this address instead of HOST (the certificate must still name HOST).")
    var connect: String?

    /// A pin set needs a backup: at least two pins, or none.
    func validate() throws {
        if !pins.isEmpty && pins.count < 2 {
            throw ValidationError(
                "Give at least two --pin-sha256: the server's key and a backup key it does not use yet."
            )
        }
    }

    /// The CA bundle's absolute path (the agent may run in another folder).
    var absoluteCAFile: String? { caFile.map(AgentLink.absolute) }
}
