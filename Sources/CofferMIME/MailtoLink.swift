/// A `mailto:` link (RFC 6068) reduced to what a link may fill in: recipients, subject, body and the message it
/// replies to.
///
/// Parsing is strict, since a link comes from whoever wrote the page or message it was in. Only `to`, `cc`, `bcc`,
/// `subject`, `body` and `in-reply-to` are accepted (names in any case, percent-encoded or not); `attach`,
/// `attachment` and every other parameter naming a file are refused, as is every unknown parameter and every
/// parameter given twice, so a link can never attach a local file (the "Mailto: Me Your Secrets" attacks) or hide
/// a second value behind the first. Percent escapes must be well formed and decode to UTF-8; header fields may not
/// hold line breaks or control characters; the body's line breaks (`%0D%0A`, `%0A` or `%0D`) become `\n`.
///
/// - Warning: A link may add Cc and Bcc recipients. Show every recipient to the person before sending.
public struct MailtoLink: Sendable, Hashable {
    /// The To addresses: those before `?` and those of `to=`.
    public var to: [MailAddress]
    /// The `cc=` addresses.
    public var cc: [MailAddress]
    /// The `bcc=` addresses.
    public var bcc: [MailAddress]
    /// The `subject=` text.
    public var subject: String?
    /// The `body=` text, with `\n` line breaks.
    public var body: String?
    /// The `in-reply-to=` message IDs, without angle brackets.
    public var inReplyTo: [String]

    /// The longest link accepted, in bytes.
    public static let maxLength = 256 * 1024
    /// The most addresses a link may list.
    public static let maxAddresses = 100

    /// The parameters a link may set.
    static let accepted: Set<String> = ["to", "cc", "bcc", "subject", "body", "in-reply-to"]

    /// Parses a `mailto:` link.
    ///
    /// - Throws: `ComposeError` naming the part of the link that is refused.
    public init(parsing link: String) throws(ComposeError) {
        guard link.utf8.count <= Self.maxLength else {
            throw .mailtoTooLong(limit: Self.maxLength)
        }
        let text = HeaderEncoding.trimmed(link)
        guard text.lowercased().hasPrefix("mailto:") else {
            throw .notMailto
        }
        let rest = text.dropFirst("mailto:".count)
        if rest.contains("#") {
            throw .mailtoFragment
        }
        let path: Substring
        let query: Substring?
        if let mark = rest.firstIndex(of: "?") {
            path = rest[..<mark]
            query = rest[rest.index(after: mark)...]
        } else {
            path = rest
            query = nil
        }
        to = try Self.addresses(try Self.decode(path, parameter: "to"), parameter: "to")
        cc = []
        bcc = []
        subject = nil
        body = nil
        inReplyTo = []
        var seen = Set<String>()
        for pair in (query ?? "").split(separator: "&", omittingEmptySubsequences: true) {
            let rawName: Substring
            let rawValue: Substring
            if let equals = pair.firstIndex(of: "=") {
                rawName = pair[..<equals]
                rawValue = pair[pair.index(after: equals)...]
            } else {
                rawName = pair
                rawValue = ""
            }
            let name = try Self.decode(rawName, parameter: String(rawName))
            let key = name.lowercased()
            if key.contains("attach") || key.contains("file") || key == "path" {
                throw .mailtoFileParameter(name)
            }
            guard Self.accepted.contains(key) else {
                throw .mailtoUnknownParameter(name)
            }
            guard seen.insert(key).inserted else {
                throw .mailtoDuplicateParameter(name)
            }
            let value = try Self.decode(rawValue, parameter: key)
            switch key {
            case "to":
                to += try Self.addresses(value, parameter: key)
            case "cc":
                cc = try Self.addresses(value, parameter: key)
            case "bcc":
                bcc = try Self.addresses(value, parameter: key)
            case "subject":
                try Self.checkHeader(value, parameter: key)
                subject = value
            case "body":
                body = try Self.bodyText(value)
            default:
                try Self.checkHeader(value, parameter: key)
                inReplyTo = try Self.messageIDs(value)
            }
        }
        if to.count + cc.count + bcc.count > Self.maxAddresses {
            throw .mailtoTooManyAddresses(limit: Self.maxAddresses)
        }
    }

