import ArgumentParser
import CofferAgentProtocol
import CofferCommandLine
import CofferNotifyClient
import Foundation

/// `coffer fastsync on|off|status`: background sync while locked, with a key escrowed to the notification service.
struct FastSyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fastsync",
        abstract: "Let new-mail pushes sync the account in the background while it stays locked, for a limited time.",
        discussion: """
            `on` makes a random key-encryption key (KEK), wraps the MainKey with it in a record kept on this device \
            (account, session and expiry authenticated), seals the KEK to the service's per-user escrow key and \
            uploads it: the KEK is never written here. While it is unexpired the service puts it in this session's \
            new-mail pushes, and `coffer push-handler` (or the agent) unwraps the MainKey in memory, syncs the \
            folder and wipes both. Until the expiry, this device's files together with the service open the MainKey: \
            see THREAT-MODEL.md. Turning it on or renewing it asks for the PIN (or presence) every time.
            """,
        subcommands: [On.self, Off.self, Status.self]
    )

    /// `8h`, `90m`, `2d`, `30s` or plain seconds.
    static func seconds(_ text: String) -> TimeInterval? {
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
        if let last = text.last, let unit = units[last], let value = Double(text.dropLast()), value > 0 {
            return value * unit
        }
        return Double(text).flatMap { $0 > 0 ? $0 : nil }
    }

    struct On: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "on",
            abstract: "Turn FastSync on, or renew it (PIN required)."
        )

        @OptionGroup var home: HomeOptions
        @OptionGroup var pinOptions: PINOptions
        @Option(name: .customLong("for"), help: "How long: 30m, 8h, 2d... (default 8h, at most 7d).") var duration =
            "8h"

        func validate() throws {
            guard let seconds = FastSyncCommand.seconds(duration), seconds >= 1, seconds <= FastSync.maximumLifetime
            else { throw ValidationError("--for must be a duration from 1s to 7d, like 8h.") }
        }

        func run() async throws {
            try await runReportingErrors {
                // Always a fresh proof, even when the agent holds the key: renewal must ask the person.
                try await CommandPath.with(home) { path in
                    let status = try await path.account(home)
                    guard
                        case .notifySession(let session, _) = try await path.call(
                            .notifyStatus(account: status.account)
                        ),
                        session != nil
                    else { throw NotifyClientError.notRegistered }
                    let (method, pin) = try path.proof(
                        for: status,
                        pinFromStdin: pinOptions.pinStdin,
                        preference: nil
                    )
                    let seconds = Int(FastSyncCommand.seconds(duration) ?? 8 * 3600)
                    guard
                        case .fastSync(let expires?, _, _) = try await path.call(
                            .fastSyncOn(account: status.account, seconds: seconds, proof: method),
                            secret: pin
                        )
                    else { throw AppError.malformedMessage }
                    print("FastSync is on until \(ISO8601DateFormatter().string(from: expires)).")
                }
            }
        }
    }

    struct Off: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "off",
            abstract: "Turn FastSync off: the record is deleted here and the key on the service."
        )

        @OptionGroup var home: HomeOptions
        @OptionGroup var pinOptions: PINOptions

        func run() async throws {
            try await runReportingErrors {
                try await CommandPath.with(home) { path in
                    let account = try await path.account(home).account
                    // The record goes first: without it the escrowed key opens nothing.
                    guard
                        case .fastSync(_, let ended, let pending) = try await path.call(.fastSyncOff(account: account))
                    else { throw AppError.malformedMessage }
                    guard pending else {
                        print(ended ? "FastSync is off: the record is deleted here." : "FastSync is off.")
                        return
                    }
                    // The unlock opens the token and tells the service, as every unlock does while the note is there.
                    try await path.unlock(home, pinFromStdin: pinOptions.pinStdin)
                    guard
                        case .fastSync(_, _, let stillPending) = try await path.call(.fastSyncStatus(account: account))
                    else { throw AppError.malformedMessage }
                    print(
                        stillPending
                            ? "FastSync is off here; the service could not be reached, and the next unlock tells it."
                            : "FastSync is off: the record is deleted here and the key on the service."
                    )
                }
            }
        }
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "status",
            abstract: "Show whether FastSync is on and until when."
        )

        @OptionGroup var home: HomeOptions

        func run() async throws {
            try await runReportingErrors {
                try await CommandPath.with(home) { path in
                    let account = try await path.account(home).account
                    guard case .fastSync(let expires, _, _) = try await path.call(.fastSyncStatus(account: account))
                    else { throw AppError.malformedMessage }
                    guard let until = expires else {
                        print("FastSync is off.")
                        return
                    }
                    if until > Date() {
                        print("FastSync is on until \(ISO8601DateFormatter().string(from: until)).")
                    } else {
                        print(
                            "FastSync expired at \(ISO8601DateFormatter().string(from: until)); `coffer fastsync on` renews it."
                        )
                    }
                }
            }
        }
    }
}
