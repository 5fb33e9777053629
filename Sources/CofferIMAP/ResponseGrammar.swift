/// A recursive-descent reader of one complete response (its lines and literals, CRLFs included).
struct ResponseGrammar {
    private let bytes: [UInt8]
    private let streamed: [Int: Int]
    private let maxDepth: Int
    private var index = 0

    init(bytes: [UInt8], streamed: [Int: Int], maxDepth: Int) {
        self.bytes = bytes
        self.streamed = streamed
        self.maxDepth = maxDepth
    }

    static func upper(_ byte: UInt8) -> UInt8 { byte >= 0x61 && byte <= 0x7A ? byte - 0x20 : byte }

    // MARK: - Responses

    mutating func parseResponse() throws(IMAPError) -> IMAPResponse {
        if peek == UInt8(ascii: "+") {
            index += 1
            if peek == 0x20 { index += 1 }
            let text = try restOfLine()
            return .continuation(text)
        }
        if peek == UInt8(ascii: "*") {
            index += 1
            try space()
            let untagged = try parseUntagged()
            try crlf()
            return .untagged(untagged)
        }
        let tag = try atom(what: "a tag", stopAt: [UInt8(ascii: "+")])
        try space()
        let word = try atom(what: "OK, NO or BAD").uppercased()
        guard let status = ResponseStatus(rawValue: word), status == .ok || status == .no || status == .bad else {
            throw .syntax(expected: "OK, NO or BAD", offset: index)
        }
        let (code, text) = try respText()
        return .tagged(TaggedResponse(tag: tag, status: status, code: code, text: text))
    }

    private mutating func parseUntagged() throws(IMAPError) -> UntaggedResponse {
        if let first = peek, isDigit(first) {
            let number = try number32()
            try space()
            let word = try atom(what: "a message data keyword").uppercased()
            switch word {
            case "EXISTS": return .exists(number)
            case "RECENT": return .recent(number)
            case "EXPUNGE": return .expunge(number)
            case "FETCH":
                try space()
                return .fetch(sequence: number, items: try fetchItems())
            default:
                try skipRest()
                return .other(keyword: word)
            }
        }
        let word = try atom(what: "an untagged keyword").uppercased()
        switch word {
        case "OK", "NO", "BAD", "PREAUTH", "BYE":
            let (code, text) = try respText(untilCRLF: false)
            return .condition(status: ResponseStatus(rawValue: word) ?? .ok, code: code, text: text)
        case "CAPABILITY":
            return .capability(try atomsToEnd())
        case "ENABLED":
            return .enabled(try atomsToEnd())
        case "FLAGS":
            try space()
            return .flags(try flagList())
        case "LIST", "LSUB":
            try space()
            return .list(try listing(isLSUB: word == "LSUB"))
        case "STATUS":
            try space()
            let mailbox = try mailboxName()
            try space()
            return .status(mailbox: mailbox, items: try statusItems())
        case "SEARCH":
            return try search()
        case "ESEARCH":
            return .esearch(try extendedSearch())
        case "VANISHED":
            try space()
            var earlier = false
            if peek == UInt8(ascii: "(") {
                index += 1
                let tag = try atom(what: "EARLIER").uppercased()
                guard tag == "EARLIER" else { throw .syntax(expected: "EARLIER", offset: index) }
                try expect(UInt8(ascii: ")"), "')'")
                try space()
                earlier = true
            }
            return .vanished(earlier: earlier, uids: try sequenceSet())
        case "METADATA":
            try space()
            let mailbox = try mailboxName()
            try space()
            return .metadata(mailbox: mailbox, entries: try metadataEntries())
        default:
            try skipRest()
            return .other(keyword: word)
        }
    }

    // MARK: - Pieces

    /// `[SP] ["[" code "]" [SP]] text` up to CRLF; consumes CRLF when `untilCRLF`.
    private mutating func respText(untilCRLF: Bool = true) throws(IMAPError) -> (ResponseCode?, String) {
        var code: ResponseCode? = nil
        if peek == 0x20 { index += 1 }
        if peek == UInt8(ascii: "[") {
            index += 1
            code = try responseCode()
            try expect(UInt8(ascii: "]"), "']'")
            if peek == 0x20 { index += 1 }
        }
        let start = index
        while let byte = peek, byte != 0x0D, byte != 0x0A { index += 1 }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        if untilCRLF { try crlf() }
        return (code, text)
    }

