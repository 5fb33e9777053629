import ArgumentParser
import CofferAgentProtocol
import CofferStore

#if canImport(Glibc)
import Glibc
#endif

extension CommandPath {
    /// The chosen account for a command that needs its key, and returns its name: one-shot, it is unlocked here
    /// first; an agent is asked as it is, and answers `locked` while it does not hold the key (`coffer unlock`
    /// gives it the key; a mail command never unlocks the agent on the side).
    func mailAccount(_ home: HomeOptions, _ pin: PINOptions) async throws -> String {
        if isAgent { return try await account(home).account }
        return try await unlock(home, pinFromStdin: pin.pinStdin).status.account
    }
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
            try await CommandPath.with(home) { path in
                let account = try await path.mailAccount(home, pinOptions)
                let line = ProgressLine(descriptor: 1)
                let request = AgentRequest.import(
                    account: account,
                    path: CommandPath.absolute(self.path),
                    label: label,
                    batch: batch
                )
                let reply = try await path.call(request) { event in
                    guard case .progress(let progress) = event else { return }
                    if line.isActive {
                        line.show("\(progress.total) messages, \(Int(progress.rate.rounded()))/s")
                    } else {
                        print("progress: \(progress.total) messages")
                    }
                }
                line.finish()
                guard case .imported(let result) = reply else { throw AppError.malformedMessage }
                print(
                    "Imported \(result.imported) messages (\(result.duplicates) already stored, \(result.malformed) "
                        + "unreadable) in \(String(format: "%.1f", result.elapsedSeconds)) s."
                )
            }
        }
    }
}
