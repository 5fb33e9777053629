import ArgumentParser
import CofferAgentProtocol
import CofferCommandLine
import CofferCrypto
import CofferKeymaker
import CofferReading

struct Init: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Log in: create the account's MainKey on this device."
    )

    @OptionGroup var home: HomeOptions

    func validate() throws {
        guard home.account != nil else { throw ValidationError("init needs --account NAME.") }
    }

    func run() async throws {
        try await runReportingErrors {
            let account = home.account ?? ""
            try await CommandPath.with(home) { path in try await path.call(.create(account: account)) }
            print("Created a MainKey for \(account).")
            print("It rests in the keychain with no further protection; add some with `coffer protect pin` or")
            print("`coffer protect secure-element`.")
        }
    }
}

struct Protect: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "protect",
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
            try await CommandPath.with(home) { path in
                let status = try await path.account(home)
                // A fresh proof by a current strategy, even to lower protection: a wrong PIN counts as an attempt.
                let (proof, current) = try path.proof(
                    for: status,
                    pinFromStdin: pinOptions.pinStdin,
                    preference: preference
                )
                let change: ProtectionChange
                switch (strategy, remove) {
                case (.pin, false): change = .addPIN(tpm: tpm)
                case (.secureElement, false): change = .addSecureElement
                case (.pin, true): change = .removePIN
                case (.secureElement, true): change = .removeSecureElement
                case (.none, _): change = .removeAll
                }
                var secret = current
                if change.addsPIN {
                    let pin = try Terminal.readPIN(prompt: "New PIN: ", fromStdin: pinOptions.pinStdin)
                    if !pinOptions.pinStdin {
                        let again = try Terminal.readPIN(prompt: "New PIN again: ", fromStdin: false)
                        guard pin == again else { throw CLIError("The two PINs differ; nothing was changed.") }
                    }
                    // One secret: the current PIN (if it is the proof), a newline, the new PIN.
                    var bytes: [UInt8] = current.map { $0.withUnsafeBytes { Array($0) } + [0x0A] } ?? []
                    bytes += pin.withUnsafeBytes { Array($0) }
                    defer { for index in bytes.indices { bytes[index] = 0 } }
                    secret = SecretBytes(copying: bytes)
                }
                let reply = try await path.call(
                    .protect(account: status.account, change: change, proof: proof),
                    secret: secret
                )
                guard case .protected(_, let descriptions, let estimate, let fastSyncEnded, let keyDeleted) = reply
                else {
                    throw AppError.malformedMessage
                }
                if tpm { print(TPMCheck.sentence) } else if let estimate { print(estimate) }
                print("\(status.account) is now protected by: \(descriptions.joined(separator: " + ")).")
                if fastSyncEnded {
                    print(
                        keyDeleted
                            ? "FastSync is off: a change of protection ends it (the record is deleted here and the key "
                                + "on the service); `coffer fastsync on` renews it."
                            : "FastSync is off: a change of protection ends it (the record is deleted here, so the "
                                + "service's key opens nothing; the service is told at the next unlock); `coffer "
                                + "fastsync on` renews it."
                    )
                }
            }
        }
    }
}

struct Unlock: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unlock",
        abstract: "Authenticate and put the MainKey in memory."
    )

    @OptionGroup var home: HomeOptions
    @OptionGroup var pinOptions: PINOptions
    @Option(name: .customLong("with"), help: "pin or secure-element, when both are active.")
    var preference: UnlockPreference?

    func run() async throws {
        try await runReportingErrors {
            try await CommandPath.with(home) { path in
                let (status, already) = try await path.unlock(
                    home,
                    pinFromStdin: pinOptions.pinStdin,
                    preference: preference
                )
                guard path.isAgent else {
                    print(
                        "Unlocked \(status.account). No agent holds the key, so it was dropped again as this command ended."
                    )
                    return
                }
                // One status after the unlock gives both the agent's pid and the autolock now in force.
                guard case .status(let pid, _, let accounts, _) = try await path.call(.status(account: status.account))
                else { throw AppError.malformedMessage }
                print(
                    already
                        ? "\(status.account) was already unlocked in the agent (pid \(pid))."
                        : "Unlocked \(status.account) in the agent (pid \(pid))."
                )
                for now in accounts where now.account == status.account {
                    for line in StatusLines.describe(now, agent: true) where line.hasPrefix("  autolock") {
                        print(line.trimmingSpaces)
                    }
                }
            }
        }
    }
}

