// The WHATWG HTML tokenizer (HTML Standard §13.2.5), working on preprocessed UTF-8 bytes.
//
// Every character that the state machine distinguishes is ASCII, so bytes of multi-byte
// UTF-8 sequences are simply carried through as "anything else". Character references are
// resolved inline instead of through their own states, which the whole-input design allows.

private let lowerA: UInt8 = 0x61
private let lowerZ: UInt8 = 0x7A
private let upperA: UInt8 = 0x41
private let upperZ: UInt8 = 0x5A

@inline(__always) private func isASCIIAlpha(_ c: UInt8) -> Bool {
    (c | 0x20) >= lowerA && (c | 0x20) <= lowerZ
}

@inline(__always) private func isASCIIUpper(_ c: UInt8) -> Bool { c >= upperA && c <= upperZ }

@inline(__always) private func isASCIIDigit(_ c: UInt8) -> Bool { c >= 0x30 && c <= 0x39 }

@inline(__always) private func isASCIIAlnum(_ c: UInt8) -> Bool { isASCIIAlpha(c) || isASCIIDigit(c) }

@inline(__always) private func isHexDigit(_ c: UInt8) -> Bool {
    isASCIIDigit(c) || ((c | 0x20) >= lowerA && (c | 0x20) <= 0x66)
}

/// Tab, LF, FF, space (CR never survives preprocessing).
@inline(__always) func isHTMLWhitespace(_ c: UInt8) -> Bool {
    c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0C || c == 0x0D
}

@inline(__always) private func toLower(_ c: UInt8) -> UInt8 { isASCIIUpper(c) ? c | 0x20 : c }

private let replacementBytes: [UInt8] = [0xEF, 0xBF, 0xBD]

/// Appends the UTF-8 encoding of `scalar` (surrogates are encoded WTF-8 style).
@inline(__always) func appendUTF8(_ scalar: UInt32, to buffer: inout [UInt8]) {
    if scalar < 0x80 {
        buffer.append(UInt8(scalar))
    } else if scalar < 0x800 {
        buffer.append(UInt8(0xC0 | (scalar >> 6)))
        buffer.append(UInt8(0x80 | (scalar & 0x3F)))
    } else if scalar < 0x10000 {
        buffer.append(UInt8(0xE0 | (scalar >> 12)))
        buffer.append(UInt8(0x80 | ((scalar >> 6) & 0x3F)))
        buffer.append(UInt8(0x80 | (scalar & 0x3F)))
    } else {
        buffer.append(UInt8(0xF0 | (scalar >> 18)))
        buffer.append(UInt8(0x80 | ((scalar >> 12) & 0x3F)))
        buffer.append(UInt8(0x80 | ((scalar >> 6) & 0x3F)))
        buffer.append(UInt8(0x80 | (scalar & 0x3F)))
    }
}

/// Normalises newlines (CR LF and CR become LF) and replaces ill-formed UTF-8 with U+FFFD,
/// following the WHATWG UTF-8 decoder's maximal-subpart rule. Encoded surrogates
/// (`ED A0..BF xx`) are passed through, as the HTML input stream allows surrogates.
func preprocessInput<C: Collection<UInt8>>(_ input: C) -> [UInt8] {
    if let array = input as? [UInt8] { return preprocessBytes(array) }
    return preprocessBytes(Array(input))
}

/// The index of the first byte at or after `start` that is not ASCII or is a CR (`input.count` when there is none),
/// eight bytes at a time: a word has such a byte when a high bit is set or when `word ^ 0x0D…` has a zero byte.
private func plainASCIIEnd(_ input: UnsafeBufferPointer<UInt8>, from start: Int) -> Int {
    let ones: UInt64 = 0x0101_0101_0101_0101
    let highs: UInt64 = 0x8080_8080_8080_8080
    var index = start
    if let base = input.baseAddress {
        while index + 8 <= input.count {
            let word = UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self)
            let carriageReturns = word ^ (ones &* 0x0D)
            if (word & highs) | ((carriageReturns &- ones) & ~carriageReturns & highs) != 0 { break }
            index += 8
        }
    }
    while index < input.count && input[index] < 0x80 && input[index] != 0x0D { index += 1 }
    return index
}

/// The non-generic worker of ``preprocessInput(_:)``.
func preprocessBytes(_ bytes: [UInt8]) -> [UInt8] {
    bytes.withUnsafeBufferPointer { input -> [UInt8] in
        let end = input.count
        // Fast path: ASCII without CR needs no copy-with-changes.
        let scan = plainASCIIEnd(input, from: 0)
        if scan == end { return bytes }
        var out: [UInt8] = []
        out.reserveCapacity(end + 16)
        out.append(contentsOf: input[0..<scan])
        var index = scan
        while index < end {
            let byte = input[index]
            if byte < 0x80 {
                if byte == 0x0D {
                    out.append(0x0A)
                    index += 1
                    if index < end && input[index] == 0x0A { index += 1 }
                    continue
                }
                // The run of ASCII up to the next CR or non-ASCII byte, in one copy.
                let runEnd = plainASCIIEnd(input, from: index)
                out.append(contentsOf: input[index..<runEnd])
                index = runEnd
                continue
            }
            var needed = 0
            var lower: UInt8 = 0x80
            var upper: UInt8 = 0xBF
            switch byte {
            case 0xC2...0xDF: needed = 1
            case 0xE0:
                needed = 2
                lower = 0xA0
            case 0xE1...0xEF: needed = 2
            case 0xF0:
                needed = 3
                lower = 0x90
            case 0xF1...0xF3: needed = 3
            case 0xF4:
                needed = 3
                upper = 0x8F
            default:
                out.append(contentsOf: replacementBytes)
                index += 1
                continue
            }
            var cursor = index + 1
            var seen = 0
            var valid = true
            while seen < needed {
                guard cursor < end else {
                    valid = false
                    break
                }
                let continuation = input[cursor]
                if continuation < lower || continuation > upper {
                    valid = false
                    break
                }
                lower = 0x80
                upper = 0xBF
                seen += 1
                cursor += 1
            }
            if valid {
                out.append(contentsOf: input[index..<cursor])
            } else {
                out.append(contentsOf: replacementBytes)
            }
            index = cursor
        }
        return out
    }
}

