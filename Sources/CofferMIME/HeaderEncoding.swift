/// Writes header fields: checks of what a person typed, RFC 5322 folding, RFC 2047 encoded words, addresses and
/// RFC 2045/2231 parameters. Every byte it produces is ASCII, so a column is a byte.
enum HeaderEncoding {
    /// The folding width (RFC 5322 section 2.1.1's "SHOULD": 78 characters before the CRLF).
    static let lineLimit = 78
    /// The longest encoded word (RFC 2047 section 2).
    static let encodedWordLimit = 75
    /// `=?utf-8?b?` and `?=`.
    static let encodedWordOverhead = 12

    /// Whether a scalar may never be written into a header field: CR, LF and the other C0 controls except tab,
    /// DEL, the C1 controls (NEL among them) and the Unicode line and paragraph separators.
    static func isForbidden(_ scalar: Unicode.Scalar) -> Bool {
        let value = scalar.value
        return (value < 0x20 && value != 0x09) || (value >= 0x7F && value <= 0x9F) || value == 0x2028
            || value == 0x2029
    }

    static func check(_ text: String, _ field: ComposeField) throws(ComposeError) {
        if text.unicodeScalars.contains(where: isForbidden) {
            throw .forbiddenCharacter(field)
        }
    }

    static func isWSP(_ scalar: Unicode.Scalar) -> Bool { scalar == " " || scalar == "\t" }

    /// RFC 5322 atext.
    static func isAtext(_ scalar: Unicode.Scalar) -> Bool {
        guard scalar.isASCII else {
            return false
        }
        let value = UInt8(scalar.value)
        switch value {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "!#$%&'*+-/=?^_`{|}~".unicodeScalars.contains(scalar)
        }
    }

    /// RFC 2045 token characters (printable ASCII except space and tspecials).
    static func isTokenCharacter(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value > 0x20 && scalar.value < 0x7F && !"()<>@,;:\\\"/[]?=".unicodeScalars.contains(scalar)
    }

    static func trimmed(_ text: String) -> String {
        let scalars = text.unicodeScalars
        guard let first = scalars.firstIndex(where: { !isWSP($0) }) else {
            return ""
        }
        let last = scalars.lastIndex(where: { !isWSP($0) })!
        return String(String.UnicodeScalarView(scalars[first...last]))
    }

    // MARK: Addresses

    /// Checks an address and returns its addr-spec as written: a dot-atom or quoted local part, `@`, and an ASCII
    /// host name or domain literal.
    static func addrSpec(_ raw: String, field: ComposeField) throws(ComposeError) -> String {
        try check(raw, field)
        let address = trimmed(raw)
        guard let at = address.unicodeScalars.lastIndex(of: "@") else {
            throw .invalidAddress(field)
        }
        let local = String(address.unicodeScalars[..<at])
        let domain = String(address.unicodeScalars[address.unicodeScalars.index(after: at)...])
        if !domain.unicodeScalars.allSatisfy(\.isASCII) {
            throw .nonASCIIDomain(field)
        }
        if !local.unicodeScalars.allSatisfy(\.isASCII) {
            throw .nonASCIILocalPart(field)
        }
        guard isValidDomain(domain) else {
            throw .invalidAddress(field)
        }
        guard let writtenLocal = localPart(local) else {
            throw .invalidAddress(field)
        }
        let spec = writtenLocal + "@" + domain
        guard spec.utf8.count <= 254 else {
            throw .invalidAddress(field)
        }
        return spec
    }

