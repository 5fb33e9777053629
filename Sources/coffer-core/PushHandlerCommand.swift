import ArgumentParser
import CofferAgentProtocol
import CofferCommandLine
import CofferNotifyClient
import CofferPush
import CofferReading
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// `coffer push-handler`: the notification extension. One push in, one notification out, nothing kept.
struct PushHandlerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push-handler",
        abstract: "Open one encrypted push with the session's push key and show it; never asks for a PIN.",
        discussion: """
            Reads one push body from standard input (the raw 4096-byte RFC 8291 message, or its base64url as the \
            service's stream carries it), opens it with the push key kept in the keychain \
            (afterFirstUnlockThisDeviceOnly: no MainKey, no PIN), and shows it with `notify-send` when there is one \
            (and a desktop session), else as one line on standard output. It writes no file and logs no sender or \
            subject. A push sealed for another session, or changed on the way, is refused.
            """
    )

    @OptionGroup var home: HomeOptions
    @Flag(name: .long, help: "Print the line even when notify-send is there.") var stdout = false
    @Flag(name: .customLong("no-sync"), help: "Do not run a FastSync background sync even when a key came.")
    var noSync = false

    func run() async throws {
        try await runReportingErrors {
            let input = FileHandle.standardInput.readDataToEndOfFile()
            guard input.count <= 16 * 1024 else { throw CLIError("The push on standard input is larger than 16 KiB.") }
            // The agent's route when one runs, else this process's: the same request, the same dispatcher.
            try await CommandPath.with(home) { path in
                let account = try await path.account(home).account
                guard
                    case .pushOpened(let push, let fetched, let failure) = try await path.call(
                        .push(account: account, body: input, sync: !noSync)
                    )
                else { throw AppError.malformedMessage }
                var shown = false
                if !stdout { shown = await PushHandler.desktopNotification(push) }
                if !shown { print(push.line) }
                if let failure { throw CLIError(failure) }
                guard let fetched else { return }
                print("FastSync: \(fetched) new message\(fetched == 1 ? "" : "s") sealed in the store while locked.")
            }
        }
    }
}