/// The WHATWG HTML tokenizer over UTF-8 bytes.
///
/// Call ``next()`` until it returns ``HTMLToken/endOfFile``. The tree builder switches
/// ``state`` after start tags such as `<script>` or `<textarea>`; a stand-alone user can set
/// the initial state and ``lastStartTag`` the same way.
public struct HTMLTokenizer: Sendable {
    /// The tokenizer states that a caller may switch to.
    public enum State: Sendable, Hashable {
        /// The data state.
        case data
        /// The RCDATA state (`title`, `textarea`).
        case rcdata
        /// The RAWTEXT state (`style`, `xmp`, `iframe`, `noembed`, `noframes`, `noscript` when scripting).
        case rawtext
        /// The script data state.
        case scriptData
        /// The PLAINTEXT state.
        case plaintext
        /// The CDATA section state.
        case cdataSection
    }

    private enum S: UInt8 {
        case data, rcdata, rawtext, scriptData, plaintext, tagOpen, endTagOpen, tagName
        case rcdataLessThan, rcdataEndTagOpen, rcdataEndTagName
        case rawtextLessThan, rawtextEndTagOpen, rawtextEndTagName
        case scriptDataLessThan, scriptDataEndTagOpen, scriptDataEndTagName
        case scriptDataEscapeStart, scriptDataEscapeStartDash, scriptDataEscaped, scriptDataEscapedDash
        case scriptDataEscapedDashDash, scriptDataEscapedLessThan, scriptDataEscapedEndTagOpen
        case scriptDataEscapedEndTagName, scriptDataDoubleEscapeStart, scriptDataDoubleEscaped
        case scriptDataDoubleEscapedDash, scriptDataDoubleEscapedDashDash, scriptDataDoubleEscapedLessThan
        case scriptDataDoubleEscapeEnd
        case beforeAttributeName, attributeName, afterAttributeName, beforeAttributeValue
        case attributeValueDoubleQuoted, attributeValueSingleQuoted, attributeValueUnquoted
        case afterAttributeValueQuoted, selfClosingStartTag, bogusComment, markupDeclarationOpen
        case commentStart, commentStartDash, comment, commentLessThan, commentLessThanBang
        case commentLessThanBangDash, commentLessThanBangDashDash, commentEndDash, commentEnd, commentEndBang
        case doctype, beforeDoctypeName, doctypeName, afterDoctypeName, afterDoctypePublicKeyword
        case beforeDoctypePublicId, doctypePublicIdDoubleQuoted, doctypePublicIdSingleQuoted
        case afterDoctypePublicId, betweenDoctypePublicAndSystemIds, afterDoctypeSystemKeyword
        case beforeDoctypeSystemId, doctypeSystemIdDoubleQuoted, doctypeSystemIdSingleQuoted
        case afterDoctypeSystemId, bogusDoctype, cdataSection, cdataSectionBracket, cdataSectionEnd
    }

    private let input: [UInt8]
    private var pos = 0
    private var s: S = .data
    private var finished = false

    private var text: [UInt8] = []
    private var queue: [HTMLToken] = []
    private var queueHead = 0

    private var tagName: [UInt8] = []
    private var tagIsEnd = false
    private var selfClosing = false
    /// The attributes of the tag being read: a scratch buffer reused from tag to tag; each start tag gets an exact-size
    /// copy, so that a tag's attributes cost one allocation, not one per doubling of the array.
    private var attributes: [HTMLAttribute] = []
    /// The names in `attributes`, to drop a repeated one.
    private var attributeNames = SeenNames()
    private var attrName: [UInt8] = []
    private var attrValue: [UInt8] = []
    private var hasAttr = false
    private var temp: [UInt8] = []
    private var commentData: [UInt8] = []
    private var doctypeName: [UInt8]?
    private var doctypePublic: [UInt8]?
    private var doctypeSystem: [UInt8]?
    private var forceQuirks = false
    private var lastStartTagBytes: [UInt8] = []

    /// Whether `<![CDATA[` starts a CDATA section; the tree builder sets this when the
    /// adjusted current node is not in the HTML namespace.
    public var allowCDATA = false

    /// Creates a tokenizer over `bytes`, which are normalised (newlines, ill-formed UTF-8) first.
    public init<C: Collection<UInt8>>(_ bytes: C, state: State = .data, lastStartTag: String? = nil) {
        self.input = preprocessInput(bytes)
        self.state = state
        if let lastStartTag { self.lastStartTag = lastStartTag }
    }

    /// Creates a tokenizer over already preprocessed bytes.
    init(preprocessed: [UInt8]) {
        self.input = preprocessed
    }

    /// The current state, as far as it is one of the public states; setting it switches state.
    public var state: State {
        get {
            switch s {
            case .rcdata: return .rcdata
            case .rawtext: return .rawtext
            case .scriptData: return .scriptData
            case .plaintext: return .plaintext
            case .cdataSection: return .cdataSection
            default: return .data
            }
        }
        set {
            switch newValue {
            case .data: s = .data
            case .rcdata: s = .rcdata
            case .rawtext: s = .rawtext
            case .scriptData: s = .scriptData
            case .plaintext: s = .plaintext
            case .cdataSection: s = .cdataSection
            }
        }
    }

