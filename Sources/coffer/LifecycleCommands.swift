import ArgumentParser
import CofferApp
import CofferAttachments
import CofferCrypto
import CofferKeychain
import CofferKeymaker

struct Init: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Log in: create the account's MainKey on this device.")

    @OptionGroup var home: HomeOptions

    func validate() throws {
        guard home.account != nil else { throw ValidationError("init needs --account NAME.") }
    }

    func run() async throws {
        try await runReportingErrors {
            let device = try home.resolve().openForSetUp()
            let account = home.account ?? ""
            let keymaker = device.keymaker(for: account, configuration: .oneShot(device.home))
            if try await !keymaker.isSetUp() {
                // Mail left by a key destroyed earlier (by a process that could not delete it) is noise now.
                SecureFile.removeTree(AppPaths(data: device.home.data, keychain: "", state: "").mail(account))
            }
            try await keymaker.createMainKey()
            print("Created a MainKey for \(account).")
            print("It rests in the keychain with no further protection; add some with `coffer protect pin` or")
            print("`coffer protect secure-element`.")
        }
    }
}

struct Protect: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Add or remove a protection strategy (rewraps only the MainKey, never the data).",
        discussion: """
            `protect pin` sets or changes the PIN (`--tpm`: bound to this machine's TPM, which counts wrong PINs \
            itself and locks out, so a copy of the disk cannot be guessed offline); `protect secure-element` seals the MainKey to the software secure \
            element; `--remove` takes one away; `protect none` removes all. With --pin-stdin, standard input gives \
            the current PIN first (if one is needed to unlock) and the new PIN on the next line.
            """
    )

    enum Strategy: String, ExpressibleByArgument, CaseIterable {
        case pin
        case secureElement = "secure-element"
        case none
    }

    @OptionGroup var home: HomeOptions
    @OptionGroup var pinOptions: PINOptions
    @Argument(help: "pin, secure-element or none.") var strategy: Strategy
    @Flag(name: .long, help: "Remove the strategy instead of adding it.") var remove = false
    @Flag(name: .long, help: "Bind the PIN to this machine's TPM (COFFER_TPM_TCTI, else /dev/tpmrm0).") var tpm = false
    @Option(name: .customLong("with"), help: "How to unlock first when several strategies are active.")
    var preference: UnlockPreference?

    func validate() throws {
        if remove && strategy == .none { throw ValidationError("`protect none` already removes every strategy.") }
        if tpm && (strategy != .pin || remove) { throw ValidationError("--tpm goes with `protect pin` only.") }
    }

    func run() async throws {
        try await runReportingErrors {
            if tpm { try TPMCheck.require() }
            if let agent = try AgentLink.connect(home) {
                defer { agent.close() }
                if tpm {
                    throw CLIError("`protect pin --tpm` does not go through the agent yet; stop the agent first.")
                }
                return try await AgentProof.protect(
                    agent,
                    home,
                    strategy: strategy.rawValue,
                    remove: remove,
                    pinFromStdin: pinOptions.pinStdin,
                    preference: preference
                )
            }
            let session = try AccountSession.open(home)
            let keymaker = session.keymaker
            // A fresh proof by a current strategy, even to lower protection: a wrong PIN here counts as an attempt.
            let proof = try await session.proof(
                pinFromStdin: pinOptions.pinStdin,
                preference: preference,
                purpose: "Change the protection of"
            )
            switch (strategy, remove) {
            case (.pin, false):
                let pin = try Terminal.readPIN(prompt: "New PIN: ", fromStdin: pinOptions.pinStdin)
                if !pinOptions.pinStdin {
                    let again = try Terminal.readPIN(prompt: "New PIN again: ", fromStdin: false)
                    guard pin == again else { throw CLIError("The two PINs differ; nothing was changed.") }
                }
                let estimate = try await keymaker.activatePIN(pin, authorizedBy: proof, element: tpm ? .tpm : .software)
                print(tpm ? TPMCheck.sentence : estimate.sentence)
            case (.secureElement, false):
                try await keymaker.activateSecureElement(authorizedBy: proof)
            case (.pin, true):
                try await keymaker.deactivate(.pin, authorizedBy: proof)
            case (.secureElement, true):
                try await keymaker.deactivate(.secureElement, authorizedBy: proof)
            case (.none, _):
                try await keymaker.deactivate(nil, authorizedBy: proof)
            }
            print(
                "\(session.account) is now protected by: \(try await keymaker.protectionDescriptions().joined(separator: " + "))."
            )
        }
    }
}

struct Unlock: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Authenticate and put the MainKey in memory.")

    @OptionGroup var home: HomeOptions
    @OptionGroup var pinOptions: PINOptions
    @Option(name: .customLong("with"), help: "pin or secure-element, when both are active.")
    var preference: UnlockPreference?

    func run() async throws {
        try await runReportingErrors {
            if let agent = try AgentLink.connect(home) {
                defer { agent.close() }
                return try await AgentLifecycle.unlock(
                    agent,
                    home,
                    pinFromStdin: pinOptions.pinStdin,
                    preference: preference
                )
            }
            let session = try AccountSession.open(home)
            try await session.unlock(pinFromStdin: pinOptions.pinStdin, preference: preference)
            print("Unlocked \(session.account). No agent holds the key, so it was dropped again as this command ended.")
        }
    }
}

