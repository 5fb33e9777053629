import ArgumentParser
import CofferAgentProtocol
import CofferCommandLine
import CofferCrypto
import CofferMIME
import CofferReading
import CofferStore
import CofferSync
import CofferTransport
import Foundation

/// `coffer account add|show|remove`: the IMAP accounts whose mail `coffer sync` brings into the store.
struct AccountCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "account",
        abstract: "Add, show or remove the mail server (IMAP) accounts that `coffer sync` fetches from.",
        subcommands: [Add.self, Show.self, Remove.self]
    )

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "add",
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
        @Option(
            name: .long,
            help: "An https URL where pin failures of this server are reported (JSON, at most once a day each)."
        )
        var pinReportURL: String?
        @Option(
            name: .long,
            help: """
                A date (YYYY-MM-DD, UTC) after which the pins are only reported, not enforced; plan a key change \
                before it (TrustKit's expiration date).
                """
        )
        var pinExpires: String?
        @Flag(name: .long, help: "Read the password from standard input's next line instead of the terminal.")
        var passwordStdin = false
        @Option(
            name: .long,
            help: """
                The SMTP submission server mail is sent through, as submissions://HOST[:PORT] (TLS, 465 by default) \
                or submission://HOST[:PORT] (STARTTLS, 587); it logs in as the IMAP account, and --ca-file and \
                --connect apply to it too.
                """
        )
        var smtp: String?
        @Option(
            name: .customLong("smtp-pin-sha256"),
            help: "An SPKI pin of the SMTP server; repeat for the backup key."
        )
        var smtpPins: [String] = []
        @Option(
            name: .long,
            help: "Your address on mail written here, as \"Name <address>\" (default: the login name, if an address)."
        )
        var from: String?

        /// `submissions://HOST[:PORT]` or `submission://HOST[:PORT]` (STARTTLS) split, or nil.
        static func parseSubmission(_ url: String) -> (host: String, port: Int, startTLS: Bool)? {
            let startTLS = url.lowercased().hasPrefix("submission://")
            let prefix = startTLS ? "submission://" : "submissions://"
            guard url.lowercased().hasPrefix(prefix) else { return nil }
            var rest = String(url.dropFirst(prefix.count))
            if rest.hasSuffix("/") { rest.removeLast() }
            guard !rest.contains("/"), !rest.contains("@"),
                let (host, port) = PinCommand.parse(rest, defaultPort: startTLS ? 587 : 465)
            else { return nil }
            return (host, port, startTLS)
        }

        /// The sending address: `--from`, else the login name when it is an address.
        func sendingAddress() throws -> MailAddress {
            let text = from ?? user
            guard let address = MailAddress.parseList(text).first, address.address.contains("@") else {
                throw ValidationError(
                    from == nil
                        ? "--smtp needs --from \"Name <address>\": the login name is not an email address."
                        : "--from must be an email address, such as \"Alice <alice@example.com>\"."
                )
            }
            return address
        }

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
            if let smtp {
                guard Self.parseSubmission(smtp) != nil else {
                    throw ValidationError(
                        "--smtp must be submissions://HOST[:PORT] or submission://HOST[:PORT] (STARTTLS) with a port "
                            + "from 1 to 65535."
                    )
                }
                guard smtpPins.isEmpty || smtpPins.count >= 2 else {
                    throw ValidationError("Give at least two --smtp-pin-sha256: the server's key and a backup key.")
                }
                _ = try sendingAddress()
            } else if !smtpPins.isEmpty || from != nil {
                throw ValidationError("--smtp-pin-sha256 and --from need --smtp.")
            }
            if let pinReportURL {
                guard let url = URL(string: pinReportURL), url.scheme?.lowercased() == "https", url.host != nil else {
                    throw ValidationError("--pin-report-url must be an https URL.")
                }
                guard !trust.pins.isEmpty else { throw ValidationError("--pin-report-url needs --pin-sha256.") }
            }
            if pinExpires != nil {
                guard !trust.pins.isEmpty else { throw ValidationError("--pin-expires needs --pin-sha256.") }
                _ = try Self.expiry(pinExpires)
            }
        }

        /// The `--pin-expires` date as midnight UTC; nil when absent.
        ///
        /// - Throws: `ValidationError` for a text that is not YYYY-MM-DD, or a date not in the future (pins that
        ///   are expired from the start would never be enforced).
        static func expiry(_ text: String?, now: Date = Date()) throws -> Date? {
            guard let text else { return nil }
            let parts = text.split(separator: "-", omittingEmptySubsequences: false)
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = TimeZone(identifier: "UTC")!
            guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
                let year = Int(parts[0]), let month = Int(parts[1]), let day = Int(parts[2]),
                let date = calendar.date(from: DateComponents(year: year, month: month, day: day)),
                calendar.dateComponents([.year, .month, .day], from: date)
                    == DateComponents(year: year, month: month, day: day)
            else { throw ValidationError("--pin-expires must be a date as YYYY-MM-DD.") }
            guard date > now else { throw ValidationError("--pin-expires must be a date in the future.") }
            guard date.timeIntervalSince1970 < TimeInterval(UInt32.max) else {
                throw ValidationError("--pin-expires must be before the year 2106.")
            }
            return date
        }

        func run() async throws {
            try await runReportingErrors {
                guard let (host, port, startTLS) = Self.parse(imap) else {
                    throw CLIError("--imap is not imaps://HOST[:PORT] or imap://HOST[:PORT].")
                }
                var settings = ServerSettings(
                    ServerAccount(
                        host: host,
                        port: port,
                        username: user,
                        password: "",
                        pins: trust.pins,
                        caFile: trust.absoluteCAFile,
                        connectAddress: trust.connect,
                        startTLS: startTLS,
                        pinReportURL: pinReportURL,
                        pinExpires: try Self.expiry(pinExpires)
                    )
                )
                if let smtp, let (smtpHost, smtpPort, smtpStartTLS) = Self.parseSubmission(smtp) {
                    settings.submission = SubmissionSettings(
                        host: smtpHost,
                        port: smtpPort,
                        startTLS: smtpStartTLS,
                        pins: smtpPins,
                        caFile: trust.absoluteCAFile,
                        connectAddress: trust.connect,
                        address: try sendingAddress(),
                        username: nil
                    )
                }
                let url = settings.account(password: "").url
                try await CommandPath.with(home) { path in
                    // Whoever holds the key (the agent, or this process) checks the login and stores the account.
                    let account = try await path.mailAccount(home, pinOptions)
                    let secret = try Terminal.readPIN(
                        prompt: "Password for \(user) at \(host): ",
                        fromStdin: passwordStdin
                    )
                    let reply = try await path.call(.serverAdd(account: account, server: settings), secret: secret)
                    guard case .serverAdded(let id, let pinCheck) = reply else { throw AppError.malformedMessage }
                    print("Added mail server account \(id): \(user) at \(url) (login checked, \(pinCheck)).")
                    if let submission = settings.submission?.server {
                        print("Mail from \(submission.address) is sent through \(submission.url).")
                    }
                }
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "show",
            abstract: "List the IMAP accounts (never the password)."
        )

        @OptionGroup var home: HomeOptions
        @OptionGroup var pinOptions: PINOptions

        func run() async throws {
            try await runReportingErrors {
                let accounts = try await CommandPath.with(home) { path in
                    let account = try await path.mailAccount(home, pinOptions)
                    guard case .servers(let servers) = try await path.call(.serverShow(account: account)) else {
                        throw AppError.malformedMessage
                    }
                    return servers
                }
                if accounts.isEmpty { print("No mail server account; add one with `coffer account add`.") }
                for account in accounts {
                    print("\(account.id ?? 0)\t\(account.username) at \(account.account(password: "").url)")
                    print(
                        "\tpins: \(account.pins.isEmpty ? "none (chain and host name only)" : account.pins.joined(separator: " "))"
                    )
                    print("\tCAs: \(account.caFile ?? "system")")
                    if let address = account.connectAddress { print("\tconnects to: \(address)") }
                    if let submission = account.submission?.server {
                        print("\tsends mail from \(submission.address) through \(submission.url)")
                        if !submission.endpoint.pins.isEmpty {
                            print("\tsubmission pins: \(submission.endpoint.pins.joined(separator: " "))")
                        }
                    }
                    if let report = account.pinReportURL { print("\tpin failures reported to: \(report)") }
                    if let expires = account.pinExpires {
                        let date = Date(timeIntervalSince1970: TimeInterval(expires))
                        print("\tpins enforced until: \(date.ISO8601Format()), then only reported")
                    }
                }
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "remove",
            abstract: "Remove an IMAP account, its password, its sync state and the mail synced only through it."
        )

        @OptionGroup var home: HomeOptions
        @OptionGroup var pinOptions: PINOptions
        @Argument(help: "The account's number (from `coffer account show`).") var id: Int64

        func run() async throws {
            try await runReportingErrors {
                let deleted = try await CommandPath.with(home) { path in
                    let account = try await path.mailAccount(home, pinOptions)
                    guard
                        case .serverRemoved(_, let messages) = try await path.call(
                            .serverRemove(account: account, server: id)
                        )
                    else { throw AppError.malformedMessage }
                    return messages
                }
                print("Removed mail server account \(id) and \(deleted) messages synced only through it.")
            }
        }
    }
}