    /// The name of the last start tag emitted, used for "appropriate end tag" checks.
    public var lastStartTag: String {
        get { String(decoding: lastStartTagBytes, as: UTF8.self) }
        set { lastStartTagBytes = Array(newValue.utf8) }
    }

    /// Returns the next token; ``HTMLToken/endOfFile`` once the input is exhausted (and
    /// again on every later call).
    public mutating func next() -> HTMLToken {
        while queueHead >= queue.count {
            queue.clear()
            queueHead = 0
            if finished { return .endOfFile }
            run()
        }
        let token = queue[queueHead]
        queueHead += 1
        return token
    }

    // MARK: - Emitting

    @inline(__always) private mutating func flushText() {
        if !text.isEmpty {
            // An exact-size copy, and the buffer is kept for the next run of text (as for attributes).
            queue.append(.characters(text.withUnsafeBufferPointer { Array($0) }))
            text.clear()
        }
    }

    private mutating func emit(_ token: HTMLToken) {
        flushText()
        queue.append(token)
    }

    private mutating func emitNull() {
        flushText()
        queue.append(.nullCharacter)
    }

    private mutating func emitEOF() {
        flushText()
        queue.append(.endOfFile)
        finished = true
    }

    private mutating func startTag(end: Bool) {
        tagName.clear()
        tagIsEnd = end
        selfClosing = false
        attributes.clear()
        attributeNames.removeAll()
        hasAttr = false
    }

    private mutating func startAttribute() {
        finishAttribute()
        attrName.clear()
        attrValue.clear()
        hasAttr = true
    }

    private mutating func finishAttribute() {
        guard hasAttr else { return }
        hasAttr = false
        let name = String(decoding: attrName, as: UTF8.self)
        guard attributeNames.insert(name) else { return }
        attributes.append(HTMLAttribute(name: name, value: String(decoding: attrValue, as: UTF8.self)))
    }

    private mutating func emitTag() {
        finishAttribute()
        let name = String(decoding: tagName, as: UTF8.self)
        if tagIsEnd {
            emit(.endTag(HTMLTag(name: name)))
        } else {
            lastStartTagBytes = tagName
            // Copied from a buffer pointer: an array built from a slice of the whole array would share its buffer.
            let copy = attributes.isEmpty ? [] : attributes.withUnsafeBufferPointer { Array($0) }
            emit(.startTag(HTMLTag(name: name, attributes: copy, selfClosing: selfClosing)))
        }
        attributes.clear()
        attributeNames.removeAll()
    }

    private mutating func emitComment() {
        emit(.comment(String(decoding: commentData, as: UTF8.self)))
    }

    private mutating func startDoctype() {
        doctypeName = nil
        doctypePublic = nil
        doctypeSystem = nil
        forceQuirks = false
    }

    private mutating func emitDoctype() {
        let token = HTMLDoctype(
            name: doctypeName.map { String(decoding: $0, as: UTF8.self) },
            publicId: doctypePublic.map { String(decoding: $0, as: UTF8.self) },
            systemId: doctypeSystem.map { String(decoding: $0, as: UTF8.self) },
            forceQuirks: forceQuirks
        )
        emit(.doctype(token))
    }

    @inline(__always) private var isAppropriateEndTag: Bool {
        !lastStartTagBytes.isEmpty && tagName == lastStartTagBytes
    }

    /// Whether the input at `pos` starts with `word` (ASCII case-insensitive when `fold`).
    private func lookingAt(_ word: StaticString, caseInsensitive fold: Bool) -> Bool {
        let count = word.utf8CodeUnitCount
        guard pos + count <= input.count else { return false }
        let pointer = word.utf8Start
        for offset in 0..<count {
            let expected = pointer[offset]
            let actual = input[pos + offset]
            if fold ? toLower(actual) != expected : actual != expected { return false }
        }
        return true
    }

    // MARK: - Character references

    /// Resolves a character reference; `pos` is just after the `&`. Appends the result to
    /// the attribute value or the text buffer.
    private mutating func characterReference(inAttribute: Bool) {
        let start = pos
        let count = input.count
        guard start < count else {
            appendRef(0x26, inAttribute)
            return
        }
        let first = input[start]
        if first == 0x23 {
            numericReference(inAttribute: inAttribute)
            return
        }
        guard isASCIIAlnum(first) else {
            appendRef(0x26, inAttribute)
            return
        }
        var end = start
        while end < count && isASCIIAlnum(input[end]) && end - start <= namedEntityMaxLength { end += 1 }
        let table = namedEntities
        var matchEnd = -1
        var expansion: [UInt8] = []
        if end < count && input[end] == 0x3B && end - start < namedEntityMaxLength,
            let found = table[input[start...end]]
        {
            matchEnd = end + 1
            expansion = found
        } else {
            var length = min(end - start, legacyEntityMaxLength)
            while length >= 2 {
                if let found = table[input[start..<(start + length)]] {
                    matchEnd = start + length
                    expansion = found
                    break
                }
                length -= 1
            }
        }
        guard matchEnd >= 0 else {
            appendRef(0x26, inAttribute)
            return
        }
        if inAttribute && input[matchEnd - 1] != 0x3B && matchEnd < count {
            let next = input[matchEnd]
            if next == 0x3D || isASCIIAlnum(next) {
                attrValue.append(0x26)
                return
            }
        }
        if inAttribute {
            attrValue.append(contentsOf: expansion)
        } else {
            text.append(contentsOf: expansion)
        }
        pos = matchEnd
    }

    @inline(__always) private mutating func appendRef(_ byte: UInt8, _ inAttribute: Bool) {
        if inAttribute { attrValue.append(byte) } else { text.append(byte) }
    }