    /// Adds the link's recipients to `message` and sets its subject, body and In-Reply-To where the link gives them.
    public func apply(to message: inout OutgoingMessage) {
        message.to += to
        message.cc += cc
        message.bcc += bcc
        if let subject {
            message.subject = subject
        }
        if let body {
            message.text = body
        }
        if !inReplyTo.isEmpty {
            message.inReplyTo = inReplyTo
        }
    }

    /// Percent-decodes one part of the link: every `%` starts an escape of two hexadecimal digits, `+` is a plus,
    /// raw control characters are refused, and the bytes must be UTF-8.
    static func decode(_ raw: Substring, parameter: String) throws(ComposeError) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(raw.utf8.count)
        let input = Array(raw.utf8)
        var index = 0
        while index < input.count {
            let byte = input[index]
            if byte < 0x20 || byte == 0x7F {
                throw .mailtoForbiddenCharacter(parameter: parameter)
            }
            if byte == UInt8(ascii: "%") {
                guard index + 2 < input.count, let high = TransferDecoding.hexValue(input[index + 1]),
                    let low = TransferDecoding.hexValue(input[index + 2])
                else {
                    throw .mailtoBadPercentEncoding(parameter: parameter)
                }
                bytes.append(high << 4 | low)
                index += 3
                continue
            }
            bytes.append(byte)
            index += 1
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw .mailtoInvalidUTF8(parameter: parameter)
        }
        return text
    }

    private static func checkHeader(_ value: String, parameter: String) throws(ComposeError) {
        if value.unicodeScalars.contains(where: HeaderEncoding.isForbidden) {
            throw .mailtoForbiddenCharacter(parameter: parameter)
        }
    }

    /// The addresses of a `to`, `cc` or `bcc` value, each one a writer would accept.
    private static func addresses(_ value: String, parameter: String) throws(ComposeError) -> [MailAddress] {
        try checkHeader(value, parameter: parameter)
        let list = MailAddress.parseList(value)
        if list.count > maxAddresses {
            throw .mailtoTooManyAddresses(limit: maxAddresses)
        }
        for address in list {
            do {
                _ = try HeaderEncoding.mailbox(address, field: .to(1))
            } catch {
                throw .mailtoInvalidAddress(parameter: parameter)
            }
        }
        if list.isEmpty && !HeaderEncoding.trimmed(value).isEmpty {
            throw .mailtoInvalidAddress(parameter: parameter)
        }
        return list.map { MailAddress(name: $0.name, address: $0.address) }
    }

    /// The body with every line break as `\n`; other control characters except tab are refused (the Unicode line
    /// and paragraph separators are text here).
    private static func bodyText(_ value: String) throws(ComposeError) -> String {
        var result = String.UnicodeScalarView()
        var previousCR = false
        for scalar in value.unicodeScalars {
            if scalar == "\n" {
                if !previousCR {
                    result.append("\n")
                }
                previousCR = false
                continue
            }
            previousCR = scalar == "\r"
            if previousCR {
                result.append("\n")
            } else if HeaderEncoding.isForbidden(scalar) && scalar != "\u{2028}" && scalar != "\u{2029}" {
                throw .mailtoForbiddenCharacter(parameter: "body")
            } else {
                result.append(scalar)
            }
        }
        return String(result)
    }

    private static func messageIDs(_ value: String) throws(ComposeError) -> [String] {
        var ids = MIMEMessage.messageIDs(value)
        if ids.isEmpty && !HeaderEncoding.trimmed(value).isEmpty {
            ids = [value]
        }
        var result: [String] = []
        for (index, id) in ids.enumerated() {
            result.append(try HeaderEncoding.messageID(id, field: .inReplyTo(index + 1)))
        }
        return result
    }
}
