import ArgumentParser
import CofferApp
import CofferAttachments
import CofferKeymaker
import CofferStore

#if canImport(Glibc)
import Glibc
#endif

/// The mail store and attachment cache of one account, opened by a one-shot command after it unlocked.
struct MailSession {
    let session: AccountSession
    /// The store itself (one-shot) or the agent's.
    let store: any MailReading
    /// The agent serving this session, when one runs.
    var agent: AgentClient?

    /// The account's store and cache folders (``AppPaths/store(_:)`` and ``AppPaths/cache(_:)``), after moving a
    /// folder an earlier version named after the raw account name.
    static func folders(_ session: AccountSession) -> (store: String, cache: String) {
        let paths = session.device.home.appPaths
        paths.migrateLegacyMail(session.account)
        return (paths.store(session.account), paths.cache(session.account))
    }

    /// Opens the account, unlocks it, opens the store, and purges expired attachments (the cache's unlock duty).
    static func open(_ home: HomeOptions, _ pin: PINOptions) async throws -> MailSession {
        let session = try AccountSession.open(home)
        if let agent = try AgentLink.connect(home) {
            return MailSession(session: session, store: AgentMail(agent: agent, account: session.account), agent: agent)
        }
        try await session.unlock(pinFromStdin: pin.pinStdin)
        let store = try MailStore(folder: folders(session).store, keymaker: session.keymaker)
        try cache(session).purgeExpired()
        return MailSession(session: session, store: store)
    }

    static func cache(_ session: AccountSession) throws -> AttachmentCache {
        try AttachmentCache(folder: folders(session).cache, keymaker: session.keymaker)
    }

    /// Checkpoints the store and drops the keys.
    func close() throws { try store.close() }
}

/// One line per message: id, date, flags, sender and subject.
enum MessageLine {
    static func format(_ summary: MessageSummary) -> String {
        if summary.isCorrupt { return "\(summary.id)\t\(date(summary))\t!\t(damaged message)" }
        var flags = ""
        flags += summary.flags.contains(.seen) ? " " : "N"
        flags += summary.flags.contains(.flagged) ? "F" : " "
        flags += summary.flags.contains(.hasAttachments) ? "@" : " "
        let sender = summary.from.first.map { $0.name ?? $0.address } ?? "(no sender)"
        return "\(summary.id)\t\(date(summary))\t\(flags)\t\(sender)\t\(summary.subject ?? "(no subject)")"
    }

    static func date(_ summary: MessageSummary) -> String {
        // Any stored time (a changed file can hold Int64.min or .max) formats without trapping.
        let unknown = "????-??-?? ??:??"
        let interval = summary.date.timeIntervalSince1970.rounded(.down)
        guard interval.isFinite, interval >= -0x1p63, interval < 0x1p63 else { return unknown }
        var seconds = time_t(interval)
        var parts = tm()
        guard gmtime_r(&seconds, &parts) != nil else { return unknown }
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(Int(parts.tm_year) + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday)) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min))"
    }
}

struct ImportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Import a .eml file, an mbox file or a Maildir folder into the sealed mail store.",
        discussion: """
            Messages are sealed in transactions of --batch messages; an interrupted import loses at most the batch in \
            flight, and running it again completes it (messages already stored are skipped).
            """
    )

    @OptionGroup var home: HomeOptions
    @OptionGroup var pinOptions: PINOptions
    @Argument(help: "The .eml file, mbox file or Maildir folder.") var path: String
    @Option(name: .long, help: "The label for the imported messages.") var label = "Inbox"
    @Option(name: .long, help: "Messages per transaction.") var batch = MailStore.defaultBatchSize

    func validate() throws {
        guard batch > 0 else { throw ValidationError("--batch must be positive.") }
    }

    func run() async throws {
        try await runReportingErrors {
            let mail = try await MailSession.open(home, pinOptions)
            let line = ProgressLine(descriptor: 1)
            let result = try await mail.store.importSource(at: path, label: label, batchSize: batch) { progress in
                if line.isActive {
                    line.show("\(progress.total) messages, \(Int(progress.rate.rounded()))/s")
                } else {
                    print("progress: \(progress.total) messages")
                }
            }
            line.finish()
            print(
                "Imported \(result.imported) messages (\(result.duplicates) already stored, \(result.malformed) "
                    + "unreadable) in \(String(format: "%.1f", result.elapsedSeconds)) s."
            )
            try mail.close()
        }
    }
}