    private mutating func numericReference(inAttribute: Bool) {
        // pos is at '#'.
        let count = input.count
        var cursor = pos + 1
        var hex = false
        if cursor < count && (input[cursor] | 0x20) == 0x78 {
            hex = true
            cursor += 1
        }
        let digitsStart = cursor
        var value: UInt32 = 0
        while cursor < count {
            let c = input[cursor]
            var digit: UInt32
            if isASCIIDigit(c) {
                digit = UInt32(c - 0x30)
            } else if hex && isHexDigit(c) {
                digit = UInt32((c | 0x20) - lowerA + 10)
            } else {
                break
            }
            if value <= 0x10FFFF {
                value = value * (hex ? 16 : 10) + digit
            } else {
                digit = 0
            }
            cursor += 1
        }
        guard cursor > digitsStart else {
            // No digits: the "&#" (and "x") are emitted as ordinary characters.
            appendRef(0x26, inAttribute)
            return
        }
        if cursor < count && input[cursor] == 0x3B { cursor += 1 }
        pos = cursor
        var scalar = value
        if scalar == 0 || scalar > 0x10FFFF || (scalar >= 0xD800 && scalar <= 0xDFFF) {
            scalar = 0xFFFD
        } else if scalar >= 0x80 && scalar <= 0x9F {
            let replacement = windows1252Replacements[Int(scalar - 0x80)]
            if replacement != 0 { scalar = replacement }
        }
        if inAttribute {
            appendUTF8(scalar, to: &attrValue)
        } else {
            appendUTF8(scalar, to: &text)
        }
    }

    // MARK: - The state machine

