import ArgumentParser
import CofferAgentProtocol
import CofferApp

#if canImport(Glibc)
import Glibc
#endif

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

    /// The home's folders.
    func paths() throws(CLIError) -> AppPaths { try Self.paths(home: home) }

    /// Where Coffer keeps its files. With `--home H` (or `$COFFER_HOME`): `H/data` (store and cache), `H/keychain`,
    /// `H/state` (device secret, software secure element). Without: `$XDG_DATA_HOME/coffer` (default
    /// `~/.local/share/coffer`) for data and keychain, and `$XDG_STATE_HOME/coffer` (default `~/.local/state/coffer`)
    /// for the device secret and the secure element, so a copy of the data folder alone opens nothing.
    static func paths(home: String?) throws(CLIError) -> AppPaths {
        let environment = { (name: String) -> String? in
            guard let value = getenv(name) else { return nil }
            let text = String(cString: value)
            return text.isEmpty ? nil : text
        }
        if let root = home ?? environment("COFFER_HOME") {
            let absolute = CommandPath.absolute(root)
            return AppPaths(data: "\(absolute)/data", keychain: "\(absolute)/keychain", state: "\(absolute)/state")
        }
        guard let userHome = environment("HOME") else {
            throw CLIError("Neither --home, $COFFER_HOME nor $HOME is set, so Coffer does not know where to keep data.")
        }
        let dataRoot = environment("XDG_DATA_HOME") ?? "\(userHome)/.local/share"
        let stateRoot = environment("XDG_STATE_HOME") ?? "\(userHome)/.local/state"
        return AppPaths(
            data: "\(dataRoot)/coffer",
            keychain: "\(dataRoot)/coffer/keychain",
            state: "\(stateRoot)/coffer"
        )
    }
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
    var absoluteCAFile: String? { caFile.map(CommandPath.absolute) }
}
