/// Every way the IMAP layer can fail: a malformed or oversized response, a refused command, a lost connection.
///
/// Descriptions are written for the person who set up the account. None carries a password, a message's text or
/// the bytes of a response: a parse error says what was expected and at which byte offset, nothing more.
public enum IMAPError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A response line (without its literals) is longer than the parser's limit.
    case lineTooLong(limit: Int)
    /// A literal announces more bytes than the parser's limit allows.
    case literalTooLarge(size: UInt64, limit: Int)
    /// One response (lines and buffered literals together) is larger than the parser's limit.
    case responseTooLarge(limit: Int)
    /// The bytes do not follow the IMAP grammar: `expected` names what was expected, `offset` where (in the response).
    case syntax(expected: String, offset: Int)
    /// Lists nest deeper than the parser's limit.
    case nestingTooDeep(limit: Int)
    /// A command argument cannot be sent (for example a line break in an atom, or a NUL byte).
    case unencodable(reason: String)
    /// The server answered a command with NO or BAD (`code` is its response code, `text` its words, shortened).
    case commandFailed(command: String, status: String, code: String?, text: String)
    /// The server lacks a capability the operation needs (for example STARTTLS, UIDPLUS, CONDSTORE).
    case missingCapability(String)
    /// The server closed the connection (or said BYE) before the command completed.
    case connectionClosed
    /// The server sent something the client did not expect at that point (for example no `+` before a literal).
    case unexpectedResponse(expected: String)
    /// The server sent bytes after its go-ahead to STARTTLS and before TLS began: a man in the middle injecting
    /// plaintext responses, or a broken server (CVE-2011-0411's kind). Nothing of it was read as a response.
    case plaintextAfterStartTLS
    /// The operation did not complete in time, or its task was cancelled.
    case cancelled
    /// The server sent nothing for this many seconds while an answer was awaited; the connection was dropped.
    case stalled(seconds: Int)
    /// The pinned TLS connection failed (the transport's own sentence).
    case transport(String)
    /// An APPEND was withdrawn by its caller after its literal and before its end: the connection was closed, so the
    /// server discarded the message.
    case appendWithdrawn

    /// A sentence for the person reading it.
    public var description: String {
        switch self {
        case .lineTooLong(let limit):
            "The IMAP server sent a response line longer than \(limit) bytes; the connection was dropped."
        case .literalTooLarge(let size, let limit):
            "The IMAP server announced a \(size)-byte literal, more than the limit of \(limit) bytes."
        case .responseTooLarge(let limit):
            "The IMAP server sent a response larger than \(limit) bytes; the connection was dropped."
        case .syntax(let expected, let offset):
            "The IMAP server sent a malformed response (expected \(expected) at byte \(offset))."
        case .nestingTooDeep(let limit):
            "The IMAP server sent lists nested deeper than \(limit) levels."
        case .unencodable(let reason):
            "An IMAP command could not be encoded: \(reason)."
        case .commandFailed(let command, let status, let code, let text):
            "The IMAP server refused \(command) with \(status)\(code.map { " [\($0)]" } ?? "") (it said: \(text))."
        case .missingCapability(let name):
            "The IMAP server does not offer \(name), which this operation requires; nothing was sent."
        case .connectionClosed:
            "The IMAP server closed the connection before the command completed."
        case .unexpectedResponse(let expected):
            "The IMAP server sent an unexpected response (expected \(expected))."
        case .plaintextAfterStartTLS:
            "The IMAP server sent data between agreeing to STARTTLS and starting TLS, which a man in the middle does; "
                + "the connection was dropped."
        case .cancelled:
            "The IMAP operation was cancelled or timed out."
        case .stalled(let seconds):
            "The IMAP server sent nothing for \(seconds) seconds while an answer was due; the connection was dropped."
        case .transport(let sentence):
            sentence
        case .appendWithdrawn:
            "The message was not appended: it was withdrawn before the command ended, and the connection was closed."
        }
    }

    /// Server words for an error: printable ASCII only, at most 160 characters (no control bytes, no echo).
    static func serverText(_ text: String) -> String {
        let printable = text.unicodeScalars.filter { $0.value >= 0x20 && $0.value < 0x7F }
        let cleaned = String(String.UnicodeScalarView(printable.prefix(160)))
        return cleaned.isEmpty ? "(no reason given)" : cleaned
    }
}
