import ArgumentParser
import CofferAgentProtocol
import CofferCommandLine
import CofferNotifyClient
import CofferPush
import Foundation

/// `coffer notify register|status|unregister`: the account's push session with a coffer-notify service.
struct NotifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "notify",
        abstract: "Register this device with a coffer-notify service for encrypted new-mail pushes, or remove it.",
        subcommands: [Register.self, Status.self, Unregister.self]
    )

    struct Register: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "register",
            abstract: "Register a push session with the service, proving the IMAP account's credentials.",
            discussion: """
                Makes a fresh P-256 key pair and auth secret for this session (never reused), keeps them in the \
                keychain as afterFirstUnlockThisDeviceOnly items (the push handler reads them without the PIN), \
                sends the public half with the IMAP account's user name and password (the service checks them \
                once and keeps neither), and keeps the session token sealed under the MainKey. The service sets \
                the Dovecot METADATA entry for its push driver itself. The service is pinned like an IMAP server: \
                with --pin-sha256 (at least two) a chain holding none of them is refused. http:// is accepted only \
                for a loopback address.
                """
        )

        @OptionGroup var home: HomeOptions
        @OptionGroup var pinOptions: PINOptions
        @Option(name: .long, help: "The service: https://HOST[:PORT].") var server: String
        @OptionGroup var trust: PinnedServerOptions
        @Option(name: .long, help: "The mail server account whose credentials prove the user (default the only one).")
        var id: Int64?
        @Option(name: .customLong("device-name"), help: "The name the service shows for this session.")
        var deviceName: String?

        func validate() throws {
            do {
                _ = try NotifyServer(url: server, pins: trust.pins, caFile: trust.caFile, connectAddress: trust.connect)
            } catch {
                throw ValidationError(error.description)
            }
        }

        func run() async throws {
            try await runReportingErrors {
                let target = try NotifyServer(
                    url: server,
                    pins: trust.pins,
                    caFile: trust.absoluteCAFile,
                    connectAddress: trust.connect
                )
                let name =
                    deviceName
                    ?? (ProcessInfo.processInfo.hostName.isEmpty ? "coffer" : ProcessInfo.processInfo.hostName)
                // Registration needs the IMAP password, which only an unlocked store gives: unlocked first (a no-op
                // when the agent holds the key), then the agent (or this process) registers.
                try await CommandPath.with(home) { path in
                    let status = try await path.unlock(home, pinFromStdin: pinOptions.pinStdin).status
                    guard
                        case .notifyRegistered(let sessionID, let url, let user, let expires) = try await path.call(
                            .notifyRegister(account: status.account, service: target, server: id, deviceName: name)
                        )
                    else { throw AppError.malformedMessage }
                    print(
                        "Registered push session \(sessionID) with \(url) for \(user) (expires \(ISO8601DateFormatter().string(from: expires)))."
                    )
                }
            }
        }
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "status",
            abstract: "Show the account's push session (needs no PIN; the token stays sealed)."
        )

        @OptionGroup var home: HomeOptions

        func run() async throws {
            try await runReportingErrors {
                try await CommandPath.with(home) { path in
                    let account = try await path.account(home).account
                    guard
                        case .notifySession(let session, let reason) = try await path.call(
                            .notifyStatus(account: account)
                        )
                    else { throw AppError.malformedMessage }
                    guard let session else {
                        if let reason {
                            print("No push session: \(reason)")
                        } else {
                            print("No push session; register one with `coffer notify register --server https://HOST`.")
                        }
                        return
                    }
                    print("Push session \(session.sessionID) with \(session.service) as \"\(session.deviceName)\"")
                    print("\texpires: \(ISO8601DateFormatter().string(from: session.expires))")
                    print(
                        "\tpins: \(session.pins.isEmpty ? "none (chain and host name only)" : session.pins.joined(separator: " "))"
                    )
                    print(
                        "\tpush key: \(session.hasPushKey ? "in the keychain (afterFirstUnlockThisDeviceOnly)" : "missing")"
                    )
                }
            }
        }
    }

    struct Unregister: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "unregister",
            abstract: "Revoke the push session on the service and delete its keys on this device.",
            discussion: """
                Needs the account unlocked (the token is sealed under the MainKey). When the service cannot be \
                reached the keys are deleted here anyway, and the command says so: the service keeps sealing pushes \
                to a key that no longer exists until the session expires or is revoked on its side.
                """
        )

        @OptionGroup var home: HomeOptions
        @OptionGroup var pinOptions: PINOptions

        func run() async throws {
            try await runReportingErrors {
                try await CommandPath.with(home) { path in
                    // No PIN is asked when there is nothing to unregister.
                    let account = try await path.account(home).account
                    guard case .notifySession(let session, _) = try await path.call(.notifyStatus(account: account)),
                        session != nil
                    else { throw NotifyClientError.notRegistered }
                    let status = try await path.unlock(home, pinFromStdin: pinOptions.pinStdin).status
                    guard
                        case .notifyUnregistered(let sessionID, let outcome) = try await path.call(
                            .notifyUnregister(account: status.account)
                        )
                    else { throw AppError.malformedMessage }
                    let said =
                        switch outcome {
                        case .revoked: "revoked on the service"
                        case .alreadyEnded: "the service had already ended it"
                        case .unreachable(let reason):
                            "the service could not be told (\(reason)) and ends it at its expiry"
                        }
                    print("Unregistered push session \(sessionID): \(said); its keys are deleted here.")
                }
            }
        }
    }
}
