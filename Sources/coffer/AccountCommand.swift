import ArgumentParser
import CofferApp
import CofferCrypto
import CofferStore
import CofferSync
import CofferTransport

/// The store of one Coffer account opened one-shot for the server-account and sync commands when no agent runs (with
/// an agent they ask it, and nothing is unlocked here; `sync --watch` still runs here).
struct ServerSession {
    let mail: MailSession
    let store: MailStore

    static func open(_ home: HomeOptions, _ pin: PINOptions) async throws -> ServerSession {
        let session = try AccountSession.open(home)
        try await session.unlock(pinFromStdin: pin.pinStdin)
        let store = try MailStore(folder: MailSession.folders(session).store, keymaker: session.keymaker)
        return ServerSession(mail: MailSession(session: session, store: store), store: store)
    }

    /// The server account `id`, or the only one.
    func serverAccount(_ id: Int64?) async throws -> (id: Int64, server: ServerAccount) {
        let accounts = try await store.serverAccounts()
        if let id {
            guard let found = accounts.first(where: { $0.id == id }) else {
                throw CLIError("There is no mail server account \(id); `coffer account show` lists them.")
            }
            return found
        }
        guard let only = accounts.first else { throw SyncError.noAccount }
        guard accounts.count == 1 else {
            throw CLIError("There are several mail server accounts; choose one with --id (see `coffer account show`).")
        }
        return only
    }

    func close() throws { try store.close() }
}

/// `coffer account add|show|remove`: the IMAP accounts whose mail `coffer sync` brings into the store.
struct AccountCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "account",
        abstract: "Add, show or remove the mail server (IMAP) accounts that `coffer sync` fetches from.",
        subcommands: [Add.self, Show.self, Remove.self]
    )

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add an IMAP account after checking that it logs in; it is stored sealed under the MainKey.",
            discussion: """
                The password is read from the terminal without echo, or with --password-stdin from the next line \
                of standard input (after the PIN's line with --pin-stdin); never from the command line. With \
                --pin-sha256 (at least two: the server's key and a backup key), a server whose chain holds none of \
                them is refused, with no way around it; `coffer pin HOST` shows the pins a server presents.
                """
        )

        @OptionGroup var home: HomeOptions
        @OptionGroup var pinOptions: PINOptions
        @Option(
            name: .long,
            help: "The server as imaps://HOST[:PORT] (TLS, port 993 by default) or imap://HOST[:PORT] (STARTTLS, 143)."
        )
        var imap: String
        @Option(name: .long, help: "The login name.") var user: String
        @OptionGroup var trust: PinnedServerOptions
        @Flag(name: .long, help: "Read the password from standard input's next line instead of the terminal.")
        var passwordStdin = false

        /// `imaps://HOST[:PORT]` or `imap://HOST[:PORT]` (STARTTLS) split, or nil.
        static func parse(_ url: String) -> (host: String, port: Int, startTLS: Bool)? {
            let startTLS = url.lowercased().hasPrefix("imap://")
            let prefix = startTLS ? "imap://" : "imaps://"
            guard url.lowercased().hasPrefix(prefix) else { return nil }
            var rest = String(url.dropFirst(prefix.count))
            if rest.hasSuffix("/") { rest.removeLast() }
            guard !rest.contains("/"), !rest.contains("@"),
                let (host, port) = PinCommand.parse(rest, defaultPort: startTLS ? 143 : 993)
            else { return nil }
            return (host, port, startTLS)
        }

        func validate() throws {
            guard Self.parse(imap) != nil else {
                throw ValidationError(
                    "--imap must be imaps://HOST[:PORT] or imap://HOST[:PORT] (STARTTLS) with a port from 1 to 65535."
                )
            }
            guard !user.isEmpty else { throw ValidationError("--user must not be empty.") }
        }

        func run() async throws {
            try await runReportingErrors {
                guard let (host, port, startTLS) = Self.parse(imap) else {
                    throw CLIError("--imap is not imaps://HOST[:PORT] or imap://HOST[:PORT].")
                }
                let settings = ServerSettings(
                    ServerAccount(
                        host: host,
                        port: port,
                        username: user,
                        password: "",
                        pins: trust.pins,
                        caFile: trust.absoluteCAFile,
                        connectAddress: trust.connect,
                        startTLS: startTLS
                    )
                )
                let url = settings.account(password: "").url
                if let agent = try AgentLink.connect(home) {
                    // The agent holds the key: it checks the login and stores the account; no keychain opens here.
                    defer { agent.close() }
                    var request = AgentRequest(.accountAdd, account: try AgentLink.account(home))
                    request.server = settings
                    let secret = try Terminal.readPIN(
                        prompt: "Password for \(user) at \(host): ",
                        fromStdin: passwordStdin
                    )
                    let reply = try await agent.call(request, secret: secret)
                    guard let id = reply.serverID else { throw AppError.malformedMessage }
                    print(
                        "Added mail server account \(id): \(user) at \(url) (login checked, \(reply.pinCheck ?? ""))."
                    )
                    return
                }
                let server = try await ServerSession.open(home, pinOptions)
                let secret = try Terminal.readPIN(prompt: "Password for \(user) at \(host): ", fromStdin: passwordStdin)
                let password = secret.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
                guard !password.isEmpty else { throw CLIError("No password was given.") }
                let account = settings.account(password: password)
                let evaluation = try await Syncer(store: server.store).checkLogin(account)
                let id = try await server.store.addServerAccount(account)
                print("Added mail server account \(id): \(user) at \(url) (login checked, \(evaluation)).")
                try server.close()
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the IMAP accounts (never the password).")

        @OptionGroup var home: HomeOptions
        @OptionGroup var pinOptions: PINOptions

        func run() async throws {
            try await runReportingErrors {
                let accounts: [ServerSettings]
                if let agent = try AgentLink.connect(home) {
                    defer { agent.close() }
                    let request = AgentRequest(.accountShow, account: try AgentLink.account(home))
                    accounts = try await agent.call(request).servers ?? []
                } else {
                    let server = try await ServerSession.open(home, pinOptions)
                    accounts = try await server.store.serverAccounts().map { ServerSettings($0.server, id: $0.id) }
                    try server.close()
                }
                if accounts.isEmpty { print("No mail server account; add one with `coffer account add`.") }
                for account in accounts {
                    print("\(account.id ?? 0)\t\(account.username) at \(account.account(password: "").url)")
                    print(
                        "\tpins: \(account.pins.isEmpty ? "none (chain and host name only)" : account.pins.joined(separator: " "))"
                    )
                    print("\tCAs: \(account.caFile ?? "system")")
                    if let address = account.connectAddress { print("\tconnects to: \(address)") }
                }
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove an IMAP account, its password, its sync state and the mail synced only through it."
        )

        @OptionGroup var home: HomeOptions
        @OptionGroup var pinOptions: PINOptions
        @Argument(help: "The account's number (from `coffer account show`).") var id: Int64

        func run() async throws {
            try await runReportingErrors {
                if let agent = try AgentLink.connect(home) {
                    defer { agent.close() }
                    var request = AgentRequest(.accountRemove, account: try AgentLink.account(home))
                    request.id = id
                    let deleted = try await agent.call(request).removedMessages ?? 0
                    print("Removed mail server account \(id) and \(deleted) messages synced only through it.")
                    return
                }
                let server = try await ServerSession.open(home, pinOptions)
                let account = try await server.serverAccount(id)
                let deleted = try await server.store.removeAccount(account.id)
                print("Removed mail server account \(account.id) and \(deleted) messages synced only through it.")
                try server.close()
            }
        }
    }
}