    /// Runs the state machine until at least one token is queued.
    private mutating func run() {
        let count = input.count
        while queue.isEmpty {
            guard pos < count else {
                eofInState()
                return
            }
            let c = input[pos]
            switch s {
            case .data:
                switch c {
                case 0x26:
                    pos += 1
                    characterReference(inAttribute: false)
                case 0x3C:
                    pos += 1
                    s = .tagOpen
                case 0:
                    pos += 1
                    emitNull()
                default:
                    let runStart = pos
                    pos += 1
                    while pos < count {
                        let d = input[pos]
                        if d == 0x3C || d == 0x26 || d == 0 { break }
                        pos += 1
                    }
                    text.append(contentsOf: input[runStart..<pos])
                }
            case .rcdata:
                switch c {
                case 0x26:
                    pos += 1
                    characterReference(inAttribute: false)
                case 0x3C:
                    pos += 1
                    s = .rcdataLessThan
                case 0:
                    pos += 1
                    text.append(contentsOf: replacementBytes)
                default:
                    let runStart = pos
                    pos += 1
                    while pos < count {
                        let d = input[pos]
                        if d == 0x3C || d == 0x26 || d == 0 { break }
                        pos += 1
                    }
                    text.append(contentsOf: input[runStart..<pos])
                }
            case .rawtext, .scriptData, .plaintext:
                if c == 0x3C && s != .plaintext {
                    pos += 1
                    s = s == .rawtext ? .rawtextLessThan : .scriptDataLessThan
                } else if c == 0 {
                    pos += 1
                    text.append(contentsOf: replacementBytes)
                } else {
                    let runStart = pos
                    pos += 1
                    while pos < count {
                        let d = input[pos]
                        if d == 0x3C || d == 0 { break }
                        pos += 1
                    }
                    text.append(contentsOf: input[runStart..<pos])
                }
            case .tagOpen:
                if c == 0x21 {
                    pos += 1
                    s = .markupDeclarationOpen
                } else if c == 0x2F {
                    pos += 1
                    s = .endTagOpen
                } else if isASCIIAlpha(c) {
                    startTag(end: false)
                    s = .tagName
                } else if c == 0x3F {
                    commentData.clear()
                    s = .bogusComment
                } else {
                    text.append(0x3C)
                    s = .data
                }
            case .endTagOpen:
                if isASCIIAlpha(c) {
                    startTag(end: true)
                    s = .tagName
                } else if c == 0x3E {
                    pos += 1
                    s = .data
                } else {
                    commentData.clear()
                    s = .bogusComment
                }
            case .tagName:
                pos += 1
                switch c {
                case 0x09, 0x0A, 0x0C, 0x20: s = .beforeAttributeName
                case 0x2F: s = .selfClosingStartTag
                case 0x3E:
                    s = .data
                    emitTag()
                case 0: tagName.append(contentsOf: replacementBytes)
                default:
                    tagName.append(toLower(c))
                    while pos < count {
                        let d = input[pos]
                        if d == 0x09 || d == 0x0A || d == 0x0C || d == 0x20 || d == 0x2F || d == 0x3E || d == 0 {
                            break
                        }
                        tagName.append(toLower(d))
                        pos += 1
                    }
                }
            case .rcdataLessThan, .rawtextLessThan:
                if c == 0x2F {
                    pos += 1
                    temp.clear()
                    s = s == .rcdataLessThan ? .rcdataEndTagOpen : .rawtextEndTagOpen
                } else {
                    text.append(0x3C)
                    s = s == .rcdataLessThan ? .rcdata : .rawtext
                }
            case .rcdataEndTagOpen, .rawtextEndTagOpen, .scriptDataEndTagOpen, .scriptDataEscapedEndTagOpen:
                if isASCIIAlpha(c) {
                    startTag(end: true)
                    switch s {
                    case .rcdataEndTagOpen: s = .rcdataEndTagName
                    case .rawtextEndTagOpen: s = .rawtextEndTagName
                    case .scriptDataEndTagOpen: s = .scriptDataEndTagName
                    default: s = .scriptDataEscapedEndTagName
                    }
                } else {
                    text.append(0x3C)
                    text.append(0x2F)
                    switch s {
                    case .rcdataEndTagOpen: s = .rcdata
                    case .rawtextEndTagOpen: s = .rawtext
                    case .scriptDataEndTagOpen: s = .scriptData
                    default: s = .scriptDataEscaped
                    }
                }
            case .rcdataEndTagName, .rawtextEndTagName, .scriptDataEndTagName, .scriptDataEscapedEndTagName:
                var handled = false
                switch c {
                case 0x09, 0x0A, 0x0C, 0x20:
                    if isAppropriateEndTag {
                        pos += 1
                        s = .beforeAttributeName
                        handled = true
                    }
                case 0x2F:
                    if isAppropriateEndTag {
                        pos += 1
                        s = .selfClosingStartTag
                        handled = true
                    }
                case 0x3E:
                    if isAppropriateEndTag {
                        pos += 1
                        s = .data
                        emitTag()
                        handled = true
                    }
                default:
                    if isASCIIAlpha(c) {
                        tagName.append(toLower(c))
                        temp.append(c)
                        pos += 1
                        handled = true
                    }
                }
                if !handled {
                    text.append(0x3C)
                    text.append(0x2F)
                    text.append(contentsOf: temp)
                    switch s {
                    case .rcdataEndTagName: s = .rcdata
                    case .rawtextEndTagName: s = .rawtext
                    case .scriptDataEndTagName: s = .scriptData
                    default: s = .scriptDataEscaped
                    }
                }
            case .scriptDataLessThan:
                if c == 0x2F {
                    pos += 1
                    temp.clear()
                    s = .scriptDataEndTagOpen
                } else if c == 0x21 {
                    pos += 1
                    text.append(0x3C)
                    text.append(0x21)
                    s = .scriptDataEscapeStart
                } else {
                    text.append(0x3C)
                    s = .scriptData
                }
            case .scriptDataEscapeStart, .scriptDataEscapeStartDash:
                if c == 0x2D {
                    pos += 1
                    text.append(0x2D)
                    s = s == .scriptDataEscapeStart ? .scriptDataEscapeStartDash : .scriptDataEscapedDashDash
                } else {
                    s = .scriptData
                }
            case .scriptDataEscaped:
                pos += 1
                switch c {
                case 0x2D:
                    text.append(0x2D)
                    s = .scriptDataEscapedDash
                case 0x3C: s = .scriptDataEscapedLessThan
                case 0: text.append(contentsOf: replacementBytes)
                default: text.append(c)
                }
            case .scriptDataEscapedDash:
                pos += 1
                switch c {
                case 0x2D:
                    text.append(0x2D)
                    s = .scriptDataEscapedDashDash
                case 0x3C: s = .scriptDataEscapedLessThan
                case 0:
                    text.append(contentsOf: replacementBytes)
                    s = .scriptDataEscaped
                default:
                    text.append(c)
                    s = .scriptDataEscaped
                }
            case .scriptDataEscapedDashDash:
                pos += 1
                switch c {
                case 0x2D: text.append(0x2D)
                case 0x3C: s = .scriptDataEscapedLessThan
                case 0x3E:
                    text.append(0x3E)
                    s = .scriptData
                case 0:
                    text.append(contentsOf: replacementBytes)
                    s = .scriptDataEscaped
                default:
                    text.append(c)
                    s = .scriptDataEscaped
                }
            case .scriptDataEscapedLessThan:
                if c == 0x2F {
                    pos += 1
                    temp.clear()
                    s = .scriptDataEscapedEndTagOpen
                } else if isASCIIAlpha(c) {
                    temp.clear()
                    text.append(0x3C)
                    s = .scriptDataDoubleEscapeStart
                } else {
                    text.append(0x3C)
                    s = .scriptDataEscaped
                }
            case .scriptDataDoubleEscapeStart, .scriptDataDoubleEscapeEnd:
                let isStart = s == .scriptDataDoubleEscapeStart
                switch c {
                case 0x09, 0x0A, 0x0C, 0x20, 0x2F, 0x3E:
                    pos += 1
                    text.append(c)
                    let isScript = temp == [0x73, 0x63, 0x72, 0x69, 0x70, 0x74]
                    if isStart {
                        s = isScript ? .scriptDataDoubleEscaped : .scriptDataEscaped
                    } else {
                        s = isScript ? .scriptDataEscaped : .scriptDataDoubleEscaped
                    }
                default:
                    if isASCIIAlpha(c) {
                        pos += 1
                        temp.append(toLower(c))
                        text.append(c)
                    } else {
                        s = isStart ? .scriptDataEscaped : .scriptDataDoubleEscaped
                    }
                }
            case .scriptDataDoubleEscaped:
                pos += 1
                switch c {
                case 0x2D:
                    text.append(0x2D)
                    s = .scriptDataDoubleEscapedDash
                case 0x3C:
                    text.append(0x3C)
                    s = .scriptDataDoubleEscapedLessThan
                case 0: text.append(contentsOf: replacementBytes)
                default: text.append(c)
                }
            case .scriptDataDoubleEscapedDash:
                pos += 1
                switch c {
                case 0x2D:
                    text.append(0x2D)
                    s = .scriptDataDoubleEscapedDashDash
                case 0x3C:
                    text.append(0x3C)
                    s = .scriptDataDoubleEscapedLessThan
                case 0:
                    text.append(contentsOf: replacementBytes)
                    s = .scriptDataDoubleEscaped
                default:
                    text.append(c)
                    s = .scriptDataDoubleEscaped
                }
            case .scriptDataDoubleEscapedDashDash:
                pos += 1
                switch c {
                case 0x2D: text.append(0x2D)
                case 0x3C:
                    text.append(0x3C)
                    s = .scriptDataDoubleEscapedLessThan
                case 0x3E:
                    text.append(0x3E)
                    s = .scriptData
                case 0:
                    text.append(contentsOf: replacementBytes)
                    s = .scriptDataDoubleEscaped
                default:
                    text.append(c)
                    s = .scriptDataDoubleEscaped
                }
            case .scriptDataDoubleEscapedLessThan:
                if c == 0x2F {
                    pos += 1
                    temp.clear()
                    text.append(0x2F)
                    s = .scriptDataDoubleEscapeEnd
                } else {
                    s = .scriptDataDoubleEscaped
                }
            case .beforeAttributeName:
                switch c {
                case 0x09, 0x0A, 0x0C, 0x20: pos += 1
                case 0x2F, 0x3E: s = .afterAttributeName
                case 0x3D:
                    pos += 1
                    startAttribute()
                    attrName.append(c)
                    s = .attributeName
                default:
                    startAttribute()
                    s = .attributeName
                }
            case .attributeName:
                switch c {
                case 0x09, 0x0A, 0x0C, 0x20, 0x2F, 0x3E: s = .afterAttributeName
                case 0x3D:
                    pos += 1
                    s = .beforeAttributeValue
                case 0:
                    pos += 1
                    attrName.append(contentsOf: replacementBytes)
                default:
                    pos += 1
                    attrName.append(toLower(c))
                }
            case .afterAttributeName:
                switch c {
                case 0x09, 0x0A, 0x0C, 0x20: pos += 1
                case 0x2F:
                    pos += 1
                    s = .selfClosingStartTag
                case 0x3D:
                    pos += 1
                    s = .beforeAttributeValue
                case 0x3E:
                    pos += 1
                    s = .data
                    emitTag()
                default:
                    startAttribute()
                    s = .attributeName
                }
            case .beforeAttributeValue:
                switch c {
                case 0x09, 0x0A, 0x0C, 0x20: pos += 1
                case 0x22:
                    pos += 1
                    s = .attributeValueDoubleQuoted
                case 0x27:
                    pos += 1
                    s = .attributeValueSingleQuoted
                case 0x3E:
                    pos += 1
                    s = .data
                    emitTag()
                default: s = .attributeValueUnquoted
                }
            case .attributeValueDoubleQuoted, .attributeValueSingleQuoted:
                let quote: UInt8 = s == .attributeValueDoubleQuoted ? 0x22 : 0x27
                pos += 1
                if c == quote {
                    s = .afterAttributeValueQuoted
                } else if c == 0x26 {
                    characterReference(inAttribute: true)
                } else if c == 0 {
                    attrValue.append(contentsOf: replacementBytes)
                } else {
                    let runStart = pos - 1
                    while pos < count {
                        let d = input[pos]
                        if d == quote || d == 0x26 || d == 0 { break }
                        pos += 1
                    }
                    attrValue.append(contentsOf: input[runStart..<pos])
                }
            case .attributeValueUnquoted:
                pos += 1
                switch c {
                case 0x09, 0x0A, 0x0C, 0x20: s = .beforeAttributeName
                case 0x26: characterReference(inAttribute: true)
                case 0x3E:
                    s = .data
                    emitTag()
                case 0: attrValue.append(contentsOf: replacementBytes)
                default: attrValue.append(c)
                }
            case .afterAttributeValueQuoted:
                switch c {
                case 0x09, 0x0A, 0x0C, 0x20:
                    pos += 1
                    s = .beforeAttributeName
                case 0x2F:
                    pos += 1
                    s = .selfClosingStartTag
                case 0x3E:
                    pos += 1
                    s = .data
                    emitTag()
                default: s = .beforeAttributeName
                }
            case .selfClosingStartTag:
                if c == 0x3E {
                    pos += 1
                    selfClosing = true
                    s = .data
                    emitTag()
                } else {
                    s = .beforeAttributeName
                }
            case .bogusComment:
                pos += 1
                if c == 0x3E {
                    s = .data
                    emitComment()
                } else if c == 0 {
                    commentData.append(contentsOf: replacementBytes)
                } else {
                    commentData.append(c)
                }
            case .markupDeclarationOpen:
                if lookingAt("--", caseInsensitive: false) {
                    pos += 2
                    commentData.clear()
                    s = .commentStart
                } else if lookingAt("doctype", caseInsensitive: true) {
                    pos += 7
                    s = .doctype
                } else if lookingAt("[CDATA[", caseInsensitive: false) {
                    pos += 7
                    if allowCDATA {
                        s = .cdataSection
                    } else {
                        commentData.clear()
                        commentData.append(contentsOf: Array("[CDATA[".utf8))
                        s = .bogusComment
                    }
                } else {
                    commentData.clear()
                    s = .bogusComment
                }
            case .commentStart:
                if c == 0x2D {
                    pos += 1
                    s = .commentStartDash
                } else if c == 0x3E {
                    pos += 1
                    s = .data
                    emitComment()
                } else {
                    s = .comment
                }
            case .commentStartDash:
                if c == 0x2D {
                    pos += 1
                    s = .commentEnd
                } else if c == 0x3E {
                    pos += 1
                    s = .data
                    emitComment()
                } else {
                    commentData.append(0x2D)
                    s = .comment
                }
            case .comment:
                pos += 1
                switch c {
                case 0x3C:
                    commentData.append(c)
                    s = .commentLessThan
                case 0x2D: s = .commentEndDash
                case 0: commentData.append(contentsOf: replacementBytes)
                default:
                    let runStart = pos - 1
                    while pos < count {
                        let d = input[pos]
                        if d == 0x3C || d == 0x2D || d == 0 { break }
                        pos += 1
                    }
                    commentData.append(contentsOf: input[runStart..<pos])
                }
            case .commentLessThan:
                if c == 0x21 {
                    pos += 1
                    commentData.append(c)
                    s = .commentLessThanBang
                } else if c == 0x3C {
                    pos += 1
                    commentData.append(c)
                } else {
                    s = .comment
                }
            case .commentLessThanBang:
                if c == 0x2D {
                    pos += 1
                    s = .commentLessThanBangDash
                } else {
                    s = .comment
                }
            case .commentLessThanBangDash:
                if c == 0x2D {
                    pos += 1
                    s = .commentLessThanBangDashDash
                } else {
                    s = .commentEndDash
                }
            case .commentLessThanBangDashDash:
                s = .commentEnd
            case .commentEndDash:
                if c == 0x2D {
                    pos += 1
                    s = .commentEnd
                } else {
                    commentData.append(0x2D)
                    s = .comment
                }
            case .commentEnd:
                if c == 0x3E {
                    pos += 1
                    s = .data
                    emitComment()
                } else if c == 0x21 {
                    pos += 1
                    s = .commentEndBang
                } else if c == 0x2D {
                    pos += 1
                    commentData.append(0x2D)
                } else {
                    commentData.append(0x2D)
                    commentData.append(0x2D)
                    s = .comment
                }
            case .commentEndBang:
                if c == 0x2D {
                    pos += 1
                    commentData.append(contentsOf: [0x2D, 0x2D, 0x21])
                    s = .commentEndDash
                } else if c == 0x3E {
                    pos += 1
                    s = .data
                    emitComment()
                } else {
                    commentData.append(contentsOf: [0x2D, 0x2D, 0x21])
                    s = .comment
                }
            case .doctype:
                switch c {
                case 0x09, 0x0A, 0x0C, 0x20:
                    pos += 1
                    s = .beforeDoctypeName
                default: s = .beforeDoctypeName
                }
            case .beforeDoctypeName:
                pos += 1
                switch c {
                case 0x09, 0x0A, 0x0C, 0x20: break
                case 0:
                    startDoctype()
                    doctypeName = replacementBytes
                    s = .doctypeName
                case 0x3E:
                    startDoctype()
                    forceQuirks = true
                    s = .data
                    emitDoctype()
                default:
                    startDoctype()
                    doctypeName = [toLower(c)]
                    s = .doctypeName
                }
            case .doctypeName:
                pos += 1
                switch c {
                case 0x09, 0x0A, 0x0C, 0x20: s = .afterDoctypeName
                case 0x3E:
                    s = .data
                    emitDoctype()
                case 0: doctypeName?.append(contentsOf: replacementBytes)
                default: doctypeName?.append(toLower(c))
                }
            case .afterDoctypeName:
                switch c {
                case 0x09, 0x0A, 0x0C, 0x20: pos += 1
                case 0x3E:
                    pos += 1
                    s = .data
                    emitDoctype()
                default:
                    if lookingAt("public", caseInsensitive: true) {
                        pos += 6
                        s = .afterDoctypePublicKeyword
                    } else if lookingAt("system", caseInsensitive: true) {
                        pos += 6
                        s = .afterDoctypeSystemKeyword
                    } else {
                        forceQuirks = true
                        s = .bogusDoctype
                    }
                }
            case .afterDoctypePublicKeyword, .beforeDoctypePublicId:
                let after = s == .afterDoctypePublicKeyword
                switch c {
                case 0x09, 0x0A, 0x0C, 0x20:
                    pos += 1
                    if after { s = .beforeDoctypePublicId }
                case 0x22, 0x27:
                    pos += 1
                    doctypePublic = []
                    s = c == 0x22 ? .doctypePublicIdDoubleQuoted : .doctypePublicIdSingleQuoted
                case 0x3E:
                    pos += 1
                    forceQuirks = true
                    s = .data
                    emitDoctype()
                default:
                    forceQuirks = true
                    s = .bogusDoctype
                }
            case .doctypePublicIdDoubleQuoted, .doctypePublicIdSingleQuoted:
                let quote: UInt8 = s == .doctypePublicIdDoubleQuoted ? 0x22 : 0x27
                pos += 1
                if c == quote {
                    s = .afterDoctypePublicId
                } else if c == 0 {
                    doctypePublic?.append(contentsOf: replacementBytes)
                } else if c == 0x3E {
                    forceQuirks = true
                    s = .data
                    emitDoctype()
                } else {
                    doctypePublic?.append(c)
                }
            case .afterDoctypePublicId, .betweenDoctypePublicAndSystemIds:
                switch c {
                case 0x09, 0x0A, 0x0C, 0x20:
                    pos += 1
                    s = .betweenDoctypePublicAndSystemIds
                case 0x3E:
                    pos += 1
                    s = .data
                    emitDoctype()
                case 0x22, 0x27:
                    pos += 1
                    doctypeSystem = []
                    s = c == 0x22 ? .doctypeSystemIdDoubleQuoted : .doctypeSystemIdSingleQuoted
                default:
                    forceQuirks = true
                    s = .bogusDoctype
                }
            case .afterDoctypeSystemKeyword, .beforeDoctypeSystemId:
                let after = s == .afterDoctypeSystemKeyword
                switch c {
                case 0x09, 0x0A, 0x0C, 0x20:
                    pos += 1
                    if after { s = .beforeDoctypeSystemId }
                case 0x22, 0x27:
                    pos += 1
                    doctypeSystem = []
                    s = c == 0x22 ? .doctypeSystemIdDoubleQuoted : .doctypeSystemIdSingleQuoted
                case 0x3E:
                    pos += 1
                    forceQuirks = true
                    s = .data
                    emitDoctype()
                default:
                    forceQuirks = true
                    s = .bogusDoctype
                }
            case .doctypeSystemIdDoubleQuoted, .doctypeSystemIdSingleQuoted:
                let quote: UInt8 = s == .doctypeSystemIdDoubleQuoted ? 0x22 : 0x27
                pos += 1
                if c == quote {
                    s = .afterDoctypeSystemId
                } else if c == 0 {
                    doctypeSystem?.append(contentsOf: replacementBytes)
                } else if c == 0x3E {
                    forceQuirks = true
                    s = .data
                    emitDoctype()
                } else {
                    doctypeSystem?.append(c)
                }
            case .afterDoctypeSystemId:
                switch c {
                case 0x09, 0x0A, 0x0C, 0x20: pos += 1
                case 0x3E:
                    pos += 1
                    s = .data
                    emitDoctype()
                default: s = .bogusDoctype
                }
            case .bogusDoctype:
                pos += 1
                if c == 0x3E {
                    s = .data
                    emitDoctype()
                }
            case .cdataSection:
                pos += 1
                if c == 0x5D {
                    s = .cdataSectionBracket
                } else if c == 0 {
                    emitNull()
                } else {
                    let runStart = pos - 1
                    while pos < count {
                        let d = input[pos]
                        if d == 0x5D || d == 0 { break }
                        pos += 1
                    }
                    text.append(contentsOf: input[runStart..<pos])
                }
            case .cdataSectionBracket:
                if c == 0x5D {
                    pos += 1
                    s = .cdataSectionEnd
                } else {
                    text.append(0x5D)
                    s = .cdataSection
                }
            case .cdataSectionEnd:
                if c == 0x5D {
                    pos += 1
                    text.append(0x5D)
                } else if c == 0x3E {
                    pos += 1
                    s = .data
                } else {
                    text.append(0x5D)
                    text.append(0x5D)
                    s = .cdataSection
                }
            }
        }
    }

