import CofferMIME
import Foundation

/// The text the editor shows while a message is written, as `git commit` does: header lines, a blank line, then
/// the plain-text body.
///
/// ```text
/// # Lines starting with # above the blank line are ignored.
/// From: Alice <alice@example.com>
/// To: Bob <bob@example.org>, carol@example.org
/// Cc:
/// Bcc:
/// Subject: Re: Lunch
/// Attach: /home/alice/menu.pdf
///
/// Hi Bob, ...
/// ```
///
/// The header section ends at the first blank line (or a line of spaces); everything after it is the body, byte for
/// byte, so no body line (`Bcc: x`, a `#` line) can become a header or be dropped. In the header section, lines
/// starting with `#` are comments; `From` is shown for reference and may be left or deleted but not changed;
/// `To`, `Cc` and `Bcc` hold comma-separated addresses and may be repeated or continued on lines that start with a
/// space; `Subject` appears once; `Attach` holds one path, and may be repeated or continued (one path per line).
/// Field names are matched without regard to case. docs/COMPOSE.md, "The editor's template".
public enum ComposeTemplate {
    /// The largest text ``parse(_:from:basedOn:)`` accepts (the body is a person's writing and its quote).
    public static let maxLength = 4 << 20

    /// The comment lines shown by default at the top of the template.
    public static let defaultInstructions = [
        "Write the message below the blank line. Lines starting with # above it are ignored.",
        "To, Cc and Bcc take addresses separated by commas; Attach takes one file path per line.",
        "From is the account's address. To abandon the message, quit without saving or empty the file.",
    ]

    /// The fields of the header section, as written.
    static let fields = ["From", "To", "Cc", "Bcc", "Subject", "Attach"]

    /// The editor's text for `draft`.
    ///
    /// Header values taken from elsewhere (a received message's subject or names) are made header-safe first (line
    /// breaks and control characters become spaces), so the rendered text always parses back to the same fields.
    ///
    /// - Parameters:
    ///   - draft: The message so far.
    ///   - from: The account's address, shown on the From line.
    ///   - instructions: Comment lines for the top (each gets a `# ` prefix; line breaks in them become spaces).
    public static func render(
        _ draft: ComposeDraft,
        from: MailAddress,
        instructions: [String] = defaultInstructions
    ) -> String {
        var lines = instructions.map { "# " + OutgoingMessage.headerSafe($0) }
        if draft.forwardedOriginal != nil {
            lines.append("# The original message is attached whole (message/rfc822).")
        }
        lines.append("From: " + formatted([from]))
        lines.append("To: " + formatted(draft.to))
        lines.append("Cc: " + formatted(draft.cc))
        lines.append("Bcc: " + formatted(draft.bcc))
        lines.append("Subject: " + OutgoingMessage.headerSafe(draft.subject))
        if draft.attachmentPaths.isEmpty {
            lines.append("Attach: ")
        } else {
            for path in draft.attachmentPaths { lines.append("Attach: " + OutgoingMessage.headerSafe(path)) }
        }
        return lines.joined(separator: "\n") + "\n\n" + draft.body
    }

