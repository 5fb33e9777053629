/// A field of an outgoing message, named in a `ComposeError` so a person can find what to fix.
///
/// Indexes count from 1, as a person would.
public enum ComposeField: Sendable, Hashable, CustomStringConvertible {
    /// The From mailbox.
    case from
    /// A To mailbox, by position.
    case to(Int)
    /// A Cc mailbox, by position.
    case cc(Int)
    /// A Bcc mailbox, by position.
    case bcc(Int)
    /// A Reply-To mailbox, by position.
    case replyTo(Int)
    /// The subject.
    case subject
    /// The message's own Message-ID.
    case messageID
    /// A message ID of In-Reply-To, by position.
    case inReplyTo(Int)
    /// A message ID of References, by position.
    case references(Int)
    /// An extra header field, by its position in `OutgoingMessage.extraHeaders`.
    case extraHeader(Int)
    /// An attachment's file name, by its position in `OutgoingMessage.attachments`.
    case attachmentFilename(Int)
    /// An attachment's content type, by its position in `OutgoingMessage.attachments`.
    case attachmentType(Int)

    /// The field as a person would name it, such as "To address 2".
    public var description: String {
        switch self {
        case .from: return "the From address"
        case .to(let index): return "To address \(index)"
        case .cc(let index): return "Cc address \(index)"
        case .bcc(let index): return "Bcc address \(index)"
        case .replyTo(let index): return "Reply-To address \(index)"
        case .subject: return "the subject"
        case .messageID: return "the Message-ID"
        case .inReplyTo(let index): return "In-Reply-To message ID \(index)"
        case .references(let index): return "References message ID \(index)"
        case .extraHeader(let index): return "extra header field \(index)"
        case .attachmentFilename(let index): return "the file name of attachment \(index)"
        case .attachmentType(let index): return "the content type of attachment \(index)"
        }
    }
}

