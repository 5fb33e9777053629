import CofferAgentProtocol

#if canImport(Glibc)
import Glibc
#endif

/// One line per message: id, date, flags, sender and subject.
public enum MessageLine {
    /// The line `list` and `search` print for `summary`: id, date, flags (N new, F flagged, @ attachments), sender
    /// and subject, tab-separated; a damaged message as `!` and "(damaged message)".
    public static func format(_ summary: MessageSummary) -> String {
        if summary.isCorrupt { return "\(summary.id)\t\(date(summary))\t!\t(damaged message)" }
        var flags = ""
        flags += summary.flags.contains(.seen) ? " " : "N"
        flags += summary.flags.contains(.flagged) ? "F" : " "
        flags += summary.flags.contains(.hasAttachments) ? "@" : " "
        let sender = summary.from.first.map { $0.name ?? $0.address } ?? "(no sender)"
        return "\(summary.id)\t\(date(summary))\t\(flags)\t\(sender)\t\(summary.subject ?? "(no subject)")"
    }

    /// `summary`'s time as `YYYY-MM-DD HH:MM` in UTC, or question marks for a time that cannot be shown.
    public static func date(_ summary: MessageSummary) -> String {
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