    private mutating func responseCode() throws(IMAPError) -> ResponseCode {
        let name = try atom(what: "a response code", stopAt: [UInt8(ascii: "]")]).uppercased()
        switch name {
        case "ALERT": return .alert
        case "READ-ONLY": return .readOnly
        case "READ-WRITE": return .readWrite
        case "TRYCREATE": return .tryCreate
        case "NOMODSEQ": return .noModSeq
        case "CLOSED": return .closed
        case "CAPABILITY":
            var names: [String] = []
            while peek == 0x20 {
                index += 1
                names.append(try atom(what: "a capability", stopAt: [UInt8(ascii: "]")]))
            }
            return .capability(names)
        case "PERMANENTFLAGS":
            try space()
            return .permanentFlags(try flagList())
        case "UIDNEXT":
            try space()
            return .uidNext(try number32())
        case "UIDVALIDITY":
            try space()
            return .uidValidity(try number32())
        case "UNSEEN":
            try space()
            return .unseen(try number32())
        case "HIGHESTMODSEQ":
            try space()
            return .highestModSeq(try number64())
        case "MODIFIED":
            try space()
            return .modified(try sequenceSet())
        case "APPENDUID":
            try space()
            let validity = try number32()
            try space()
            return .appendUID(uidValidity: validity, uid: try sequenceSet())
        case "COPYUID":
            try space()
            let validity = try number32()
            try space()
            let source = try sequenceSet()
            try space()
            return .copyUID(uidValidity: validity, source: source, destination: try sequenceSet())
        case "METADATA":
            return .metadata(try codeArgument() ?? "")
        default:
            return .other(name: name, argument: try codeArgument())
        }
    }