/// Why a message cannot be written, or a `mailto:` link cannot be used.
///
/// Descriptions are written for people. They name the field or link parameter at fault but never contain an
/// address, a subject, body text or a file name, so they can be logged safely.
public enum ComposeError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The field contains a line break or another control character (CR, LF, NUL, other C0 controls except tab,
    /// DEL, C1 controls, U+2028, U+2029): written as is it could add header fields.
    case forbiddenCharacter(ComposeField)
    /// The address is not `local@domain` in a form this writer can send.
    case invalidAddress(ComposeField)
    /// The address's domain has non-ASCII characters; internationalised domain names are not supported.
    case nonASCIIDomain(ComposeField)
    /// The address's local part has non-ASCII characters, which needs SMTPUTF8 (not supported).
    case nonASCIILocalPart(ComposeField)
    /// A message ID is empty, not ASCII, or contains spaces or angle brackets.
    case invalidMessageID(ComposeField)
    /// An extra header field's name is empty, too long, or has characters a field name cannot have.
    case invalidHeaderName(ComposeField)
    /// An extra header field names a field the writer writes itself (`name` is that field's usual spelling).
    case reservedHeader(ComposeField, name: String)
    /// An attachment's content type is not `type/subtype` made of MIME tokens (127 characters at most).
    case invalidContentType(ComposeField)
    /// An attachment's content type is `multipart/*` or `message/*`, which cannot be sent as a base64 file.
    case unsupportedAttachmentType(ComposeField)
    /// Reading an attachment's bytes failed. `reason` is the reader's error description.
    case attachmentUnreadable(index: Int, reason: String)
    /// An attached message (`message/rfc822`) is not in the form RFC 2046 5.2.1 lets it travel in without an encoding:
    /// lines of at most 998 octets, each ending in CRLF, and no NUL.
    case enclosedMessageNotSendable(index: Int, reason: String)
    /// The text is not a `mailto:` URI.
    case notMailto
    /// The `mailto:` link is longer than the limit.
    case mailtoTooLong(limit: Int)
    /// The `mailto:` link has a fragment (`#...`), which RFC 6068 does not allow.
    case mailtoFragment
    /// A `mailto:` parameter would attach a local file (`attach`, `attachment`, ...): refused, since a link must
    /// never make Coffer send a file the person did not choose.
    case mailtoFileParameter(String)
    /// A `mailto:` parameter other than to, cc, bcc, subject, body and in-reply-to.
    case mailtoUnknownParameter(String)
    /// A `mailto:` parameter appears more than once.
    case mailtoDuplicateParameter(String)
    /// A `mailto:` part has a `%` not followed by two hexadecimal digits (`parameter` is `to` for the addresses
    /// before `?`).
    case mailtoBadPercentEncoding(parameter: String)
    /// A `mailto:` part decodes to bytes that are not UTF-8.
    case mailtoInvalidUTF8(parameter: String)
    /// A `mailto:` part has a line break where none may be (any header field), or another control character.
    case mailtoForbiddenCharacter(parameter: String)
    /// A `mailto:` address is not one this writer could send to.
    case mailtoInvalidAddress(parameter: String)
    /// A `mailto:` link lists more addresses than the limit.
    case mailtoTooManyAddresses(limit: Int)
    /// The message cannot be signed or encrypted as PGP/MIME: its content holds an attached message that travels
    /// 8bit, which a server on the way may change (RFC 3156 section 3 wants 7-bit content).
    case notSevenBit
    /// The `Autocrypt` header's key is empty or larger than ``AutocryptHeader/maximumKeyDataSize``.
    case invalidAutocryptKey

    /// A human-readable explanation of the error.
    public var description: String {
        switch self {
        case .forbiddenCharacter(let field):
            return "\(field.capitalized) contains a line break or control character, which a header cannot hold."
        case .invalidAddress(let field):
            return "\(field.capitalized) is not a valid email address."
        case .nonASCIIDomain(let field):
            return "\(field.capitalized) has a non-ASCII domain; write the domain in its ASCII (xn--) form."
        case .nonASCIILocalPart(let field):
            return "\(field.capitalized) has non-ASCII characters before the @, which Coffer cannot send."
        case .invalidMessageID(let field):
            return "\(field.capitalized) is not a valid message ID."
        case .invalidHeaderName(let field):
            return "\(field.capitalized) does not have a valid field name."
        case .reservedHeader(let field, let name):
            return "\(field.capitalized) sets \(name), which Coffer writes itself."
        case .invalidContentType(let field):
            return "\(field.capitalized) is not a valid type/subtype."
        case .unsupportedAttachmentType(let field):
            return
                "\(field.capitalized) is a multipart type or a message type other than message/rfc822, which cannot be attached as a file."
        case .attachmentUnreadable(let index, let reason):
            return "Attachment \(index) could not be read: \(reason)"
        case .enclosedMessageNotSendable(let index, let reason):
            return "Attachment \(index) is a message that cannot be sent as one (\(reason)); forward it inline instead."
        case .notMailto:
            return "The link is not a mailto: link."
        case .mailtoTooLong(let limit):
            return "The mailto: link is longer than \(limit) bytes."
        case .mailtoFragment:
            return "The mailto: link has a fragment (#), which mailto: links cannot have."
        case .mailtoFileParameter(let name):
            return "The mailto: link asks to attach a local file (parameter \(Self.shown(name))); refused."
        case .mailtoUnknownParameter(let name):
            return
                "The mailto: link has an unsupported parameter \(Self.shown(name)) (only to, cc, bcc, subject, body and in-reply-to are accepted)."
        case .mailtoDuplicateParameter(let name):
            return "The mailto: link gives parameter \(Self.shown(name)) more than once."
        case .mailtoBadPercentEncoding(let parameter):
            return "The mailto: link's \(Self.shown(parameter)) has a % not followed by two hexadecimal digits."
        case .mailtoInvalidUTF8(let parameter):
            return "The mailto: link's \(Self.shown(parameter)) does not decode to UTF-8 text."
        case .mailtoForbiddenCharacter(let parameter):
            return "The mailto: link's \(Self.shown(parameter)) contains a line break or control character."
        case .mailtoInvalidAddress(let parameter):
            return "The mailto: link's \(Self.shown(parameter)) holds an address that is not valid."
        case .mailtoTooManyAddresses(let limit):
            return "The mailto: link lists more than \(limit) addresses."
        case .notSevenBit:
            return "The message holds an attached message with 8-bit text, which cannot be signed or encrypted "
                + "as PGP/MIME; forward it inline instead."
        case .invalidAutocryptKey:
            return "The Autocrypt header's key is empty or larger than 64 KiB, so it cannot be written."
        }
    }

    /// `text` (a name from a link, a field name, a program) quoted, with anything but printable ASCII escaped and
    /// the length capped at `limit` characters, so hostile text cannot write control sequences into a terminal or a
    /// log. The one quoting of the compose errors, ``ComposeError`` and CofferCompose's.
    package static func shown(_ text: String, limit: Int = 32) -> String {
        var result = "\""
        for (count, scalar) in text.unicodeScalars.enumerated() {
            if count == limit {
                result += "..."
                break
            }
            if scalar.value >= 0x20 && scalar.value < 0x7F && scalar != "\"" && scalar != "\\" {
                result.unicodeScalars.append(scalar)
            } else {
                result += "\\u{\(String(scalar.value, radix: 16))}"
            }
        }
        return result + "\""
    }
}

extension ComposeField {
    /// The description with its first letter in upper case, to open a sentence.
    fileprivate var capitalized: String {
        let text = description
        return text.prefix(1).uppercased() + text.dropFirst()
    }
}