    /// Reads the editor's text back.
    ///
    /// Addresses are parsed with CofferMIME's address parser and checked as the MIME writer checks them, so a
    /// message that parses has only addresses the writer accepts. A draft may have no recipient; sending checks
    /// that with ``ComposeDraft/checkSendable(from:)``.
    ///
    /// - Parameters:
    ///   - text: What the editor left.
    ///   - from: The account's address: the From line, when kept, must still show it.
    ///   - draft: The draft the template was rendered from: its thread and forwarded original are kept.
    /// - Returns: The draft with the fields, attachment paths and body of `text`.
    /// - Throws: ``CompositionError`` naming the line and field at fault.
    public static func parse(
        _ text: String,
        from: MailAddress,
        basedOn draft: ComposeDraft = ComposeDraft()
    ) throws(CompositionError) -> ComposeDraft {
        guard text.utf8.count <= maxLength else { throw .tooLong(limit: maxLength) }
        var result = draft
        result.to = []
        result.cc = []
        result.bcc = []
        result.subject = ""
        result.attachmentPaths = []

        // Lines end at LF; a CR before it (a file saved with CRLF) belongs to the line break.
        let lines = textLines(text)
        var fieldsGiven: [Field] = []
        var bodyLines: ArraySlice<String> = []
        for (index, content) in lines.enumerated() {
            let lineNumber = index + 1
            if content.allSatisfy({ $0 == " " || $0 == "\t" }) {
                bodyLines = lines[(index + 1)...]
                break
            }
            if content.hasPrefix("#") { continue }
            if content.hasPrefix(" ") || content.hasPrefix("\t") {
                guard !fieldsGiven.isEmpty else { throw .missingBlankLine(line: lineNumber) }
                fieldsGiven[fieldsGiven.count - 1].values.append((content, lineNumber))
                continue
            }
            guard let colon = content.firstIndex(of: ":") else { throw .missingBlankLine(line: lineNumber) }
            let name = String(content[..<colon])
            guard !name.isEmpty, name.unicodeScalars.allSatisfy(isFieldNameCharacter) else {
                throw .missingBlankLine(line: lineNumber)
            }
            guard let known = fields.first(where: { $0.lowercased() == name.lowercased() }) else {
                throw .unknownField(line: lineNumber, name: name)
            }
            fieldsGiven.append(
                Field(name: known, values: [(String(content[content.index(after: colon)...]), lineNumber)])
            )
        }

        var seen = Set<String>()
        for field in fieldsGiven {
            let line = field.values[0].line
            for (value, valueLine) in field.values where containsForbidden(value) {
                throw .forbiddenCharacter(field: field.name, line: valueLine)
            }
            if field.name == "From" || field.name == "Subject" {
                guard seen.insert(field.name).inserted else { throw .repeatedField(field: field.name, line: line) }
            }
            // Continuation lines unfold with a space, as RFC 5322 unfolds a header.
            let unfolded = field.values.map { $0.text.trimmingSpaces() }.filter { !$0.isEmpty }.joined(separator: " ")
            switch field.name {
            case "From":
                let given = MailAddress.parseList(unfolded)
                guard unfolded.isEmpty || (given.count == 1 && sameAddress(given[0].address, from.address)) else {
                    throw .fromChanged(line: line)
                }
            case "To": result.to += try addresses(unfolded, field: "To", line: line)
            case "Cc": result.cc += try addresses(unfolded, field: "Cc", line: line)
            case "Bcc": result.bcc += try addresses(unfolded, field: "Bcc", line: line)
            case "Subject": result.subject = unfolded
            default:  // Attach: one path per line.
                for (value, _) in field.values {
                    let path = value.trimmingSpaces()
                    if !path.isEmpty { result.attachmentPaths.append(path) }
                }
            }
        }
        result.body = body(bodyLines)
        return result
    }

    /// A header line and its continuation lines, each with its line number.
    private struct Field {
        var name: String
        var values: [(text: String, line: Int)]
    }

    /// The body: the lines after the blank line, without trailing blank lines, each ended by a line break.
    private static func body(_ lines: ArraySlice<String>) -> String {
        var lines = lines
        while let last = lines.last, last.allSatisfy({ $0 == " " || $0 == "\t" }) { lines.removeLast() }
        return lines.isEmpty ? "" : lines.joined(separator: "\n") + "\n"
    }

    /// Parses one To, Cc or Bcc line into addresses the writer accepts.
    private static func addresses(_ value: String, field: String, line: Int) throws(CompositionError) -> [MailAddress] {
        guard !value.isEmpty else { return [] }
        // Every comma-separated entry must yield exactly one address; the parser's leniency (an entry with no
        // address, two addresses run together) is caught here or by the writer's check below.
        let parsed = MailAddress.parseList(value).map { MailAddress(name: $0.name, address: $0.address) }
        let entries = splitEntries(value)
        guard parsed.count == entries.count else {
            let text = entries.first { MailAddress.parseList($0).count != 1 } ?? value
            throw .invalidAddress(field: field, line: line, text: text)
        }
        for (index, address) in parsed.enumerated() {
            // The parser joins what it cannot split (`a@b c@d` reads as one address `a@bc@d`, which the writer
            // would send quoted): the address must be in the entry as typed, with one @ outside quotes.
            let entry = entries[index]
            let bare = address.address.hasPrefix("\"") || address.address.filter({ $0 == "@" }).count == 1
            var typed = entry == address.address || entry.hasPrefix(address.address + " (")
            if let angle = entry.range(of: "<\(address.address)>") {
                // Words after the angle address are dropped by the parser: refuse them rather than lose them.
                let after = entry[angle.upperBound...].trimmingSpaces()
                typed = after.isEmpty || after.hasPrefix("(")
            }
            guard bare, typed else { throw .invalidAddress(field: field, line: line, text: entry) }
            do {
                try check(address)
            } catch {
                if case .forbiddenCharacter = error { throw .forbiddenCharacter(field: field, line: line) }
                throw .invalidAddress(field: field, line: line, text: entries[index])
            }
        }
        return parsed
    }

