import ArgumentParser
import CofferAgentProtocol
import CofferCommandLine
import CofferNotifyClient
import CofferPush
import CofferStore
import CofferSync

#if canImport(Glibc)
import Glibc
#endif

/// `coffer sync`: brings an IMAP account's folders into the sealed store.
struct SyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Fetch new mail from the IMAP account into the sealed store, and keep flags and deletions in step.",
        discussion: """
            Without --folder: INBOX and every subscribed folder. Only messages above the highest UID already \
            stored are fetched (with QRESYNC, what changed and what was expunged comes with the SELECT); a folder \
            whose UIDVALIDITY changed is fetched again; messages the server expunged are deleted here; \\Seen, \\Answered, \\Flagged and \\Draft \
            go both ways (the server's change wins for a flag both changed). An interrupted sync keeps what it \
            stored; the next one continues. On a terminal a progress bar is drawn on standard error.
            """
    )

    @OptionGroup var home: HomeOptions
    @OptionGroup var pinOptions: PINOptions
    @Option(name: .long, help: "A folder to sync (repeatable; default INBOX and every subscribed folder).")
    var folder: [String] = []
    @Option(name: .long, help: "The mail server account (from `coffer account show`; default the only one).")
    var id: Int64?
    @Option(name: .long, help: "Messages per fetch and per store transaction.") var batch = Syncer.defaultBatchSize
    @Flag(name: .long, help: "Keep running: wait for changes with IDLE on the first folder and sync again.")
    var watch = false

    func validate() throws {
        guard batch > 0 else { throw ValidationError("--batch must be positive.") }
    }

    func run() async throws {
        try await runReportingErrors {
            try await CommandPath.with(home) { path in
                let account = try await path.mailAccount(home, pinOptions)
                let line = ProgressLine()
                let show: @Sendable (AgentEvent) -> Void = { event in
                    guard case .syncProgress(let progress) = event, progress.total > 0 else { return }
                    line.show(ProgressLine.bar(progress.folder, done: progress.done, total: progress.total))
                }
                var request = AgentRequest.sync(account: account, server: id, folders: folder, batch: batch)
                repeat {
                    let reply: AgentReply
                    do {
                        reply = try await path.call(request, progress: show)
                        line.finish()
                    } catch {
                        // The error goes on a line of its own, not glued to the progress bar.
                        line.finish()
                        throw error
                    }
                    guard case .synced(let summary) = reply else { throw AppError.malformedMessage }
                    print(Self.line(summary))
                    // A folder the server named is shown without its control characters: it is the server's text.
                    for failure in summary.failures {
                        Terminal.printError(
                            "The folder \(PushMessage.clean(failure.folder)) was not synced: \(failure.reason)"
                        )
                    }
                    fflush(nil)
                    // Without --watch, a folder that failed makes the command fail, after the others were synced.
                    if !watch, !summary.failures.isEmpty { throw ExitCode(1) }
                    // Watching: the agent (or this process) waits with IDLE on the first folder, then syncs again as
                    // background work, which never holds the autolock open. A sync is crash-safe, so ending the
                    // watch with Ctrl-C (or a kill) at any point loses nothing.
                    request = .watch(account: account, server: id, folders: folder, batch: batch, seconds: 25 * 60)
                } while watch
            }
        }
    }

    /// The one-line summary.
    static func line(_ summary: SyncSummary) -> String {
        "Synced \(summary.folders) folder\(summary.folders == 1 ? "" : "s"): \(summary.fetched) new, "
            + "\(summary.deleted) deleted, \(summary.flagsPulled + summary.flagsPushed) flags changed"
            + (summary.resynced > 0 ? ", \(summary.resynced) folder(s) fetched again (UIDVALIDITY changed)" : "")
            + (summary.damaged > 0
                ? ", \(summary.damaged) damaged message\(summary.damaged == 1 ? "" : "s") kept as they came" : "")
            + (summary.forgotten > 0
                ? ", \(summary.forgotten) folder\(summary.forgotten == 1 ? "" : "s") gone from the server forgotten"
                : "")
            + (summary.failures.isEmpty ? "" : ", \(summary.failures.count) folder(s) not synced")
            + "."
    }
}