    /// The raw text of a response code's argument, up to `]`.
    private mutating func codeArgument() throws(IMAPError) -> String? {
        guard peek == 0x20 else { return nil }
        index += 1
        let start = index
        while let byte = peek, byte != UInt8(ascii: "]"), byte != 0x0D, byte != 0x0A { index += 1 }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    private mutating func fetchItems() throws(IMAPError) -> [FetchItem] {
        try expect(UInt8(ascii: "("), "'('")
        var items: [FetchItem] = []
        if peek == UInt8(ascii: ")") {
            index += 1
            return items
        }
        while true {
            items.append(try fetchItem())
            if peek == UInt8(ascii: ")") {
                index += 1
                return items
            }
            try space()
        }
    }

    private mutating func fetchItem() throws(IMAPError) -> FetchItem {
        let name = try atom(what: "a fetch item", stopAt: [UInt8(ascii: "["), UInt8(ascii: "]")]).uppercased()
        switch name {
        case "UID":
            try space()
            return .uid(try number32())
        case "FLAGS":
            try space()
            return .flags(try flagList())
        case "RFC822.SIZE":
            try space()
            return .rfc822Size(try number64())
        case "MODSEQ":
            try space()
            try expect(UInt8(ascii: "("), "'('")
            let value = try number64()
            try expect(UInt8(ascii: ")"), "')'")
            return .modSeq(value)
        case "INTERNALDATE":
            try space()
            let offset = index
            guard let raw = try nstring() else { throw .syntax(expected: "a date", offset: offset) }
            guard let seconds = InternalDate.parse(raw) else { throw .syntax(expected: "a date", offset: offset) }
            return .internalDate(secondsSince1970: seconds)
        case "BODY" where peek == UInt8(ascii: "["), "BINARY" where peek == UInt8(ascii: "["):
            index += 1
            let start = index
            var inQuote = false
            while let byte = peek, inQuote || byte != UInt8(ascii: "]") {
                guard byte != 0x0D, byte != 0x0A else { throw .syntax(expected: "']'", offset: index) }
                if byte == UInt8(ascii: "\"") { inQuote.toggle() }
                index += 1
            }
            let section = String(decoding: bytes[start..<index], as: UTF8.self)
            try expect(UInt8(ascii: "]"), "']'")
            var origin: UInt32? = nil
            if peek == UInt8(ascii: "<") {
                index += 1
                origin = try number32()
                try expect(UInt8(ascii: ">"), "'>'")
            }
            try space()
            if let size = streamed[index] {
                try skipLiteralHeader()
                return .streamedBody(section: section, origin: origin, size: size)
            }
            return .body(section: section, origin: origin, data: try nstringBytes())
        default:
            try space()
            try skipValue(depth: 0)
            return .other(name: name)
        }
    }

    private mutating func listing(isLSUB: Bool) throws(IMAPError) -> MailboxListing {
        let attributes = try flagList()
        try space()
        var delimiter: Character? = nil
        if let value = try nstring() {
            guard value.count == 1, let first = value.first else {
                throw .syntax(expected: "a one-character delimiter", offset: index)
            }
            delimiter = first
        }
        try space()
        let name = try mailboxName()
        // mailbox-list-extended (RFC 5258): read and ignore.
        if peek == 0x20 {
            index += 1
            try skipValue(depth: 0)
        }
        return MailboxListing(attributes: attributes, delimiter: delimiter, name: name, isLSUB: isLSUB)
    }

    private mutating func statusItems() throws(IMAPError) -> [String: UInt64] {
        try expect(UInt8(ascii: "("), "'('")
        var items: [String: UInt64] = [:]
        while peek != UInt8(ascii: ")") {
            if !items.isEmpty { try space() }
            let name = try atom(what: "a status item").uppercased()
            try space()
            items[name] = try number64()
        }
        index += 1
        // Some servers put a space before CRLF.
        if peek == 0x20 { index += 1 }
        return items
    }

    private mutating func search() throws(IMAPError) -> UntaggedResponse {
        var numbers: [UInt32] = []
        var modSeq: UInt64? = nil
        while peek == 0x20 {
            index += 1
            if peek == UInt8(ascii: "(") {
                index += 1
                let word = try atom(what: "MODSEQ").uppercased()
                guard word == "MODSEQ" else { throw .syntax(expected: "MODSEQ", offset: index) }
                try space()
                modSeq = try number64()
                try expect(UInt8(ascii: ")"), "')'")
            } else if peek == 0x0D {
                break
            } else {
                numbers.append(try number32())
            }
        }
        return .search(numbers, modSeq: modSeq)
    }

    /// `ESEARCH [(TAG tag)] [UID] *(SP name SP value)` (RFC 4731); unknown result names are read and skipped.
    private mutating func extendedSearch() throws(IMAPError) -> ExtendedSearchResult {
        var result = ExtendedSearchResult()
        if peek == 0x20, index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "(") {
            index += 2
            let word = try atom(what: "TAG").uppercased()
            guard word == "TAG" else { throw .syntax(expected: "TAG", offset: index) }
            try space()
            result.tag = try astring()
            try expect(UInt8(ascii: ")"), "')'")
        }
        while peek == 0x20 {
            index += 1
            if peek == 0x0D { break }
            let word = try atom(what: "a search result").uppercased()
            if word == "UID" {
                result.uid = true
                continue
            }
            try space()
            switch word {
            case "ALL":
                let start = index
                guard let ranges = UIDSet.ranges(try sequenceSet()) else {
                    throw .syntax(expected: "a set of numbers", offset: start)
                }
                result.all += ranges
            case "MIN": result.min = try number32()
            case "MAX": result.max = try number32()
            case "COUNT": result.count = try number32()
            case "MODSEQ": result.modSeq = try number64()
            default: try skipValue(depth: 0)
            }
        }
        return result
    }

    private mutating func metadataEntries() throws(IMAPError) -> [MetadataEntry] {
        var entries: [MetadataEntry] = []
        if peek == UInt8(ascii: "(") {
            index += 1
            while peek != UInt8(ascii: ")") {
                if !entries.isEmpty { try space() }
                let name = try astring()
                try space()
                entries.append(MetadataEntry(name: name, value: try nstringBytes()))
            }
            index += 1
            return entries
        }
        entries.append(MetadataEntry(name: try astring(), value: nil))
        while peek == 0x20 {
            index += 1
            entries.append(MetadataEntry(name: try astring(), value: nil))
        }
        return entries
    }

    // MARK: - Tokens

    private var peek: UInt8? { index < bytes.count ? bytes[index] : nil }

