import CofferContent
import CofferMIME
import Foundation

/// Builds the draft of a reply or a forward from a received message.
///
/// Everything taken from the original is hostile: names, addresses, the subject and message IDs are made
/// header-safe (a line break or control character becomes a space; an address or message ID the MIME writer would
/// refuse is left out), so nothing in the original can add a header to the reply; the quoted text comes from the
/// text part, or from the sanitizer's text rendering of the HTML part (never markup, never a fetch), and is bounded.
/// docs/COMPOSE.md, "Replies and forwards".
public struct ReplyBuilder: Sendable {
    /// The account's own addresses, left out of a reply's recipients (compared with the domain's case ignored).
    public var ownAddresses: [String]
    /// The most bytes of the original's text quoted; the rest is replaced by a line saying it was shortened.
    public var maxQuotedBytes: Int
    /// The most bytes of an HTML-only original rendered as text (the markup beyond is not read).
    public var maxHTMLBytes: Int
    /// The most message IDs in References (the newest are kept, the original's own ID always among them).
    public var maxReferences: Int
    /// The time zone of the attribution line's date.
    public var timeZone: TimeZone

    /// Creates a builder.
    ///
    /// - Parameter ownAddresses: The account's addresses (its own, and any alias it receives mail for).
    public init(
        ownAddresses: [String],
        maxQuotedBytes: Int = 256 * 1024,
        maxHTMLBytes: Int = 2 << 20,
        maxReferences: Int = 20,
        timeZone: TimeZone = .current
    ) {
        self.ownAddresses = ownAddresses
        self.maxQuotedBytes = maxQuotedBytes
        self.maxHTMLBytes = maxHTMLBytes
        self.maxReferences = maxReferences
        self.timeZone = timeZone
    }

    /// The reply to `original`: To is its Reply-To, else its From (its To when the original is the account's own);
    /// with `all`, its To and Cc are added, the account's addresses left out and every address listed once. The
    /// subject has one `Re: `, In-Reply-To and References follow the thread, and the body quotes the original under
    /// an "On DATE, NAME wrote:" line.
    public func reply(to original: MIMEMessage, all: Bool = false) -> ComposeDraft {
        var to = clean(original.replyTo.isEmpty ? original.from : original.replyTo)
        if !to.isEmpty && to.allSatisfy(isOwn) { to = clean(original.to) }
        var cc: [MailAddress] = []
        if all {
            to += clean(original.to)
            cc = clean(original.cc)
        }
        var seen = Set<String>()
        func keep(_ address: MailAddress) -> Bool {
            !isOwn(address) && seen.insert(ComposeTemplate.normalized(address.address)).inserted
        }
        to = to.filter(keep)
        cc = cc.filter(keep)

        let id = original.messageID.flatMap(validMessageID)
        var references = original.references.compactMap(validMessageID)
        if references.isEmpty, original.inReplyTo.count == 1, let parent = validMessageID(original.inReplyTo[0]) {
            references = [parent]
        }
        if let id {
            references.removeAll { $0 == id }
            references.append(id)
        }
        let attribution = "On \(dateText(original.date)), \(author(original)) wrote:"
        return ComposeDraft(
            to: to,
            cc: cc,
            subject: prefixed("Re:", original.subject),
            body: "\n\n" + attribution + "\n" + quoted(originalText(original)),
            inReplyTo: id.map { [$0] } ?? [],
            references: Array(references.suffix(max(1, maxReferences)))
        )
    }

    /// The forward of `original` with its text inline, under a summary of its From, Date, Subject, To and Cc. The
    /// recipients are left for the person to fill in. The original's attachments are the caller's to attach again
    /// (they are not in a `MIMEMessage` built from the store's text).
    public func forward(_ original: MIMEMessage) -> ComposeDraft {
        var summary = ["---------- Forwarded message ----------"]
        summary.append("From: " + ComposeTemplate.formatted(clean(original.from)))
        summary.append("Date: " + dateText(original.date))
        summary.append("Subject: " + OutgoingMessage.headerSafe(original.subject ?? ""))
        let to = clean(original.to)
        if !to.isEmpty { summary.append("To: " + ComposeTemplate.formatted(to)) }
        let cc = clean(original.cc)
        if !cc.isEmpty { summary.append("Cc: " + ComposeTemplate.formatted(cc)) }
        let text = bounded(originalText(original))
        return ComposeDraft(
            subject: prefixed("Fwd:", original.subject),
            body: "\n\n" + summary.joined(separator: "\n") + "\n\n" + text.lines.joined(separator: "\n") + "\n"
                + (text.shortened ? Self.shortenedNotice + "\n" : "")
        )
    }

