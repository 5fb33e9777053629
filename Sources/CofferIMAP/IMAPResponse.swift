/// One complete server response: untagged data (`* …`), a tagged completion (`tag OK …`) or a continuation (`+ …`).
public enum IMAPResponse: Sendable, Equatable {
    /// `* …`: data or a status the server sends on its own or for a command in progress.
    case untagged(UntaggedResponse)
    /// `tag OK/NO/BAD [code] text`: the completion of the command with that tag.
    case tagged(TaggedResponse)
    /// `+ text`: the server waits for more (a literal, an AUTHENTICATE step, or IDLE is running).
    case continuation(String)
}

/// A status word of a condition response.
public enum ResponseStatus: String, Sendable, Equatable {
    /// Success (or information, untagged).
    case ok = "OK"
    /// Refused or failed.
    case no = "NO"
    /// A protocol error.
    case bad = "BAD"
    /// The greeting of a connection that is already authenticated.
    case preauth = "PREAUTH"
    /// The server is closing the connection.
    case bye = "BYE"
}

/// The completion of one command.
public struct TaggedResponse: Sendable, Equatable {
    /// The tag of the command this completes.
    public var tag: String
    /// OK, NO or BAD.
    public var status: ResponseStatus
    /// The response code in brackets, if any.
    public var code: ResponseCode?
    /// The human-readable text (server words, never message content).
    public var text: String

    /// Creates a tagged response.
    public init(tag: String, status: ResponseStatus, code: ResponseCode? = nil, text: String) {
        self.tag = tag
        self.status = status
        self.code = code
        self.text = text
    }
}

/// A response code, `[…]` after a status word (RFC 3501 §7.1, UIDPLUS, CONDSTORE/QRESYNC, METADATA).
public enum ResponseCode: Sendable, Equatable {
    /// `ALERT`: the text must be shown to the user.
    case alert
    /// `CAPABILITY …`: the capabilities, sent with the greeting or after login.
    case capability([String])
    /// `PERMANENTFLAGS (…)`: the flags that can be changed permanently.
    case permanentFlags([String])
    /// `READ-ONLY`: the mailbox is selected read-only.
    case readOnly
    /// `READ-WRITE`: the mailbox is selected read-write.
    case readWrite
    /// `TRYCREATE`: the target mailbox does not exist.
    case tryCreate
    /// `UIDNEXT n`: the UID the next message will get.
    case uidNext(UInt32)
    /// `UIDVALIDITY n`: the mailbox's UID validity.
    case uidValidity(UInt32)
    /// `UNSEEN n`: the sequence number of the first unseen message.
    case unseen(UInt32)
    /// `HIGHESTMODSEQ n` (RFC 7162): the highest mod-sequence of the mailbox.
    case highestModSeq(UInt64)
    /// `NOMODSEQ` (RFC 7162): the mailbox does not keep mod-sequences.
    case noModSeq
    /// `MODIFIED set` (RFC 7162): the messages a conditional STORE did not change.
    case modified(String)
    /// `CLOSED` (RFC 7162): the previously selected mailbox is now closed.
    case closed
    /// `APPENDUID validity uid` (RFC 4315).
    case appendUID(uidValidity: UInt32, uid: String)
    /// `COPYUID validity from to` (RFC 4315).
    case copyUID(uidValidity: UInt32, source: String, destination: String)
    /// `METADATA …` (RFC 5464): `LONGENTRIES n`, `MAXSIZE n`, `TOOMANY` or `NOPRIVATE`, as sent.
    case metadata(String)
    /// Any other code: its name and its raw argument (for example `AUTHENTICATIONFAILED`, `SERVERBUG`).
    case other(name: String, argument: String?)
}

/// Untagged data (`* …`).
public enum UntaggedResponse: Sendable, Equatable {
    /// `* OK/NO/BAD/PREAUTH/BYE [code] text`.
    case condition(status: ResponseStatus, code: ResponseCode?, text: String)
    /// `* CAPABILITY …`.
    case capability([String])
    /// `* ENABLED …` (RFC 5161): the extensions the ENABLE command turned on.
    case enabled([String])
    /// `* FLAGS (…)`: the flags defined in the selected mailbox.
    case flags([String])
    /// `* LIST (attributes) delimiter name` (or LSUB).
    case list(MailboxListing)
    /// `* STATUS name (item value …)`.
    case status(mailbox: String, items: [String: UInt64])
    /// `* n EXISTS`.
    case exists(UInt32)
    /// `* n RECENT`.
    case recent(UInt32)
    /// `* n EXPUNGE`: the message with that sequence number was removed.
    case expunge(UInt32)
    /// `* SEARCH n …` with the optional `(MODSEQ n)` of RFC 7162.
    case search([UInt32], modSeq: UInt64?)
    /// `* ESEARCH …` (RFC 4731): the answer to a SEARCH with `RETURN`, its matches as ranges.
    case esearch(ExtendedSearchResult)
    /// `* n FETCH (…)`.
    case fetch(sequence: UInt32, items: [FetchItem])
    /// `* VANISHED [(EARLIER)] set` (RFC 7162): UIDs that were expunged.
    case vanished(earlier: Bool, uids: String)
    /// `* METADATA mailbox (entry value …)` or `* METADATA mailbox entry …` (RFC 5464); nil values are NIL.
    case metadata(mailbox: String, entries: [MetadataEntry])
    /// Any other untagged response (ID, NAMESPACE, …): its keyword; the rest was read and skipped.
    case other(keyword: String)
}

