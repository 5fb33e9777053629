import CofferTransport

/// What the outbox does with a failed send.
public enum SMTPFailureClass: String, Sendable, Equatable {
    /// Try again later, with backoff: a 4xx reply, a network fault, a timeout, a server that went away.
    case transient
    /// Do not retry: a 5xx reply (keep the server's reason for the person), or a message or address the server can
    /// never take.
    case permanent
    /// Never retry silently: the server's certificate, pins or the STARTTLS upgrade failed a check, which an
    /// attacker between us and the server causes as well as a misconfiguration. A person must look.
    case security
}

/// A reply the server sent, as far as it may be shown: its code, enhanced status code and words, sanitized.
public struct SMTPServerReply: Sendable, Equatable, CustomStringConvertible {
    /// The three-digit reply code (RFC 5321 4.2), such as 550.
    public var code: Int
    /// The enhanced status code (RFC 3463), such as `5.1.1`, when the server sent one.
    public var enhancedCode: String?
    /// The server's words: every line joined with a space, printable ASCII only, at most 300 characters.
    public var text: String

    /// Keeps what may be shown of `reply`.
    init(_ reply: SMTPReply) {
        code = reply.code
        enhancedCode = reply.enhancedCode
        text = Self.sanitized(reply.lines.joined(separator: " "))
    }

    /// Creates a reply (tests).
    public init(code: Int, enhancedCode: String? = nil, text: String) {
        self.code = code
        self.enhancedCode = enhancedCode
        self.text = Self.sanitized(text)
    }

    /// The reply as `550 5.1.1 words`.
    public var description: String {
        "\(code)\(enhancedCode.map { " \($0)" } ?? "") \(text)"
    }

    /// Transient for 4xx, permanent for everything else (5xx, or a reply that makes no sense at that point).
    var failureClass: SMTPFailureClass { code / 100 == 4 ? .transient : .permanent }

    /// Printable ASCII only (no control bytes, no escape sequences for a terminal), at most 300 characters.
    static func sanitized(_ text: String) -> String {
        let printable = text.unicodeScalars.filter { $0.value >= 0x20 && $0.value < 0x7F }
        let cleaned = String(String.UnicodeScalarView(printable.prefix(300)))
        return cleaned.isEmpty ? "(no reason given)" : cleaned
    }
}

/// One recipient the server refused at RCPT TO, with its reply.
public struct SMTPRecipientRefusal: Sendable, Equatable {
    /// The address as given to ``SMTPClient/send(from:to:declaredSize:body:)``.
    public var address: String
    /// The server's reply.
    public var reply: SMTPServerReply

    /// Creates a refusal.
    public init(address: String, reply: SMTPServerReply) {
        self.address = address
        self.reply = reply
    }
}