    /// The forward of `original` with the message attached whole, as `message/rfc822` (`bytes` as received, in CRLF
    /// form: see ``EnclosedMessageCheck``), and an empty body for the person's note. The file name is the subject,
    /// header-safe, without path separators or a leading dot, at most 80 characters, then `.eml`.
    public func forward(_ original: MIMEMessage, attaching bytes: [UInt8]) -> ComposeDraft {
        var name = OutgoingMessage.headerSafe(original.subject ?? "").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "\\", with: "_")
        name = String(name.trimmingSpaces().drop { $0 == "." }.prefix(80))
        return ComposeDraft(
            subject: prefixed("Fwd:", original.subject),
            body: "\n",
            forwardedOriginal: ForwardedOriginal(bytes: bytes, filename: (name.isEmpty ? "message" : name) + ".eml")
        )
    }

    // MARK: - Pieces

    static let shortenedNotice = "[The rest of the original message is not included.]"

    /// The original's text: its text part, else its HTML part rendered as text by the sanitizer, else nothing.
    func originalText(_ original: MIMEMessage) -> String {
        if let text = original.textBody { return text }
        guard let html = original.htmlBody else { return "" }
        let bounded =
            html.utf8.count <= maxHTMLBytes ? html : String(decoding: html.utf8.prefix(maxHTMLBytes), as: UTF8.self)
        return MailSanitizer().text(html: bounded)
    }

    /// The text's lines, control characters but tab made spaces, cut where the lines, each with `prefix` more bytes
    /// and a line break, would pass `maxQuotedBytes`.
    func bounded(_ text: String, prefix: Int = 0) -> (lines: [String], shortened: Bool) {
        var lines: [String] = []
        var total = 0
        var all = textLines(text)
        while let last = all.last, last.trimmingSpaces().isEmpty { all.removeLast() }
        for line in all {
            total += line.utf8.count + prefix + 1
            if total > maxQuotedBytes { return (lines, true) }
            // A stray control character (an escape sequence for the terminal the editor runs in) becomes a space.
            lines.append(OutgoingMessage.headerSafe(line))
        }
        return (lines, false)
    }

    /// The text quoted line by line with `> ` (an empty line as `>`), bounded.
    func quoted(_ text: String) -> String {
        let (lines, shortened) = bounded(text, prefix: 2)
        var result = lines.map { $0.isEmpty ? ">" : "> " + $0 }.joined(separator: "\n")
        if shortened { result += "\n> " + Self.shortenedNotice }
        return result.isEmpty ? "" : result + "\n"
    }

    /// `prefix` and a space before the subject, with any such prefixes already there (`Re: Re:`, `RE :`) removed.
    func prefixed(_ prefix: String, _ subject: String?) -> String {
        var rest = Substring(OutgoingMessage.headerSafe(subject ?? "").trimmingSpaces())
        let bare = prefix.dropLast().lowercased()
        while true {
            let word = rest.prefix { $0 != ":" }
            guard word.count < rest.count, word.trimmingSpaces().lowercased() == bare else { break }
            rest = Substring(rest.dropFirst(word.count + 1).trimmingSpaces())
        }
        return rest.isEmpty ? prefix : prefix + " " + rest
    }

    /// The author's name, else address, header-safe.
    func author(_ original: MIMEMessage) -> String {
        guard let first = clean(original.from).first else { return "someone" }
        return first.name.flatMap { $0.trimmingSpaces().isEmpty ? nil : $0 } ?? first.address
    }

    func dateText(_ date: Date?) -> String {
        guard let date else { return "an unknown date" }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = timeZone
        formatter.dateFormat = "EEE, d MMM yyyy 'at' HH:mm"
        return formatter.string(from: date)
    }

    /// The addresses with header-safe names, without group names, and only those the MIME writer accepts.
    func clean(_ addresses: [MailAddress]) -> [MailAddress] {
        addresses.compactMap { address in
            let name = address.name.map { OutgoingMessage.headerSafe($0).trimmingSpaces() }
            let cleaned = MailAddress(name: name?.isEmpty == false ? name : nil, address: address.address)
            return ComposeTemplate.isSendable(cleaned) ? cleaned : nil
        }
    }

    func isOwn(_ address: MailAddress) -> Bool {
        ownAddresses.contains { ComposeTemplate.sameAddress($0, address.address) }
    }

    /// The ID when the writer would accept it: printable ASCII without spaces or angle brackets.
    func validMessageID(_ id: String) -> String? {
        guard !id.isEmpty, id.utf8.count <= 250,
            id.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F && $0 != "<" && $0 != ">" })
        else { return nil }
        return id
    }
}