    static func isValidDomain(_ domain: String) -> Bool {
        let scalars = Array(domain.unicodeScalars)
        if scalars.first == "[" {
            guard scalars.count > 2, scalars.last == "]" else {
                return false
            }
            return scalars.dropFirst().dropLast().allSatisfy {
                $0.value > 0x20 && $0.value < 0x7F && $0 != "[" && $0 != "]" && $0 != "\\"
            }
        }
        guard !domain.isEmpty, domain.utf8.count <= 253 else {
            return false
        }
        for label in domain.split(separator: ".", omittingEmptySubsequences: false) {
            guard !label.isEmpty, label.utf8.count <= 63, label.first != "-", label.last != "-" else {
                return false
            }
            let isLDH = label.unicodeScalars.allSatisfy {
                ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "-"
            }
            guard isLDH else {
                return false
            }
        }
        return true
    }

    /// The local part as written: a dot-atom as is, a well-formed quoted string as is, other printable ASCII
    /// without quotes or backslashes quoted; `nil` otherwise, or when empty or too long. A dot-atom holding `=?` is
    /// quoted too: bare, a reader may take it for the start of an encoded word and swallow the addresses after it.
    static func localPart(_ local: String) -> String? {
        let scalars = Array(local.unicodeScalars)
        guard !scalars.isEmpty, scalars.allSatisfy({ $0.value >= 0x20 && $0.value < 0x7F }) else {
            return nil
        }
        let written: String
        if isDotAtom(scalars) && !local.contains("=?") {
            written = local
        } else if scalars.count >= 2 && scalars.first == "\"" && scalars.last == "\"",
            let inner = unquotedLocal(scalars.dropFirst().dropLast())
        {
            written = quoted(inner)
        } else if !local.contains("\"") && !local.contains("\\") {
            written = quoted(local)
        } else {
            // Quotes or backslashes outside a well-formed quoted string: no reader would give the same address back.
            return nil
        }
        return written.utf8.count <= 64 ? written : nil
    }

    private static func isDotAtom(_ scalars: [Unicode.Scalar]) -> Bool {
        guard scalars.first != ".", scalars.last != "." else {
            return false
        }
        var previousDot = false
        for scalar in scalars {
            if scalar == "." {
                if previousDot {
                    return false
                }
                previousDot = true
            } else if isAtext(scalar) {
                previousDot = false
            } else {
                return false
            }
        }
        return true
    }

    /// The content of a quoted local part with escapes removed, or `nil` when it has an unescaped quote.
    private static func unquotedLocal(_ scalars: ArraySlice<Unicode.Scalar>) -> String? {
        var result = String.UnicodeScalarView()
        var escaped = false
        for scalar in scalars {
            if escaped {
                result.append(scalar)
                escaped = false
            } else if scalar == "\\" {
                escaped = true
            } else if scalar == "\"" {
                return nil
            } else {
                result.append(scalar)
            }
        }
        return escaped ? nil : String(result)
    }