    /// Checks `address` as the MIME writer checks a mailbox (through the writer itself, so the rules are one).
    static func check(_ address: MailAddress) throws(ComposeError) {
        _ = try MessageWriter(OutgoingMessage(from: address, date: .distantPast, messageID: "check@localhost"))
    }

    /// Whether the MIME writer accepts `address`.
    static func isSendable(_ address: MailAddress) -> Bool {
        do {
            try check(address)
            return true
        } catch {
            return false
        }
    }

    /// The comma-separated entries of an address list, commas inside quotes, comments and angle brackets kept.
    static func splitEntries(_ value: String) -> [String] {
        var entries: [String] = []
        var current = ""
        var quoted = false
        var escaped = false
        var depth = 0
        var angle = false
        for character in value {
            if escaped {
                escaped = false
            } else if character == "\\" && (quoted || depth > 0) {
                escaped = true
            } else if quoted {
                if character == "\"" { quoted = false }
            } else if character == "\"" {
                quoted = true
            } else if character == "(" {
                depth += 1
            } else if character == ")" && depth > 0 {
                depth -= 1
            } else if depth == 0 && character == "<" {
                angle = true
            } else if depth == 0 && character == ">" {
                angle = false
            } else if depth == 0 && !angle && character == "," {
                entries.append(current.trimmingSpaces())
                current = ""
                continue
            }
            current.append(character)
        }
        entries.append(current.trimmingSpaces())
        return entries.filter { !$0.isEmpty }
    }

    static func formatted(_ addresses: [MailAddress]) -> String {
        addresses.map { address in
            let spec = OutgoingMessage.headerSafe(address.address)
            // The address parser decodes `=?...?=` even inside quotes: break it up so the name reads back as shown.
            guard
                let name = address.name.map({
                    OutgoingMessage.headerSafe($0).replacingOccurrences(of: "=?", with: "= ?")
                }),
                !name.trimmingSpaces().isEmpty
            else {
                return spec
            }
            let escaped = name.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            let plain = name.unicodeScalars.allSatisfy { $0.properties.isAlphabetic || $0 == " " || $0 == "." }
            return (plain && !name.contains(".") ? name : "\"\(escaped)\"") + " <\(spec)>"
        }
        .joined(separator: ", ")
    }

    /// Whether `text` holds a character no header may hold (the writer's own rule, through `headerSafe`).
    static func containsForbidden(_ text: String) -> Bool {
        !text.unicodeScalars.elementsEqual(OutgoingMessage.headerSafe(text).unicodeScalars)
    }

    private static func isFieldNameCharacter(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value > 0x20 && scalar.value < 0x7F && scalar != ":"
    }

    /// Addresses compared as mail systems do: the local part exactly, the domain without regard to case.
    static func sameAddress(_ first: String, _ second: String) -> Bool {
        normalized(first) == normalized(second)
    }

    /// The address with its domain in lower case.
    static func normalized(_ address: String) -> String {
        guard let at = address.lastIndex(of: "@") else { return address }
        return address[..<at] + "@" + address[address.index(after: at)...].lowercased()
    }
}

/// The lines of `text`: split at each LF (not at a lone CR, which stays in its line), with the CR of a CRLF dropped.
/// Splits on Unicode scalars: as Characters, CR LF is one and would not match LF.
func textLines(_ text: some StringProtocol) -> [String] {
    var lines: [String] = []
    var current = String.UnicodeScalarView()
    for scalar in text.unicodeScalars {
        if scalar == "\n" {
            if current.last == "\r" { current.removeLast() }
            lines.append(String(current))
            current = String.UnicodeScalarView()
        } else {
            current.append(scalar)
        }
    }
    if current.last == "\r" { current.removeLast() }
    if !current.isEmpty { lines.append(String(current)) }
    return lines
}

extension StringProtocol {
    /// The text without leading and trailing spaces and tabs.
    func trimmingSpaces() -> String {
        let scalars = unicodeScalars
        guard let start = scalars.firstIndex(where: { $0 != " " && $0 != "\t" }) else { return "" }
        let end = scalars.lastIndex(where: { $0 != " " && $0 != "\t" })!
        return String(String.UnicodeScalarView(scalars[start...end]))
    }
}
