/// An error that makes a single message, or a mailbox source, unreadable.
///
/// Descriptions are written for people and never contain message text, so they can be logged safely.
public enum MIMEError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The input contained no bytes at all.
    case emptyMessage
    /// The header section of the message or of one of its parts is larger than the configured limit.
    case headerSectionTooLarge(limit: Int)
    /// The message or one of its parts has more header fields than the configured limit.
    case tooManyHeaderFields(limit: Int)
    /// The message is larger than the configured per-message limit (used by the mailbox readers).
    case messageTooLarge(limit: Int)
    /// A file or folder could not be opened or read. `reason` is the system's error description.
    case unreadable(path: String, reason: String)
    /// The path is neither a single message file, an mbox file nor a Maildir folder.
    case unrecognizedFormat(path: String)

    /// A human-readable explanation of the error.
    public var description: String {
        switch self {
        case .emptyMessage:
            return "The message is empty."
        case .headerSectionTooLarge(let limit):
            return "The message headers are larger than the limit of \(limit) bytes."
        case .tooManyHeaderFields(let limit):
            return "The message has more than \(limit) header fields."
        case .messageTooLarge(let limit):
            return "The message is larger than the limit of \(limit) bytes and was skipped."
        case .unreadable(let path, let reason):
            return "Could not read \(path): \(reason)."
        case .unrecognizedFormat(let path):
            return "\(path) is not a message file, an mbox file or a Maildir folder."
        }
    }
}

/// A problem found while parsing that did not prevent a best-effort result.
public enum MIMEDefect: Sendable, Hashable, CustomStringConvertible {
    /// A multipart entity declares no boundary parameter; its body was kept as a single leaf.
    case missingBoundaryParameter
    /// No delimiter line for the declared boundary was found; the body was kept as a single leaf.
    case boundaryNotFound
    /// The closing delimiter of a multipart entity is missing; its last part runs to the end of the input.
    case closeBoundaryNotFound
    /// Multipart or message nesting exceeded the depth limit; deeper content was kept undivided.
    case nestingTooDeep(limit: Int)
    /// The number of parts exceeded the limit; further parts were not split out.
    case tooManyParts(limit: Int)
    /// A header line appeared where the body was expected, or the blank separator line is missing.
    case missingHeaderBodySeparator
    /// A header field line has no name before the colon and was ignored.
    case invalidHeaderLine

    /// A human-readable explanation of the defect.
    public var description: String {
        switch self {
        case .missingBoundaryParameter:
            return "A multipart section has no boundary parameter."
        case .boundaryNotFound:
            return "A multipart section's boundary never appears in its body."
        case .closeBoundaryNotFound:
            return "A multipart section is not closed."
        case .nestingTooDeep(let limit):
            return "Parts are nested more than \(limit) levels deep."
        case .tooManyParts(let limit):
            return "The message has more than \(limit) parts."
        case .missingHeaderBodySeparator:
            return "The blank line between headers and body is missing."
        case .invalidHeaderLine:
            return "A header line has no field name."
        }
    }
}