    /// Handles the end of the input in the current state.
    private mutating func eofInState() {
        switch s {
        case .tagOpen:
            text.append(0x3C)
        case .endTagOpen:
            text.append(0x3C)
            text.append(0x2F)
        case .rcdataLessThan, .rawtextLessThan, .scriptDataLessThan:
            text.append(0x3C)
        case .rcdataEndTagOpen, .rawtextEndTagOpen, .scriptDataEndTagOpen, .scriptDataEscapedEndTagOpen:
            text.append(0x3C)
            text.append(0x2F)
        case .rcdataEndTagName, .rawtextEndTagName, .scriptDataEndTagName, .scriptDataEscapedEndTagName:
            text.append(0x3C)
            text.append(0x2F)
            text.append(contentsOf: temp)
        case .scriptDataEscapedLessThan:
            text.append(0x3C)
        case .markupDeclarationOpen:
            commentData.clear()
            emitComment()
        case .bogusComment, .commentStart, .commentStartDash, .comment, .commentLessThan, .commentLessThanBang,
            .commentLessThanBangDash, .commentLessThanBangDashDash, .commentEndDash, .commentEnd, .commentEndBang:
            emitComment()
        case .doctype, .beforeDoctypeName:
            startDoctype()
            forceQuirks = true
            emitDoctype()
        case .doctypeName, .afterDoctypeName, .afterDoctypePublicKeyword, .beforeDoctypePublicId,
            .doctypePublicIdDoubleQuoted, .doctypePublicIdSingleQuoted, .afterDoctypePublicId,
            .betweenDoctypePublicAndSystemIds, .afterDoctypeSystemKeyword, .beforeDoctypeSystemId,
            .doctypeSystemIdDoubleQuoted, .doctypeSystemIdSingleQuoted, .afterDoctypeSystemId:
            forceQuirks = true
            emitDoctype()
        case .bogusDoctype:
            emitDoctype()
        case .cdataSectionBracket:
            text.append(0x5D)
        case .cdataSectionEnd:
            text.append(0x5D)
            text.append(0x5D)
        default:
            break
        }
        emitEOF()
    }
}

