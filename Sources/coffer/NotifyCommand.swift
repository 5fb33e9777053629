import ArgumentParser
import CofferApp
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
                // Registration needs the IMAP password, which only an unlocked store gives: it runs in this process.
                try await CommandPath.local(home) { local in
                    try await local.unlock(home, pinOptions)
                    let user = local.user
                    let store = PushSessionStore(keychain: try user.keychain, account: local.name)
                    if try store.loadSession() != nil { throw NotifyClientError.alreadyRegistered }
                    let imap = try await AccountCoordinator.serverAccount(id, in: try user.mailStore).server
                    let name =
                        deviceName
                        ?? (ProcessInfo.processInfo.hostName.isEmpty ? "coffer" : ProcessInfo.processInfo.hostName)
                    let keys = WebPush.UserAgentKeys()
                    let client = NotifyClient(server: target)
                    let token = try await client.register(
                        user: imap.username,
                        password: imap.password,
                        deviceName: String(name.prefix(100)),
                        keys: keys
                    )
                    do {
                        let tokenKey = try await user.keymaker.mainKey(for: .userRequest).subkey(
                            PushSessionStore.tokenSubkey
                        )
                        try store.saveKeys(keys)
                        try store.saveSession(
                            server: target,
                            sessionID: token.sessionID,
                            expires: token.expires,
                            deviceName: String(name.prefix(100)),
                            token: token.token,
                            key: tokenKey
                        )
                    } catch {
                        // Nothing half-registered stays: the service forgets the session, the device its keys.
                        try? await client.revoke(sessionID: token.sessionID, token: token.token)
                        try? store.delete()
                        throw error
                    }
                    print(
                        "Registered push session \(token.sessionID) with \(target.url) for \(imap.username) (expires \(ISO8601DateFormatter().string(from: token.expires)))."
                    )
                }
            }
        }
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show the account's push session (needs no PIN; the token stays sealed)."
        )

        @OptionGroup var home: HomeOptions

        func run() async throws {
            try await runReportingErrors {
                try await CommandPath.local(home) { local in
                    let store = PushSessionStore(keychain: try local.user.keychain, account: local.name)
                    guard let record = try store.loadSession() else {
                        if let reason = store.endedReason() {
                            print("No push session: \(reason)")
                        } else {
                            print("No push session; register one with `coffer notify register --server https://HOST`.")
                        }
                        return
                    }
                    let hasKey = (try? store.loadKeys()) != nil
                    print("Push session \(record.sessionID) with \(record.server.url) as \"\(record.deviceName)\"")
                    print("\texpires: \(ISO8601DateFormatter().string(from: record.expires))")
                    print(
                        "\tpins: \(record.server.pins.isEmpty ? "none (chain and host name only)" : record.server.pins.joined(separator: " "))"
                    )
                    print("\tpush key: \(hasKey ? "in the keychain (afterFirstUnlockThisDeviceOnly)" : "missing")")
                }
            }
        }
    }

    struct Unregister: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
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
                try await CommandPath.local(home) { local in
                    let store = PushSessionStore(keychain: try local.user.keychain, account: local.name)
                    guard let record = try store.loadSession() else { throw NotifyClientError.notRegistered }
                    let token = try await local.pushToken(of: record, in: store, home, pinOptions)
                    let outcome: String
                    do throws(NotifyClientError) {
                        try await NotifyClient(server: record.server).revoke(sessionID: record.sessionID, token: token)
                        outcome = "revoked on the service"
                    } catch .sessionRevoked {
                        outcome = "the service had already ended it"
                    } catch {
                        outcome = "the service could not be told (\(error.description)) and ends it at its expiry"
                    }
                    try store.delete()
                    print("Unregistered push session \(record.sessionID): \(outcome); its keys are deleted here.")
                }
            }
        }
    }
}
