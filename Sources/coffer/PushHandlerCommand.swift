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
            let device = try home.resolve().open()
            let account = try device.chooseAccount(home.account)
            let keys = try PushSessionStore(keychain: device.keychain, account: account).loadKeys()
            let push = try PushHandler.open(PushHandler.body(fromInput: Array(input)), keys: keys)
            if stdout || !PushHandler.showDesktopNotification(push) { print(push.line) }
            guard !noSync, let key = push.fastSync else { return }
            try await Self.fastSync(push, key: key, device: device, account: account)
        }
    }

    /// The FastSync path: the record's expiry by the wall clock, then the MainKey in memory, one folder synced, the
    /// store closed and the key wiped. The account stays locked; a refusal is reported, never a crash.
    static func fastSync(
        _ push: PushMessage,
        key: PushMessage.FastSyncKey,
        device: Device,
        account: String
    ) async throws {
        guard let record = try FastSync.load(keychain: device.keychain, account: account),
            let session = try PushSessionStore(keychain: device.keychain, account: account).loadSession()
        else { return }
        let mainKey = try FastSync.unwrap(
            record: record,
            kek: key.kek,
            kekExpires: key.expires,
            sessionID: session.sessionID
        )
        let summary = try await BackgroundSync.run(
            mainKey: mainKey,
            account: account,
            device: device.identity,
            storeFolder: device.home.appPaths.store(account),
            folder: push.folder ?? "INBOX"
        )
        print(
            "FastSync: \(summary.fetched) new message\(summary.fetched == 1 ? "" : "s") sealed in the store while locked."
        )
    }
}