    /// An RFC 5322 quoted string.
    static func quoted(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            if scalar == "\"" || scalar == "\\" {
                result += "\\"
            }
            result.unicodeScalars.append(scalar)
        }
        return result + "\""
    }

    /// Checks a message ID (without angle brackets, which are removed if present) and returns it.
    static func messageID(_ raw: String, field: ComposeField) throws(ComposeError) -> String {
        try check(raw, field)
        var id = trimmed(raw)
        if id.hasPrefix("<") && id.hasSuffix(">") && id.count >= 2 {
            id = String(id.dropFirst().dropLast())
        }
        let valid =
            !id.isEmpty && id.utf8.count <= 900
            && id.unicodeScalars.allSatisfy { $0.value > 0x20 && $0.value < 0x7F && $0 != "<" && $0 != ">" }
        guard valid else {
            throw .invalidMessageID(field)
        }
        return id
    }

    // MARK: Folding

    /// One header field being written: tokens are appended with the whitespace before them, and the line is
    /// folded at that whitespace when the token would pass the folding width. A token is never split, so a line is
    /// longer than 78 characters only when one token (such as a very long address) is.
    struct Field {
        private(set) var bytes: [UInt8]
        private(set) var column: Int
        /// Whether the current line holds a token after the field name.
        private var lineHasToken = false

        init(name: String) {
            bytes = Array(name.utf8) + [UInt8(ascii: ":")]
            column = bytes.count
        }

        /// Room left on the current line after `space`.
        func room(after space: String) -> Int { HeaderEncoding.lineLimit - column - space.utf8.count }

        /// Appends `token` after `space`; a non-empty `space` may become a fold (CRLF then the space). `reserve`
        /// keeps room for characters glued on after the token (such as a parameter's `;`).
        mutating func append(_ token: String, after space: String, reserve: Int = 0) {
            let length = token.utf8.count
            if !space.isEmpty && shouldFold(for: length + reserve, after: space) {
                fold()
            }
            bytes += space.utf8
            bytes += token.utf8
            column += space.utf8.count + length
            lineHasToken = true
        }

        /// Appends `token` directly after the previous one, never folding between them.
        mutating func glue(_ token: String) {
            bytes += token.utf8
            column += token.utf8.count
        }

        /// Starts a continuation line; the caller's next token brings the whitespace the line starts with.
        mutating func fold() {
            bytes += [0x0D, 0x0A]
            column = 0
            lineHasToken = false
        }

        /// Starts a continuation line when `length` characters after `space` do not fit this one.
        mutating func foldIfNeeded(for length: Int, after space: String) {
            if shouldFold(for: length, after: space) {
                fold()
            }
        }

        /// Whether `length` characters after `space` go on a fresh line: when they do not fit this one, and either
        /// the line holds a token already or they fit a fresh line (after a long field name alone).
        private func shouldFold(for length: Int, after space: String) -> Bool {
            guard length > room(after: space) else {
                return false
            }
            return lineHasToken || (column > 0 && length <= HeaderEncoding.lineLimit - space.utf8.count)
        }

        /// The finished field with its CRLF.
        func finished() -> [UInt8] { bytes + [0x0D, 0x0A] }
    }

    // MARK: Encoded words

    /// How a run of text is written as encoded words: whichever of B and Q is shorter for the whole run.
    static func prefersBase64(_ bytes: [UInt8]) -> Bool {
        let base64Length = (bytes.count + 2) / 3 * 4
        let qLength = bytes.reduce(0) { $0 + (isQLiteral($1) ? 1 : 3) }
        return base64Length < qLength
    }

    /// Q-encoding literals: the characters allowed unencoded in an encoded word in a phrase (RFC 2047 section 5
    /// rule 3), so the same words are valid in Subject and in display names. Space is written as `_`.
    static func isQLiteral(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "!"), UInt8(ascii: "*"), UInt8(ascii: "+"),
            UInt8(ascii: "-"), UInt8(ascii: "/"), UInt8(ascii: " "):
            return true
        default:
            return false
        }
    }

    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    private static func qEncode(_ bytes: some Sequence<UInt8>) -> String {
        var output: [UInt8] = []
        for byte in bytes {
            if byte == UInt8(ascii: " ") {
                output.append(UInt8(ascii: "_"))
            } else if isQLiteral(byte) {
                output.append(byte)
            } else {
                output += [UInt8(ascii: "="), hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 0x0F)]]
            }
        }
        return String(decoding: output, as: UTF8.self)
    }

    static func qLength(_ bytes: some Sequence<UInt8>) -> Int {
        bytes.reduce(0) { $0 + (isQLiteral($1) ? 1 : 3) }
    }

    /// Writes `text` as one or more encoded words, the first after `space`, the others after a space (or a fold).
    /// Each word holds whole characters and fits the line it is on (at most 75 characters).
    static func appendEncodedWords(_ text: String, after space: String, to field: inout Field) {
        let base64 = prefersBase64(Array(text.utf8))
        let prefix = base64 ? "=?utf-8?b?" : "=?utf-8?q?"
        var pending: [UInt8] = []
        var separator = space
        func encodedLength(_ bytes: [UInt8]) -> Int {
            encodedWordOverhead + (base64 ? (bytes.count + 2) / 3 * 4 : qLength(bytes))
        }
        func budget() -> Int { min(encodedWordLimit, field.room(after: separator)) }
        func flush() {
            let payload = base64 ? Base64Encoding.encode(pending) : qEncode(pending)
            field.append(prefix + payload + "?=", after: separator)
            separator = " "
            pending = []
        }
        // A fresh continuation line holds a full-size word; start one when too little room is left.
        field.foldIfNeeded(for: encodedWordOverhead + 16, after: separator)
        // Words end between characters (a letter and its combining marks stay together), or between scalars of a
        // character too long for one word.
        var units: [[UInt8]] = []
        for character in text {
            let encoded = Array(String(character).utf8)
            if encodedLength(encoded) <= encodedWordLimit {
                units.append(encoded)
            } else {
                units += character.unicodeScalars.map { Array(String($0).utf8) }
            }
        }
        for encoded in units {
            if !pending.isEmpty && encodedLength(pending + encoded) > budget() {
                // Split after the last space when there is one, keeping the space inside the first word: decoders
                // that follow RFC 2047 drop the whitespace between words, and those that keep it (Python's and
                // this module's address parsers) show at worst a doubled space instead of a word cut in two.
                var carried: [UInt8] = []
                if let space = pending.lastIndex(of: 0x20), space > 0, space < pending.count - 1 {
                    carried = Array(pending[(space + 1)...])
                    pending.removeSubrange((space + 1)...)
                }
                flush()
                field.foldIfNeeded(
                    for: max(encodedWordOverhead + 16, encodedLength(carried + encoded)),
                    after: separator
                )
                pending = carried
            }
            pending += encoded
        }
        if !pending.isEmpty || text.isEmpty {
            flush()
        }
    }

    // MARK: Unstructured text

    /// Writes unstructured text (RFC 5322 section 3.2.5), trimmed: ASCII words as they are, runs of words that are
    /// not ASCII, look like encoded words, or are too long for a line as RFC 2047 encoded words (with the spaces
    /// between them inside the words, since decoders drop spaces between encoded words).
    static func appendUnstructured(_ text: String, to field: inout Field) {
        var space = " "
        var word = String.UnicodeScalarView()
        // The run of words being gathered into encoded words: the space before it and its text.
        var run: (space: String, text: String)?
        func flushRun() {
            if let (before, text) = run {
                appendEncodedWords(text, after: before, to: &field)
                run = nil
            }
        }
        func finishWord() {
            guard !word.isEmpty else {
                return
            }
            let text = String(word)
            if needsEncoding(text) {
                if run != nil {
                    run!.text += space
                    run!.text += text
                } else {
                    run = (space, text)
                }
            } else {
                flushRun()
                field.append(text, after: space)
            }
            space = ""
            word = String.UnicodeScalarView()
        }
        for scalar in trimmed(text).unicodeScalars {
            if isWSP(scalar) {
                finishWord()
                space.unicodeScalars.append(scalar)
            } else {
                word.append(scalar)
            }
        }
        finishWord()
        flushRun()
    }

    /// Whether a word of unstructured text must be encoded: not printable ASCII, containing `=?` (a decoder would
    /// take it for an encoded word), or longer than a continuation line.
    static func needsEncoding(_ word: String) -> Bool {
        word.utf8.count > lineLimit - 2 || word.contains("=?")
            || !word.unicodeScalars.allSatisfy { $0.value > 0x20 && $0.value < 0x7F }
    }

    // MARK: Address fields

    /// A checked mailbox: its display name (trimmed, `nil` when empty) and addr-spec.
    struct Mailbox {
        var name: String?
        var spec: String
    }

    static func mailbox(_ address: MailAddress, field: ComposeField) throws(ComposeError) -> Mailbox {
        let spec = try addrSpec(address.address, field: field)
        var name: String?
        if let raw = address.name {
            try check(raw, field)
            // A tab in a name is written as a space: Python's address parser drops it even from an encoded word.
            let cleaned = trimmed(String(raw.map { $0 == "\t" ? " " : $0 }))
            name = cleaned.isEmpty ? nil : cleaned
        }
        return Mailbox(name: name, spec: spec)
    }

    /// Writes a display name: atoms when every word is atext separated by single spaces, a quoted string when it is
    /// other printable ASCII that fits a line, encoded words otherwise.
    static func appendDisplayName(_ name: String, after space: String, to field: inout Field) {
        let printable = name.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value < 0x7F }
        if printable && !name.contains("=?") {
            let words = name.split(separator: " ", omittingEmptySubsequences: false)
            if words.allSatisfy({ !$0.isEmpty && $0.unicodeScalars.allSatisfy(isAtext) })
                && words.allSatisfy({ $0.utf8.count <= lineLimit - 2 })
            {
                var separator = space
                for word in words {
                    field.append(String(word), after: separator)
                    separator = " "
                }
                return
            }
            let quotedName = quoted(name)
            if quotedName.utf8.count <= lineLimit - 2 {
                field.append(quotedName, after: space)
                return
            }
        }
        appendEncodedWords(name, after: space, to: &field)
    }

    /// Writes a comma-separated list of mailboxes.
    static func appendAddressList(_ mailboxes: [Mailbox], to field: inout Field) {
        for (index, mailbox) in mailboxes.enumerated() {
            let last = index == mailboxes.count - 1
            let comma = last ? "" : ","
            if let name = mailbox.name {
                appendDisplayName(name, after: " ", to: &field)
                field.append("<" + mailbox.spec + ">" + comma, after: " ")
            } else {
                field.append(mailbox.spec + comma, after: " ")
            }
        }
    }

    // MARK: Parameters

    /// Writes `; name=value` for a MIME parameter: a quoted string when the value is printable ASCII and fits a
    /// line, else RFC 2231 percent-encoded UTF-8, split into numbered sections when long. Sections end on
    /// character boundaries.
    static func appendParameter(_ name: String, _ value: String, to field: inout Field) {
        field.glue(";")
        let printable = value.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value < 0x7F }
        if printable && !value.isEmpty && !value.contains("=?") {
            // Always quoted: Python's parser misreads a token holding `'` (RFC 2231's delimiter).
            let written = name + "=" + quoted(value)
            if written.utf8.count <= lineLimit - 2 {
                field.append(written, after: " ", reserve: 1)
                return
            }
        }
        var sections: [String] = []
        var current = "utf-8''"
        let limit = lineLimit - 2 - name.utf8.count - 8  // room for " name*12*=" and ";"
        for scalar in value.unicodeScalars {
            var encoded = ""
            for byte in String(scalar).utf8 {
                if isAttributeCharacter(byte) {
                    encoded.unicodeScalars.append(Unicode.Scalar(byte))
                } else {
                    encoded +=
                        "%" + String(decoding: [hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 0x0F)]], as: UTF8.self)
                }
            }
            if current.utf8.count + encoded.utf8.count > limit && !current.isEmpty && current != "utf-8''" {
                sections.append(current)
                current = ""
            }
            current += encoded
        }
        sections.append(current)
        if sections.count == 1 {
            field.append(name + "*=" + sections[0], after: " ", reserve: 1)
            return
        }
        for (index, section) in sections.enumerated() {
            if index > 0 {
                field.glue(";")
            }
            field.append(name + "*\(index)*=" + section, after: " ", reserve: 1)
        }
    }

    /// RFC 2231 attribute-char: token characters except `*`, `'` and `%`.
    private static func isAttributeCharacter(_ byte: UInt8) -> Bool {
        byte < 0x80 && isTokenCharacter(Unicode.Scalar(byte)) && byte != UInt8(ascii: "*")
            && byte != UInt8(ascii: "'") && byte != UInt8(ascii: "%")
    }
}