/// Replacements for numeric references to C1 controls (0x80...0x9F); 0 means none.
private let windows1252Replacements: [UInt32] = [
    0x20AC, 0, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021, 0x02C6, 0x2030, 0x0160, 0x2039, 0x0152, 0,
    0x017D, 0, 0, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014, 0x02DC, 0x2122, 0x0161, 0x203A,
    0x0153, 0, 0x017E, 0x0178,
]

/// The longest entity name including its semicolon.
let namedEntityMaxLength = 32
/// The longest legacy (semicolon-less) entity name.
let legacyEntityMaxLength = 6

/// Named character references keyed by name (with the semicolon where required), as UTF-8.
let namedEntities: [ArraySlice<UInt8>: [UInt8]] = {
    var table: [ArraySlice<UInt8>: [UInt8]] = [:]
    table.reserveCapacity(2300)
    for line in namedEntitySource.utf8.split(separator: 0x0A) {
        let parts = line.split(separator: 0x20)
        guard let name = parts.first else { continue }
        var value: [UInt8] = []
        for part in parts.dropFirst() {
            var scalar: UInt32 = 0
            for digit in part {
                let nibble: UInt32 = digit <= 0x39 ? UInt32(digit - 0x30) : UInt32((digit | 0x20) - 0x61 + 10)
                scalar = scalar << 4 | nibble
            }
            appendUTF8(scalar, to: &value)
        }
        table[ArraySlice(Array(name))] = value
    }
    return table
}()

extension Array {
    /// Empties the array and keeps its storage, at no cost when it is empty already (`removeAll(keepingCapacity:)`
    /// goes through the general `replaceSubrange` even then, and the tokenizer clears its buffers on every tag).
    @inline(__always) mutating func clear() {
        if !isEmpty { removeAll(keepingCapacity: true) }
    }
}