/// An `ESEARCH` response (RFC 4731): what a `SEARCH RETURN (…)` asked for, as the server sent it.
public struct ExtendedSearchResult: Sendable, Equatable {
    /// The tag of the command it answers (the search correlator), nil when the server sent none.
    public var tag: String?
    /// Whether the numbers are UIDs (the answer to `UID SEARCH`).
    public var uid: Bool = false
    /// `ALL`: every match, as ranges in the order sent; empty when nothing matched (the server then omits ALL).
    public var all: [ClosedRange<UInt32>] = []
    /// `MIN`, the lowest match.
    public var min: UInt32?
    /// `MAX`, the highest match.
    public var max: UInt32?
    /// `COUNT`, the number of matches.
    public var count: UInt32?
    /// `MODSEQ` (RFC 7162), the highest mod-sequence of the matches.
    public var modSeq: UInt64?

    /// Creates a result.
    public init(
        tag: String? = nil,
        uid: Bool = false,
        all: [ClosedRange<UInt32>] = [],
        min: UInt32? = nil,
        max: UInt32? = nil,
        count: UInt32? = nil,
        modSeq: UInt64? = nil
    ) {
        self.tag = tag
        self.uid = uid
        self.all = all
        self.min = min
        self.max = max
        self.count = count
        self.modSeq = modSeq
    }
}

/// One line of a LIST or LSUB response.
public struct MailboxListing: Sendable, Equatable {
    /// The attributes, such as `\HasNoChildren`, `\Noselect`, `\Subscribed`.
    public var attributes: [String]
    /// The hierarchy delimiter, nil for a flat namespace.
    public var delimiter: Character?
    /// The mailbox name as the server sent it (modified UTF-7 unless UTF8=ACCEPT is enabled).
    public var name: String
    /// True for LSUB (subscribed-only listing).
    public var isLSUB: Bool

    /// Creates a listing.
    public init(attributes: [String], delimiter: Character?, name: String, isLSUB: Bool = false) {
        self.attributes = attributes
        self.delimiter = delimiter
        self.name = name
        self.isLSUB = isLSUB
    }
}

/// One metadata entry (RFC 5464); `value` is nil when the server sent NIL or only named the entry.
public struct MetadataEntry: Sendable, Equatable {
    /// The entry name, such as `/private/comment`.
    public var name: String
    /// The value's bytes, nil for NIL or when only the name was sent.
    public var value: [UInt8]?

    /// Creates an entry.
    public init(name: String, value: [UInt8]?) {
        self.name = name
        self.value = value
    }
}

/// One item of a FETCH response.
public enum FetchItem: Sendable, Equatable {
    /// `UID n`.
    case uid(UInt32)
    /// `FLAGS (…)`.
    case flags([String])
    /// `INTERNALDATE "dd-Mon-yyyy hh:mm:ss +zzzz"`: seconds since 1970 (UTC).
    case internalDate(secondsSince1970: Int64)
    /// `RFC822.SIZE n`.
    case rfc822Size(UInt64)
    /// `MODSEQ (n)` (RFC 7162).
    case modSeq(UInt64)
    /// `BODY[section]<origin> literal-or-string`; nil data for NIL.
    case body(section: String, origin: UInt32?, data: [UInt8]?)
    /// A `BODY[section]` whose literal was streamed out as `.bodyBegin`/`.bodyChunk`/`.bodyEnd` events.
    case streamedBody(section: String, origin: UInt32?, size: Int)
    /// Any other item (ENVELOPE, BODYSTRUCTURE, X-GM-…): its name; its value was read and skipped.
    case other(name: String)
}

/// What the parser hands out: whole responses, and the body of a large FETCH literal in chunks.
public enum IMAPResponseEvent: Sendable, Equatable {
    /// A complete response.
    case response(IMAPResponse)
    /// A `BODY[section]` literal of `size` bytes begins in the FETCH response for message `sequence`.
    case bodyBegin(sequence: UInt32, section: String, size: Int)
    /// The next bytes of that literal.
    case bodyChunk([UInt8])
    /// The literal ended; the rest of the FETCH response follows as `.response`, with a `.streamedBody` item.
    case bodyEnd
}
