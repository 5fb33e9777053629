import ArgumentParser
import CofferAgentProtocol
import CofferApp
import CofferCommandLine
import CofferCrypto
import CofferNotifyClient
import CofferPush
import CofferReading
import Foundation

/// `coffer key`: the user's own OpenPGP keys, sealed in the store under the MainKey.
struct KeyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "key",
        abstract:
            "OpenPGP keys, sealed in the store: yours (generate, import, export the public key) and your correspondents' (import); list.",
        subcommands: [Generate.self, Import.self, Export.self, List.self, Autocrypt.self]
    )

    /// `coffer key generate`.
    struct Generate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "generate",
            abstract: "Generate an OpenPGP key (Ed25519, with an X25519 encryption subkey) and seal it in the store.",
            discussion: """
                The key has no OpenPGP passphrase: the account's MainKey protects it, as it protects your mail. \
                The first key is the default one.
                """
        )

        @OptionGroup var home: HomeOptions
        @OptionGroup var pinOptions: PINOptions
        @Option(
            name: .customLong("user-id"),
            help: "The user id, as \"Name <address>\" (default: your sending address)."
        )
        var userID: String?

        func run() async throws {
            try await runReportingErrors {
                try await CommandPath.with(home) { path in
                    let account = try await path.mailAccount(home, pinOptions)
                    let reply = try await path.call(.keyGenerate(account: account, userID: userID))
                    guard case .openPGPKeys(let keys) = reply else { throw AppError.malformedMessage }
                    for key in keys { print(KeyCommand.line(key)) }
                }
            }
        }
    }

    /// `coffer key import FILE`.
    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "import",
            abstract:
                "Import your OpenPGP secret key, or a correspondent's public key, from a file; sealed in the store.",
            discussion: """
                A public key (as `gpg --export --armor` writes it) is a correspondent's: it is kept with the \
                address-book entries of its user ids' email addresses, used to check their signatures and to \
                encrypt to them (--encrypt). An expired or revoked key, or one without an email address, is refused.
                When the key is protected by a passphrase, it is asked once on the terminal without echo (or, with \
                --passphrase-stdin, read from standard input's next line), used to unlock the key, and dropped: \
                the key is stored without it, protected by the MainKey.
                """
        )

        @OptionGroup var home: HomeOptions
        @OptionGroup var pinOptions: PINOptions
        @Argument(help: "The key file.") var file: String
        @Flag(name: .long, help: "Read the key's passphrase from standard input's next line instead of the terminal.")
        var passphraseStdin = false

        func run() async throws {
            try await runReportingErrors {
                try await CommandPath.with(home) { path in
                    let account = try await path.mailAccount(home, pinOptions)
                    let file = absolutePath(file)
                    let reply: AgentReply
                    do {
                        reply = try await path.call(.keyImport(account: account, path: file, passphrase: false))
                    } catch let error where KeyCommand.asksForPassphrase(error) {
                        let passphrase = try Terminal.readSecret(
                            prompt: "Passphrase of the OpenPGP key: ",
                            what: "passphrase",
                            stdinOption: "--passphrase-stdin",
                            fromStdin: passphraseStdin
                        )
                        defer { passphrase.wipe() }
                        reply = try await path.call(
                            .keyImport(account: account, path: file, passphrase: true),
                            secret: passphrase
                        )
                    }
                    guard case .openPGPKeys(let keys) = reply else { throw AppError.malformedMessage }
                    for key in keys { print(KeyCommand.line(key)) }
                }
            }
        }
    }

    /// `coffer key export --public [FINGERPRINT]`.
    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "export",
            abstract: "Print the public key (certificate) of one of your OpenPGP keys, ASCII-armored.",
            discussion: "Secret keys are never exported."
        )

        @OptionGroup var home: HomeOptions
        @OptionGroup var pinOptions: PINOptions
        @Flag(name: .customLong("public"), help: "Export the public key (required: secret keys are never exported).")
        var publicKey = false
        @Argument(help: "The key's fingerprint (default: the default key).") var fingerprint: String?

        func validate() throws {
            guard publicKey else { throw ValidationError("Only public keys are exported: pass --public.") }
        }

        func run() async throws {
            try await runReportingErrors {
                try await CommandPath.with(home) { path in
                    let account = try await path.mailAccount(home, pinOptions)
                    let reply = try await path.call(.keyExport(account: account, fingerprint: fingerprint))
                    guard case .text(let armored) = reply else { throw AppError.malformedMessage }
                    print(armored, terminator: armored.hasSuffix("\n") ? "" : "\n")
                }
            }
        }
    }

    /// `coffer key autocrypt`.
    struct Autocrypt: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "autocrypt",
            abstract:
                "Autocrypt: show or set prefer-encrypt; write or send a Setup Message of your key; import one.",
            discussion: """
                Every message sent from an account with an OpenPGP key carries an Autocrypt header with the \
                public key and this preference. With mutual, a message to correspondents who all prefer mutual too \
                (and whose Autocrypt keys are known) is encrypted without --encrypt.
                --setup-message FILE writes an Autocrypt Setup Message of your default secret key to FILE (with \
                --send, also sends it to your own address): the key is encrypted under a Setup Code printed once \
                here, which you type on the other device. --import-setup ID imports the key of a stored Setup \
                Message (from `coffer list`), asking for its Setup Code without echo (or, with --code-stdin, \
                reading it from standard input's next line).
                """
        )

        @OptionGroup var home: HomeOptions
        @OptionGroup var pinOptions: PINOptions
        @Option(name: .customLong("prefer-encrypt"), help: "mutual or nopreference (the default).")
        var preferEncrypt: String?
        @Option(name: .customLong("setup-message"), help: "Write an Autocrypt Setup Message of your key to this file.")
        var setupMessage: String?
        @Flag(name: .long, help: "With --setup-message: also send it to your own address.") var send = false
        @Option(name: .customLong("import-setup"), help: "Import the key of this stored Setup Message.")
        var importSetup: Int64?
        @Flag(name: .customLong("code-stdin"), help: "Read the Setup Code from standard input's next line.")
        var codeStdin = false

        func validate() throws {
            if let preferEncrypt, preferEncrypt != "mutual", preferEncrypt != "nopreference" {
                throw ValidationError("--prefer-encrypt is mutual or nopreference.")
            }
            if send && setupMessage == nil { throw ValidationError("--send needs --setup-message FILE.") }
            if setupMessage != nil && importSetup != nil {
                throw ValidationError("--setup-message and --import-setup cannot be given together.")
            }
        }

        func run() async throws {
            try await runReportingErrors {
                try await CommandPath.with(home) { path in
                    let account = try await path.mailAccount(home, pinOptions)
                    if let setupMessage {
                        try await writeSetupMessage(to: absolutePath(setupMessage), account: account, path)
                        return
                    }
                    if let importSetup {
                        let code = try Terminal.readSecret(
                            prompt: "Setup Code (9 blocks of 4 digits): ",
                            what: "Setup Code",
                            stdinOption: "--code-stdin",
                            fromStdin: codeStdin
                        )
                        defer { code.wipe() }
                        let reply = try await path.call(
                            .keyAutocryptImport(account: account, message: importSetup),
                            secret: code
                        )
                        guard case .openPGPKeys(let keys) = reply else { throw AppError.malformedMessage }
                        for key in keys { print(KeyCommand.line(key)) }
                        return
                    }
                    let reply = try await path.call(.keyAutocrypt(account: account, preferEncrypt: preferEncrypt))
                    guard case .text(let value) = reply else { throw AppError.malformedMessage }
                    print("Autocrypt prefer-encrypt: \(value)")
                }
            }
        }

        /// Makes the Setup Code here, has the agent encrypt the key under it, writes the message (0600, not over an
        /// existing file) and prints the code once.
        private func writeSetupMessage(to file: String, account: String, _ path: CommandPath) async throws {
            guard !FileManager.default.fileExists(atPath: file) else {
                throw ValidationError("\(file) exists already; choose a new file for the Setup Message.")
            }
            let code = AutocryptSetupHandler.newSetupCode()
            defer { code.wipe() }
            // A copy goes out: the handler wipes what it is given (in this process too, without an agent).
            let sent = code.withUnsafeBytes { SecretBytes(copying: $0) }
            let reply = try await path.call(.keyAutocryptSetup(account: account, send: send), secret: sent)
            guard case .text(let message) = reply else { throw AppError.malformedMessage }
            guard
                FileManager.default.createFile(
                    atPath: file,
                    contents: Data(message.utf8),
                    attributes: [.posixPermissions: 0o600]
                )
            else { throw ValidationError("\(file) could not be written.") }
            print("Autocrypt Setup Message written to \(file)\(send ? " and sent to your own address" : "").")
            print("Setup Code (type it on the other device; it is shown only now):")
            code.withUnsafeBytes { bytes in
                let blocks = String(decoding: bytes, as: UTF8.self).split(separator: "-")
                print(blocks[0..<3].joined(separator: "-"))
                print(blocks[3..<6].joined(separator: "-"))
                print(blocks[6..<9].joined(separator: "-"))
            }
        }
    }

    /// `coffer key list`.
    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list",
            abstract: "List your OpenPGP keys: fingerprint, when added, the default one, user ids."
        )

        @OptionGroup var home: HomeOptions
        @OptionGroup var pinOptions: PINOptions

        func run() async throws {
            try await runReportingErrors {
                try await CommandPath.with(home) { path in
                    let account = try await path.mailAccount(home, pinOptions)
                    guard case .openPGPKeys(let keys) = try await path.call(.keys(account: account)) else {
                        throw AppError.malformedMessage
                    }
                    if keys.isEmpty { print("No OpenPGP keys.") }
                    let own = keys.filter { !$0.isCorrespondent }
                    let correspondents = keys.filter(\.isCorrespondent)
                    for key in own { print(KeyCommand.line(key)) }
                    if !correspondents.isEmpty {
                        if !own.isEmpty { print("") }
                        print("Correspondents' public keys:")
                        for key in correspondents { print(KeyCommand.line(key)) }
                    }
                }
            }
        }
    }

    /// One key: fingerprint, date added, `default` or `-`, and the user ids cleaned for the terminal (a user id is
    /// whatever its key's owner wrote, escapes included).
    static func line(_ key: OpenPGPKeyInfo) -> String {
        let kind = key.isCorrespondent ? "contact" : key.isDefault ? "default" : "-"
        return "\(key.fingerprint)\t\(Composer.date(key.created))\t\(kind)\t"
            + PushMessage.clean(key.userIDs.joined(separator: ", "))
    }

    /// Whether `error` says the key file holds a protected key and no passphrase came (from the agent or from the
    /// dispatcher in this process).
    static func asksForPassphrase(_ error: any Error) -> Bool {
        switch error {
        case AppError.remote(let code, _): code == .passphraseRequired
        case let failure as AgentFailure: failure.code == .passphraseRequired
        default: false
        }
    }
}