struct Lock: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "lock", abstract: "Remove the MainKey from memory.")

    @OptionGroup var home: HomeOptions

    func run() async throws {
        try await runReportingErrors {
            try await CommandPath.with(home) { path in
                let status = try await path.account(home)
                try await path.call(.lock(account: status.account))
                if path.isAgent {
                    print("Locked \(status.account): the agent dropped the key and zeroed it.")
                } else {
                    print("Locked \(status.account). No agent is running, so no process held the key.")
                }
            }
        }
    }
}

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show accounts, their protection and the mode."
    )

    @OptionGroup var home: HomeOptions

    func run() async throws {
        try await runReportingErrors {
            try await CommandPath.with(home) { path in
                let reply = try await path.call(.status(account: home.account))
                guard case .status(let pid, let socket, let accounts, let loggedOut) = reply else {
                    throw AppError.malformedMessage
                }
                if path.isAgent {
                    print(
                        "mode: agent (pid \(pid), socket \(socket)): commands go to the agent, which holds unlocked keys"
                    )
                } else {
                    if accounts.isEmpty, home.account != nil { throw AppError.noAccount }
                    print(
                        "mode: one-shot (no agent): every command authenticates by itself and drops the key when it ends"
                    )
                }
                if accounts.isEmpty { print("accounts: none; run `coffer init --account NAME`") }
                for status in accounts {
                    for line in StatusLines.describe(status, agent: path.isAgent) { print(line) }
                }
                for logout in loggedOut {
                    print("account: \(logout.account) (logged out by the service)")
                    print("  why: \(logout.reason)")
                }
            }
        }
    }
}

/// One account's lines of `coffer status`.
enum StatusLines {
    static func describe(_ status: AccountStatus, agent: Bool) -> [String] {
        var lines = [
            "account: \(status.account)",
            "  protection: \((status.protectionDescriptions ?? status.protection).joined(separator: " + "))",
        ]
        if let failures = status.failedAttempts, let limit = status.failedAttemptLimit {
            lines.append("  failed PIN attempts: \(failures) of \(limit)")
        }
        if let failed = status.outboxFailed, failed > 0 {
            lines.append("  outbox: \(failed) not sent (`coffer outbox` says why)")
        }
        guard agent else {
            lines.append("  state: locked (the key is in memory only while a command or the agent holds it)")
            lines.append("  autolock: nothing pending (one-shot: each command drops the key as it ends)")
            if let waiting = status.outboxWaiting, waiting > 0 {
                lines.append("  outbox: \(waiting) to send (`coffer outbox --flush` sends them; the agent would)")
            }
            return lines
        }
        if status.unlocked {
            lines.append("  state: unlocked (the agent holds the key)")
            switch (status.autolock, status.secondsUntilAutolock) {
            case (let policy?, let seconds?): lines.append("  autolock: in \(seconds) s (policy \(policy))")
            case ("background"?, nil):
                lines.append("  autolock: when the app goes to the background (`coffer background`)")
            case (let policy?, nil): lines.append("  autolock: \(policy)")
            default: break
            }
        } else {
            lines.append("  state: locked (run `coffer unlock` to give the agent the key)")
        }
        if let waiting = status.outboxWaiting, waiting > 0 {
            lines.append(
                "  outbox: \(waiting) message\(waiting == 1 ? "" : "s") to send"
                    + (status.unlocked ? "" : ", waiting for the unlock")
            )
        }
        return lines
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
            try await CommandPath.with(home) { path in
                let (status, _) = try await path.unlock(home, pinFromStdin: pinOptions.pinStdin)
                guard case .autolock(let now) = try await path.call(.autolock(account: status.account, policy: policy))
                else { throw AppError.malformedMessage }
                if path.isAgent {
                    print("Autolock for \(status.account): \(now) (stored sealed; the agent's timer enforces it).")
                } else {
                    print("Autolock for \(status.account): \(now) (stored sealed under the MainKey).")
                }
            }
        }
    }
}

struct Logout: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "logout",
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
            try await CommandPath.with(home) { path in
                let status = try await path.account(home)
                let account = status.account
                if forgotPin {
                    Terminal.printError(
                        "Erasing \(account) without its PIN destroys its key: all its mail, settings and attachments "
                            + "are lost for good. Type the account name to erase it: "
                    )
                    let typed = Terminal.readLine(fd: 0).map { String(decoding: $0, as: UTF8.self) }
                    guard let typed, typed == account else { throw CLIError("Not confirmed; nothing was erased.") }
                    try await path.call(.erase(account: account, confirmation: typed))
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
                // The proof is checked (a wrong PIN counted) before anything is deleted.
                let (proof, pin) = try path.proof(
                    for: status,
                    pinFromStdin: pinOptions.pinStdin,
                    preference: preference
                )
                try await path.call(.logout(account: account, proof: proof), secret: pin)
                print("Logged out \(account): its MainKey, wraps, records, mail store and attachment cache are gone.")
            }
        }
    }
}