    private func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }

    /// ATOM-CHAR of RFC 3501 (with `[` and `]` allowed unless in `stopAt`), plus `\` at the start of a flag.
    private func isAtomChar(_ byte: UInt8, stopAt: [UInt8]) -> Bool {
        IMAPCommandEncoder.isAStringChar(byte) && !stopAt.contains(byte)
    }

    private mutating func atom(what: String, stopAt: [UInt8] = [UInt8(ascii: "]")]) throws(IMAPError) -> String {
        let start = index
        while let byte = peek, isAtomChar(byte, stopAt: stopAt) { index += 1 }
        guard index > start else { throw .syntax(expected: what, offset: start) }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    /// A flag (`\Seen`, `\*`, `$Forwarded`, `keyword`) or a list attribute.
    private mutating func flag() throws(IMAPError) -> String {
        if peek == UInt8(ascii: "\\") {
            index += 1
            if peek == UInt8(ascii: "*") {
                index += 1
                return "\\*"
            }
            return "\\" + (try atom(what: "a flag"))
        }
        return try atom(what: "a flag")
    }

    private mutating func flagList() throws(IMAPError) -> [String] {
        try expect(UInt8(ascii: "("), "'('")
        var flags: [String] = []
        while peek != UInt8(ascii: ")") {
            if !flags.isEmpty { try space() }
            flags.append(try flag())
        }
        index += 1
        return flags
    }

    private mutating func atomsToEnd() throws(IMAPError) -> [String] {
        var names: [String] = []
        while peek == 0x20 {
            index += 1
            if peek == 0x0D { break }
            names.append(try atom(what: "a name"))
        }
        return names
    }

    private mutating func number64() throws(IMAPError) -> UInt64 {
        let start = index
        var value: UInt64 = 0
        while let byte = peek, isDigit(byte) {
            let (times, o1) = value.multipliedReportingOverflow(by: 10)
            let (sum, o2) = times.addingReportingOverflow(UInt64(byte - 0x30))
            guard !o1, !o2 else { throw .syntax(expected: "a number that fits in 64 bits", offset: start) }
            value = sum
            index += 1
        }
        guard index > start else { throw .syntax(expected: "a number", offset: start) }
        return value
    }

    private mutating func number32() throws(IMAPError) -> UInt32 {
        let start = index
        let value = try number64()
        guard let small = UInt32(exactly: value) else {
            throw .syntax(expected: "a number that fits in 32 bits", offset: start)
        }
        return small
    }

    /// A sequence set as text (`1:3,5,7:*`).
    private mutating func sequenceSet() throws(IMAPError) -> String {
        let start = index
        while let byte = peek,
            isDigit(byte) || byte == UInt8(ascii: ":") || byte == UInt8(ascii: ",")
                || byte == UInt8(ascii: "*")
        {
            index += 1
        }
        guard index > start else { throw .syntax(expected: "a sequence set", offset: start) }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    private mutating func space() throws(IMAPError) { try expect(0x20, "a space") }

    private mutating func crlf() throws(IMAPError) {
        try expect(0x0D, "CRLF")
        try expect(0x0A, "CRLF")
        guard index == bytes.count else { throw .syntax(expected: "the end of the response", offset: index) }
    }

    private mutating func expect(_ byte: UInt8, _ what: String) throws(IMAPError) {
        guard peek == byte else { throw .syntax(expected: what, offset: index) }
        index += 1
    }

    private mutating func restOfLine() throws(IMAPError) -> String {
        let start = index
        while let byte = peek, byte != 0x0D, byte != 0x0A { index += 1 }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        try crlf()
        return text
    }

    /// A quoted string's or literal's bytes; nil for NIL.
    private mutating func nstringBytes() throws(IMAPError) -> [UInt8]? {
        if peek == UInt8(ascii: "\"") { return try quoted() }
        if peek == UInt8(ascii: "{") { return try literal() }
        let start = index
        let word = try atom(what: "a string or NIL")
        guard word.uppercased() == "NIL" else { throw .syntax(expected: "a string or NIL", offset: start) }
        return nil
    }

    private mutating func nstring() throws(IMAPError) -> String? {
        try nstringBytes().map { String(decoding: $0, as: UTF8.self) }
    }

    /// An atom, quoted string or literal, as text.
    private mutating func astring() throws(IMAPError) -> String {
        if peek == UInt8(ascii: "\"") || peek == UInt8(ascii: "{") {
            return String(decoding: try nstringBytes() ?? [], as: UTF8.self)
        }
        return try atom(what: "a string", stopAt: [])
    }

    /// `INBOX` in any case is INBOX (RFC 3501 §5.1).
    private mutating func mailboxName() throws(IMAPError) -> String {
        let name = try astring()
        return name.uppercased() == "INBOX" ? "INBOX" : name
    }

    private mutating func quoted() throws(IMAPError) -> [UInt8] {
        try expect(UInt8(ascii: "\""), "'\"'")
        var out: [UInt8] = []
        while true {
            guard let byte = peek else { throw .syntax(expected: "a closing quote", offset: index) }
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                return out
            case UInt8(ascii: "\\"):
                guard let escaped = peek, escaped == UInt8(ascii: "\"") || escaped == UInt8(ascii: "\\") else {
                    throw .syntax(expected: "'\\\"' or '\\\\'", offset: index)
                }
                index += 1
                out.append(escaped)
            case 0x0D, 0x0A, 0x00:
                throw .syntax(expected: "a closing quote", offset: index - 1)
            default:
                out.append(byte)
            }
        }
    }

    private mutating func literalSize() throws(IMAPError) -> Int {
        try expect(UInt8(ascii: "{"), "'{'")
        let value = try number64()
        try expect(UInt8(ascii: "}"), "'}'")
        try expect(0x0D, "CRLF after a literal's size")
        try expect(0x0A, "CRLF after a literal's size")
        guard let size = Int(exactly: value), size <= bytes.count - index else {
            throw .syntax(expected: "the literal's bytes", offset: index)
        }
        return size
    }

    private mutating func literal() throws(IMAPError) -> [UInt8] {
        let size = try literalSize()
        let data = Array(bytes[index..<(index + size)])
        index += size
        return data
    }

    private mutating func skipLiteralHeader() throws(IMAPError) {
        try expect(UInt8(ascii: "{"), "'{'")
        _ = try number64()
        try expect(UInt8(ascii: "}"), "'}'")
        try expect(0x0D, "CRLF after a literal's size")
        try expect(0x0A, "CRLF after a literal's size")
    }

    /// Any value (atom, number, string, literal, NIL, nested list) of an item the client does not use.
    private mutating func skipValue(depth: Int) throws(IMAPError) {
        guard depth < maxDepth else { throw .nestingTooDeep(limit: maxDepth) }
        switch peek {
        case UInt8(ascii: "("):
            index += 1
            var first = true
            while peek != UInt8(ascii: ")") {
                if !first { try space() }
                first = false
                try skipValue(depth: depth + 1)
            }
            index += 1
        case UInt8(ascii: "\""):
            _ = try quoted()
        case UInt8(ascii: "{"):
            if streamed[index] != nil {
                try skipLiteralHeader()
            } else {
                _ = try literal()
            }
        case UInt8(ascii: "\\"):
            _ = try flag()
        default:
            _ = try atom(what: "a value", stopAt: [])
        }
    }

    /// The rest of an unknown untagged response: values separated by spaces up to CRLF.
    private mutating func skipRest() throws(IMAPError) {
        while peek == 0x20 {
            index += 1
            if peek == 0x0D { break }
            try skipValue(depth: 0)
        }
    }
}