/// Every way a submission can fail. ``failureClass`` says what the outbox does with it.
///
/// Descriptions are written for the person who set up the account. None carries a password, an authentication
/// token or the message's text; the server's words are sanitized (printable ASCII, bounded) before they are kept.
public enum SMTPError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The pinned TLS connection could not be made or was refused (the transport's error: a pin, certificate or
    /// host name failure is ``SMTPFailureClass/security``; a refused or timed-out connection is transient).
    case transport(TransportError)
    /// The server sent bytes after its 220 reply to STARTTLS and before the TLS handshake completed: a man in the
    /// middle injecting replies (the "NO STARTTLS" class), or a broken server. None of them was read.
    case plaintextAfterStartTLS
    /// The endpoint asks for STARTTLS and the server does not offer it (an attacker can strip it from EHLO); there
    /// is no fallback to plaintext.
    case startTLSNotOffered
    /// The server refused STARTTLS.
    case startTLSRefused(SMTPServerReply)
    /// The server's greeting was not 220 (421 busy: transient; 554 no service: permanent).
    case greetingRefused(SMTPServerReply)
    /// The server refused a command (`command` is its verb: EHLO, MAIL, DATA, the end of DATA…).
    case commandRefused(command: String, reply: SMTPServerReply)
    /// The server refused the credentials (535), or authentication failed for another reason it gave.
    case authenticationFailed(SMTPServerReply)
    /// The server offers neither AUTH PLAIN nor AUTH LOGIN after TLS.
    case noUsableAuthentication(offered: [String])
    /// At least one recipient was refused at RCPT TO. The transaction was reset: the message went to nobody, so
    /// sending it again after the addresses are fixed delivers no duplicates.
    case recipientsRefused([SMTPRecipientRefusal])
    /// The message is larger than the server's advertised SIZE limit; nothing was sent.
    case messageTooLarge(size: Int, limit: Int)
    /// An address cannot be put in an SMTP command (a line break, a space, angle brackets, non-ASCII…).
    case invalidAddress(reason: String)
    /// A reply line is longer than the parser's limit.
    case replyLineTooLong(limit: Int)
    /// A reply has more lines than the parser's limit.
    case tooManyReplyLines(limit: Int)
    /// A reply does not follow RFC 5321's grammar (`reason` says how, never quoting the bytes).
    case malformedReply(reason: String)
    /// The server sent a reply the client did not expect at that point (for example a 354 to MAIL).
    case unexpectedReply(command: String, reply: SMTPServerReply)
    /// The connection ended before the exchange completed.
    case connectionClosed
    /// The connection failed under the exchange (a socket error, TLS cut without its closing message).
    case connectionFailed(reason: String)
    /// The connection ended (or timed out) after the message's final dot and before the server's reply: the
    /// server may have accepted the message, so a retry may deliver it twice.
    case replyLostAfterData
    /// Neither a byte arrived nor a byte could be written for this many seconds while the exchange was under way.
    case timedOut(seconds: Int)
    /// The message's bytes could not be read (the body sequence threw); the transaction was abandoned.
    case messageUnreadable(reason: String)
    /// The client is not in a state for the call (closed, or a send while another runs).
    case notReady(reason: String)
    /// The calling task was cancelled; the connection was closed.
    case cancelled

    /// What the outbox does with this failure.
    public var failureClass: SMTPFailureClass {
        switch self {
        case .transport(let error):
            switch error {
            case .connectFailed, .timedOut, .handshakeFailed, .httpFailed: .transient
            default: .security
            }
        case .plaintextAfterStartTLS, .startTLSNotOffered, .startTLSRefused: .security
        case .greetingRefused(let reply), .commandRefused(_, let reply), .authenticationFailed(let reply):
            reply.failureClass
        case .unexpectedReply: .transient
        case .recipientsRefused(let refusals):
            refusals.contains { $0.reply.failureClass == .permanent } ? .permanent : .transient
        case .noUsableAuthentication, .messageTooLarge, .invalidAddress: .permanent
        case .replyLineTooLong, .tooManyReplyLines, .malformedReply: .transient
        case .connectionClosed, .connectionFailed, .replyLostAfterData, .timedOut, .cancelled: .transient
        case .messageUnreadable: .transient
        case .notReady: .transient
        }
    }

    /// A sentence for the person reading it.
    public var description: String {
        switch self {
        case .transport(let error):
            error.description
        case .plaintextAfterStartTLS:
            "The SMTP server sent data between agreeing to STARTTLS and starting TLS, which a man in the middle does; "
                + "the connection was dropped before anything was sent."
        case .startTLSNotOffered:
            "The SMTP server does not offer STARTTLS (or something between removed it); nothing was sent."
        case .startTLSRefused(let reply):
            "The SMTP server refused STARTTLS (it said: \(reply)); nothing was sent."
        case .greetingRefused(let reply):
            "The SMTP server refused the connection (it said: \(reply))."
        case .commandRefused(let command, let reply):
            "The SMTP server refused \(command) (it said: \(reply))."
        case .authenticationFailed(let reply):
            "The SMTP server refused the user name or password (it said: \(reply))."
        case .noUsableAuthentication(let offered):
            "The SMTP server offers no password authentication Coffer uses (PLAIN or LOGIN) over TLS (it offers: "
                + "\(offered.isEmpty ? "none" : offered.joined(separator: ", ")))."
        case .recipientsRefused(let refusals):
            "The SMTP server refused \(refusals.count == 1 ? "a recipient" : "\(refusals.count) recipients") ("
                + refusals.map { "\($0.address): \($0.reply)" }.joined(separator: "; ")
                + "); the message was sent to nobody."
        case .messageTooLarge(let size, let limit):
            "The message (\(size) bytes) is larger than the SMTP server accepts (\(limit) bytes); nothing was sent."
        case .invalidAddress(let reason):
            "An address cannot be used for sending: \(reason)."
        case .replyLineTooLong(let limit):
            "The SMTP server sent a reply line longer than \(limit) bytes; the connection was dropped."
        case .tooManyReplyLines(let limit):
            "The SMTP server sent a reply of more than \(limit) lines; the connection was dropped."
        case .malformedReply(let reason):
            "The SMTP server sent a malformed reply (\(reason)); the connection was dropped."
        case .unexpectedReply(let command, let reply):
            "The SMTP server answered \(command) with an unexpected reply (\(reply))."
        case .connectionClosed:
            "The SMTP server closed the connection before the exchange completed."
        case .connectionFailed(let reason):
            "The connection to the SMTP server failed: \(reason)."
        case .replyLostAfterData:
            "The connection to the SMTP server ended after the whole message was sent and before the server "
                + "answered; the message may have been delivered."
        case .timedOut(let seconds):
            "The SMTP server neither answered nor took data for \(seconds) seconds; the connection was dropped."
        case .messageUnreadable(let reason):
            "The message could not be read for sending (\(reason)); nothing was delivered."
        case .notReady(let reason):
            "The SMTP connection cannot do this now: \(reason)."
        case .cancelled:
            "Sending was cancelled; the connection was closed."
        }
    }
}