struct Lock: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Remove the MainKey from memory.")

    @OptionGroup var home: HomeOptions

    func run() async throws {
        try await runReportingErrors {
            if let agent = try AgentLink.connect(home) {
                defer { agent.close() }
                return try await AgentLifecycle.lock(agent, home)
            }
            let session = try AccountSession.open(home)
            await session.keymaker.lock()
            print("Locked \(session.account). No agent is running, so no process held the key.")
        }
    }
}

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show accounts, their protection and the mode.")

    @OptionGroup var home: HomeOptions

    func run() async throws {
        try await runReportingErrors {
            if let agent = try AgentLink.connect(home) {
                defer { agent.close() }
                return try await AgentLifecycle.status(agent, home)
            }
            guard let device = try home.resolve().openIfSetUp() else {
                if home.account != nil { throw CLIError.noAccount }
                print("mode: one-shot (no agent): every command authenticates by itself and drops the key when it ends")
                print("accounts: none; run `coffer init --account NAME`")
                return
            }
            let accounts = try home.account.map { [try device.chooseAccount($0)] } ?? device.accounts()
            print("mode: one-shot (no agent): every command authenticates by itself and drops the key when it ends")
            if accounts.isEmpty { print("accounts: none; run `coffer init --account NAME`") }
            for account in accounts {
                let keymaker = device.keymaker(for: account, configuration: .oneShot(device.home))
                print("account: \(account)")
                print("  protection: \(try await keymaker.protectionDescriptions().joined(separator: " + "))")
                if try await keymaker.strategies().contains(.pin) {
                    let failures = try await keymaker.failedAttempts()
                    print("  failed PIN attempts: \(failures) of 10")
                }
                print("  state: locked (the key is in memory only while a command or the agent holds it)")
                print("  autolock: nothing pending (one-shot: each command drops the key as it ends)")
            }
        }
    }
}

struct AutolockCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "autolock",
        abstract: "Set when the key leaves memory: never, background, or a time such as 30s, 5m, 1h."
    )

    @OptionGroup var home: HomeOptions
    @OptionGroup var pinOptions: PINOptions
    @Argument(help: "never, background, or a duration like 5m.") var policy: String

    func validate() throws {
        guard AutolockPolicy(parsing: policy) != nil else {
            throw ValidationError("The autolock policy must be never, background, or a duration such as 30s, 5m or 1h.")
        }
    }

    func run() async throws {
        try await runReportingErrors {
            if let agent = try AgentLink.connect(home) {
                defer { agent.close() }
                return try await AgentLifecycle.autolock(agent, home, policy: policy, pinFromStdin: pinOptions.pinStdin)
            }
            let session = try AccountSession.open(home)
            try await session.unlock(pinFromStdin: pinOptions.pinStdin)
            let parsed = AutolockPolicy(parsing: policy) ?? .mostPrivate
            try await session.keymaker.setAutolock(parsed)
            print("Autolock for \(session.account): \(parsed) (stored sealed under the MainKey).")
        }
    }
}

struct Logout: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Log out: destroy the account's MainKey, which makes all its sealed data unreadable.",
        discussion: """
            A protected account needs its current PIN (or presence) even when unlocked; with --pin-stdin the PIN is \
            standard input's first line. Forgot the PIN? `logout --forgot-pin` erases the account after you type its \
            name (the first line of standard input when it is not a terminal): everything of it is lost.
            """
    )

    @OptionGroup var home: HomeOptions
    @OptionGroup var pinOptions: PINOptions
    @Flag(name: .long, help: "Do not ask to type yes (a protected account still needs its PIN).") var yes = false
    @Flag(name: .long, help: "The PIN is forgotten: erase the account after typing its name.") var forgotPin = false
    @Option(name: .customLong("with"), help: "pin or secure-element, when both are active.")
    var preference: UnlockPreference?

    func run() async throws {
        try await runReportingErrors {
            let session = try AccountSession.open(home)
            let account = session.account
            let keymaker = session.keymaker
            if forgotPin {
                if let agent = try AgentLink.connect(home) {
                    agent.close()
                    throw CLIError("An agent runs for this home; stop it first, then run `logout --forgot-pin` again.")
                }
                Terminal.printError(
                    "Erasing \(account) without its PIN destroys its key: all its mail, settings and attachments are "
                        + "lost for good. Type the account name to erase it: "
                )
                let typed = Terminal.readLine(fd: 0).map { String(decoding: $0, as: UTF8.self) }
                guard let typed, typed == account else { throw CLIError("Not confirmed; nothing was erased.") }
                try await keymaker.eraseForgotten(confirmingAccountName: typed)
                try removeMail(session)
                print("Erased \(account): its MainKey, wraps, records, mail store and attachment cache are gone.")
                return
            }
            if !yes {
                guard Terminal.isInteractiveOutput else {
                    throw CLIError(
                        "Logging out erases the account's key; pass --yes to confirm when not at a terminal."
                    )
                }
                print(
                    "Erase the key of \(account)? Everything sealed under it becomes unreadable. Type yes: ",
                    terminator: ""
                )
                guard Terminal.readLine(fd: 0).map({ String(decoding: $0, as: UTF8.self) }) == "yes" else {
                    throw CLIError("Not confirmed; nothing was erased.")
                }
            }
            if let agent = try AgentLink.connect(home) {
                defer { agent.close() }
                return try await AgentProof.logout(
                    agent,
                    account: account,
                    pinFromStdin: pinOptions.pinStdin,
                    preference: preference
                )
            }
            let proof = try await session.proof(
                pinFromStdin: pinOptions.pinStdin,
                preference: preference,
                purpose: "Log out of"
            )
            // The proof is checked (a wrong PIN counted) before anything is deleted.
            try await keymaker.logout(authorizedBy: proof)
            try removeMail(session)
            print("Logged out \(account): its MainKey, wraps, records, mail store and attachment cache are gone.")
        }
    }

    /// Without the key the sealed store and cache are noise; they are deleted all the same (the Keymaker's
    /// `onDestroy` did it already; this also empties a cache folder that could not be removed whole).
    private func removeMail(_ session: AccountSession) throws {
        let paths = AppPaths(data: session.device.home.data, keychain: "", state: "")
        paths.migrateLegacyMail(session.account)
        if SecureFile.exists(paths.cache(session.account)) {
            _ = try? AttachmentCache(folder: paths.cache(session.account), keymaker: session.keymaker).purgeAll()
        }
        SecureFile.removeTree(paths.mail(session.account))
    }
}