/// INTERNALDATE: `dd-Mon-yyyy hh:mm:ss +zzzz` (day may be space-padded), to seconds since 1970.
enum InternalDate {
    private static let months = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]

    static func parse(_ text: String) -> Int64? {
        let trimmed = text.drop { $0 == " " }
        let parts = trimmed.split(separator: " ", omittingEmptySubsequences: true)
        guard parts.count == 3 else { return nil }
        let date = parts[0].split(separator: "-")
        let time = parts[1].split(separator: ":")
        guard date.count == 3, time.count == 3, let day = Int64(date[0]), (1...31).contains(day),
            let month = months.firstIndex(of: date[1].uppercased()), let year = Int64(date[2]),
            (1...9999).contains(year), let hour = Int64(time[0]), (0...23).contains(hour),
            let minute = Int64(time[1]), (0...59).contains(minute), let second = Int64(time[2]),
            (0...60).contains(second)
        else { return nil }
        let zone = Array(parts[2].utf8)
        guard zone.count == 5, zone[0] == UInt8(ascii: "+") || zone[0] == UInt8(ascii: "-"),
            zone.dropFirst().allSatisfy({ $0 >= 0x30 && $0 <= 0x39 })
        else { return nil }
        let zh = Int64(zone[1] - 0x30) * 10 + Int64(zone[2] - 0x30)
        let zm = Int64(zone[3] - 0x30) * 10 + Int64(zone[4] - 0x30)
        let offset = (zh * 3600 + zm * 60) * (zone[0] == UInt8(ascii: "-") ? -1 : 1)
        // Days from civil (Howard Hinnant's algorithm).
        let m = Int64(month + 1)
        let y = m <= 2 ? year - 1 : year
        let era = y / 400
        let yoe = y - era * 400
        let doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146097 + doe - 719468
        return days * 86400 + hour * 3600 + minute * 60 + second - offset
    }
}
