import ArgumentParser
import CofferApp
import CofferNotifyClient
import CofferPush
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
            guard input.count <= 64 * 1024 else { throw CLIError("The push on standard input is larger than 64 KiB.") }
            try await CommandPath.local(home) { local in
                let account = local.name
                let keychain = try local.user.keychain
                let sessions = PushSessionStore(keychain: keychain, account: account)
                let push = try PushHandler.open(
                    PushHandler.body(fromInput: Array(input)),
                    keys: try sessions.loadKeys()
                )
                if stdout || !PushHandler.showDesktopNotification(push) { print(push.line) }
                guard !noSync, push.fastSync != nil,
                    let session = try sessions.loadSession(),
                    let secret = try FastSync.mainKey(
                        for: push,
                        keychain: keychain,
                        account: account,
                        sessionID: session.sessionID
                    )
                else { return }
                // The agent's route: the account's coordinator, with the key granted to this one background job.
                let summary = try await local.user.coordinator.run(
                    .sync(server: nil, folders: [push.folder ?? "INBOX"], batch: nil),
                    key: .granted(secret)
                )
                print(
                    "FastSync: \(summary.fetched) new message\(summary.fetched == 1 ? "" : "s") sealed in the store while locked."
                )
            }
        }
    }
}
