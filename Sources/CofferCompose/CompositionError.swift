import CofferMIME

/// Why a composed message cannot be read back from the editor's text, cannot be sent yet, or why the editor could
/// not run.
///
/// Descriptions are written for people and name the line and field at fault, never an address, the subject, body
/// text or a path, so they can be logged. The text a person typed on the faulty line is in ``offendingText``
/// (escaped and shortened) for a terminal that shows it back to them.
public enum CompositionError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A header line names a field the template does not have (`name` as typed, escaped and shortened).
    case unknownField(line: Int, name: String)
    /// A line of the header section is not `Field: value`: most likely the blank line between the headers and the
    /// body is missing.
    case missingBlankLine(line: Int)
    /// A header value holds a control character (a CR, NUL, escape, U+2028 ...), which no header may hold.
    case forbiddenCharacter(field: String, line: Int)
    /// An address in To, Cc or Bcc is not one the message could be sent to. `text` is the entry as typed.
    case invalidAddress(field: String, line: Int, text: String)
    /// The From line was changed; the sender is the account's address and is not chosen here.
    case fromChanged(line: Int)
    /// A field that may appear once (Subject, From) appears again.
    case repeatedField(field: String, line: Int)
    /// The message has no To, Cc or Bcc address, so it cannot be sent (a draft may have none).
    case noRecipients
    /// The editor's text is larger than the limit.
    case tooLong(limit: Int)
    /// The message cannot be written as MIME (the writer's own check, such as a name or subject it refuses).
    case unwritable(ComposeError)
    /// `$VISUAL`/`$EDITOR` is empty or uses shell syntax (`reason` says which) that Coffer does not run.
    case unusableEditorCommand(reason: String)
    /// The editor program was not found on `$PATH` or cannot be run.
    case editorNotFound(program: String)
    /// The editor exited with a failure status (or was killed by a signal); nothing was taken from the file.
    case editorFailed(status: Int32)
    /// The editor's private folder or file could not be made, checked or read (`reason` says why; it names paths,
    /// never the text).
    case privateFolder(reason: String)

    /// A human-readable explanation of the error.
    public var description: String {
        switch self {
        case .unknownField(let line, let name):
            return
                "Line \(line): \(Self.shown(name)) is not a field of the message (From, To, Cc, Bcc, Subject, Attach); leave a blank line between the fields and the body."
        case .missingBlankLine(let line):
            return "Line \(line) is not a 'Field: value' line; leave a blank line between the fields and the body."
        case .forbiddenCharacter(let field, let line):
            return "Line \(line) (\(field)) contains a control character, which a header cannot hold."
        case .invalidAddress(let field, let line, _):
            return "Line \(line) (\(field)) holds an address that is not valid."
        case .fromChanged(let line):
            return "Line \(line): From is the account's address and cannot be changed here."
        case .repeatedField(let field, let line):
            return "Line \(line): \(field) is given more than once."
        case .noRecipients:
            return "The message has no To, Cc or Bcc address."
        case .tooLong(let limit):
            return "The message is longer than \(limit) bytes."
        case .unwritable(let error):
            return error.description
        case .unusableEditorCommand(let reason):
            return "The editor command cannot be run: \(reason)."
        case .editorNotFound(let program):
            return "The editor \(Self.shown(program)) was not found or cannot be run; set $VISUAL or $EDITOR."
        case .editorFailed(let status):
            return "The editor exited with status \(status); the message was not taken from it."
        case .privateFolder(let reason):
            return "The editor's private folder could not be used: \(reason)"
        }
    }

    /// The text of the faulty entry as typed, escaped and shortened so it can be shown on a terminal; `nil` when the
    /// error has none. Not part of ``description``: it is the person's own input, shown back to them only.
    public var offendingText: String? {
        switch self {
        case .invalidAddress(_, _, let text): return Self.shown(text)
        default: return nil
        }
    }

    /// `text` quoted for a terminal (``ComposeError/shown(_:limit:)``), up to 64 characters.
    static func shown(_ text: String) -> String { ComposeError.shown(text, limit: 64) }
}
