import CofferMIME

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What storing one fetched message did.
public enum FetchedOutcome: Sendable, Equatable {
    /// Stored as a new message under this id.
    case stored(Int64)
    /// Its exact bytes were stored already: the location (and the folder's label) went to that message.
    case located(Int64)
    /// Coffer could not parse it: stored as a damaged message under this id (see ``MessageFlags/damaged``), for
    /// this reason.
    case damaged(Int64, MIMEError)

    /// The stored message.
    public var messageID: Int64 {
        switch self {
        case .stored(let id), .located(let id), .damaged(let id, _): id
        }
    }
}

extension MessageFlags {
    /// The message could not be parsed (for example its header section is over 1 MiB): it is stored as what it is,
    /// its raw bytes sealed as one attachment (`message.eml`, `message/rfc822`), under the subject
    /// ``MailStore/damagedSubject`` and with why as its text.
    public static let damaged = MessageFlags(rawValue: 1 << 5)
}

extension MailStore {
    /// The subject a damaged message is listed under.
    public static let damagedSubject = "(damaged message)"
    /// The file name the raw bytes of a damaged message are kept under.
    public static let damagedFileName = "message.eml"

    /// A message that did not parse, prepared to be stored as what it is: its bytes sealed as an attachment, the
    /// reason (the parser's sentence, which carries no message text) as its text, the damaged flag. Its time is the
    /// import time; it has no addresses, no Message-ID and no thread.
    static func prepareDamaged(_ raw: RawMessage, reason: MIMEError, keys: StoreKeys, now: Int64) -> PreparedMessage {
        let text =
            "Coffer could not read this message: \(reason.description) Its bytes are kept unchanged as the "
            + "attachment \(damagedFileName)."
        var tokens = Set<Int64>()
        SearchTokenizer.forEachToken(in: damagedSubject) { token in
            tokens.insert(keys.search.hash64(tag: HashTag.searchToken, token))
        }
        var info = CellWriter(capacity: 96)
        info.string(damagedFileName)
        info.string("message/rfc822")
        info.string(nil)
        info.count(raw.bytes.count)
        var body = CellWriter(capacity: raw.bytes.count + 8)
        body.raw(raw.bytes)
        var flags = raw.flags.intersection(syncedFlags)
        flags.formUnion([.damaged, .hasAttachments])
        return PreparedMessage(
            time: now,
            flags: flags.rawValue,
            size: Int64(raw.bytes.count),
            messageIDHash: nil,
            contentHash: Data(keys.lookup.hash(tag: HashTag.content, raw.bytes).prefix(16)),
            parentHashes: [],
            cells: [
                (.messageSubject, CellWriter.text(damagedSubject)),
                (.messageFrom, CellWriter.addressList([])),
                (.messageTo, CellWriter.addressList([])),
                (.messageCc, CellWriter.addressList([])),
                (.messageBcc, CellWriter.addressList([])),
                (.messageHeaders, CellWriter.headers([])),
                (.messageText, CellWriter.text(text)),
                (.messageHTML, CellWriter.text(nil)),
                (.messageSnippet, CellWriter.text(text)),
                (.messageSummary, CellWriter.summary(subject: damagedSubject, from: [])),
            ],
            searchDocument: SearchIndex.document(tokens),
            attachments: [(info.bytes, body.bytes)],
            labels: raw.labels
        )
    }
}