/// `protect` and `logout` when an agent runs: the agent holds the key, yet they need a fresh proof by a current
/// strategy, sent with the request (`method`; a PIN in the secret frame, presence answered at this terminal).
enum AgentProof {
    /// The proof `account` needs: `none` when unprotected, else presence or a PIN (read here).
    static func proof(
        _ agent: AgentClient,
        account: String,
        pinFromStdin: Bool,
        preference: UnlockPreference?
    ) async throws -> (method: String, pin: SecretBytes?) {
        guard let current = try await AgentLink.status(agent, account: account).1.first else {
            throw AppError.noAccount
        }
        let strategies = Set(current.protection)
        if strategies.contains("none") { return ("none", nil) }
        let useElement: Bool
        switch preference {
        case .pin?: useElement = false
        case .secureElement?: useElement = true
        case nil: useElement = strategies.contains("secure-element") && !(strategies.contains("pin") && pinFromStdin)
        }
        if useElement { return ("secure-element", nil) }
        return ("pin", try Terminal.readPIN(prompt: "PIN for \(account): ", fromStdin: pinFromStdin))
    }

    static func protect(
        _ agent: AgentClient,
        _ home: HomeOptions,
        strategy: String,
        remove: Bool,
        pinFromStdin: Bool,
        preference: UnlockPreference?
    ) async throws {
        let account = try AgentLink.account(home)
        let (method, current) = try await proof(
            agent,
            account: account,
            pinFromStdin: pinFromStdin,
            preference: preference
        )
        var request = AgentRequest(.protect, account: account)
        request.strategy = strategy
        request.remove = remove
        request.method = method
        var secret = current
        if strategy == "pin" && !remove {
            let pin = try Terminal.readPIN(prompt: "New PIN: ", fromStdin: pinFromStdin)
            if !pinFromStdin {
                let again = try Terminal.readPIN(prompt: "New PIN again: ", fromStdin: false)
                guard pin == again else { throw CLIError("The two PINs differ; nothing was changed.") }
            }
            // One secret frame: the current PIN (if it is the proof), a newline, the new PIN.
            var bytes: [UInt8] = current.map { $0.withUnsafeBytes { Array($0) } + [0x0A] } ?? []
            bytes += pin.withUnsafeBytes { Array($0) }
            defer { for index in bytes.indices { bytes[index] = 0 } }
            secret = SecretBytes(copying: bytes)
        }
        let reply = try await agent.call(request, secret: secret) { event in
            guard event.event == "presence" else { return nil }
            let confirmed = await TerminalPresence().confirmPresence(reason: event.reason ?? "Change protection.")
            return AgentAnswer(confirmed: confirmed)
        }
        print("\(account) is now protected by: \((reply.strategies ?? []).joined(separator: " + ")).")
    }

    static func logout(
        _ agent: AgentClient,
        account: String,
        pinFromStdin: Bool,
        preference: UnlockPreference?
    ) async throws {
        let (method, pin) = try await proof(agent, account: account, pinFromStdin: pinFromStdin, preference: preference)
        var request = AgentRequest(.logout, account: account)
        request.method = method
        _ = try await agent.call(request, secret: pin) { event in
            guard event.event == "presence" else { return nil }
            let confirmed = await TerminalPresence().confirmPresence(reason: event.reason ?? "Log out.")
            return AgentAnswer(confirmed: confirmed)
        }
        print("Logged out \(account): its MainKey, wraps, records, mail store and attachment cache are gone.")
    }
}
