extension HTMLSerializer {
    /// A token for ``HTMLSerializer/serializeTokens(_:options:)``.
    public enum Token: Sendable, Hashable {
        /// A start tag; `empty` marks a void element written without an end tag.
        case startTag(name: String, namespace: HTMLNamespace = .html, attributes: [HTMLAttribute], empty: Bool = false)
        /// An end tag.
        case endTag(name: String, namespace: HTMLNamespace = .html)
        /// Character data.
        case characters(String)
        /// A comment.
        case comment(String)
        /// A DOCTYPE.
        case doctype(name: String, publicId: String?, systemId: String?)
    }

    /// How attribute values are quoted.
    public enum AttributeQuoting: Sendable, Hashable {
        /// Always quote.
        case always
        /// Quote only values that need it (empty, or containing whitespace, quotes, `=`, `>` or a backtick).
        case whenNeeded
    }

    /// Options for ``HTMLSerializer/serializeTokens(_:options:)``; the defaults match
    /// html5lib's serializer.
    public struct Options: Sendable, Hashable {
        /// How attribute values are quoted.
        public var quoteAttributeValues: AttributeQuoting = .whenNeeded
        /// The preferred quote character, `"` or `'`.
        public var quoteCharacter: Character = "\""
        /// Whether to switch quote characters to avoid escaping.
        public var useBestQuoteCharacter = true
        /// Whether optional start and end tags are omitted.
        public var omitOptionalTags = true
        /// Whether boolean attributes are written as a bare name.
        public var minimizeBooleanAttributes = true
        /// Whether void elements are written with a trailing `/`.
        public var useTrailingSolidus = false
        /// Whether a space precedes the trailing `/`.
        public var spaceBeforeTrailingSolidus = true
        /// Whether text inside raw text elements (`script`, `style`, …) is escaped.
        public var escapeRawText = false
        /// Whether runs of whitespace outside `pre`, `textarea` and raw text elements collapse.
        public var stripWhitespace = false
        /// When set, a `<meta charset>` naming this encoding is injected into (or updated in) `head`.
        public var injectMetaCharset: String?

        /// Creates the default options.
        public init() {}
    }

    /// Serializes a token stream.
    public static func serializeTokens(_ tokens: [Token], options: Options = Options()) -> String {
        var stream = splitSpaceCharacters(tokens)
        if let encoding = options.injectMetaCharset { stream = injectMeta(stream, encoding: encoding) }
        if options.stripWhitespace { stream = collapseWhitespace(stream) }
        if options.omitOptionalTags { stream = omitOptional(stream) }
        var out: [UInt8] = []
        var inRawText = false
        for token in stream {
            switch token.token {
            case .doctype(let name, let publicId, let systemId):
                out.append(contentsOf: Array("<!DOCTYPE ".utf8))
                out.append(contentsOf: name.utf8)
                let publicId = publicId?.isEmpty == false ? publicId : nil
                let systemId = systemId?.isEmpty == false ? systemId : nil
                if let publicId {
                    out.append(contentsOf: Array(" PUBLIC \"".utf8))
                    out.append(contentsOf: publicId.utf8)
                    out.append(0x22)
                } else if systemId != nil {
                    out.append(contentsOf: Array(" SYSTEM".utf8))
                }
                if let systemId {
                    let quote: UInt8 = systemId.utf8.contains(0x22) ? 0x27 : 0x22
                    out.append(0x20)
                    out.append(quote)
                    out.append(contentsOf: systemId.utf8)
                    out.append(quote)
                }
                out.append(0x3E)
            case .characters(let text):
                if inRawText && !options.escapeRawText {
                    out.append(contentsOf: text.utf8)
                } else {
                    escapeText(text, into: &out)
                }
            case .startTag(let name, let namespace, let attributes, let empty):
                if namespace == .html && (rawTextElements.contains(HTMLTagID(name: name)) || name == "noscript") {
                    inRawText = true
                }
                out.append(0x3C)
                out.append(contentsOf: name.utf8)
                for attribute in attributes {
                    out.append(0x20)
                    out.append(contentsOf: attribute.name.utf8)
                    if options.minimizeBooleanAttributes && isBooleanAttribute(attribute.name, element: name) {
                        continue
                    }
                    out.append(0x3D)
                    appendAttributeValue(attribute.value, options: options, into: &out)
                }
                if empty && voidElements.contains(HTMLTagID(name: name)) && options.useTrailingSolidus {
                    if options.spaceBeforeTrailingSolidus { out.append(0x20) }
                    out.append(0x2F)
                }
                out.append(0x3E)
            case .endTag(let name, _):
                inRawText = false
                out.append(contentsOf: [0x3C, 0x2F])
                out.append(contentsOf: name.utf8)
                out.append(0x3E)
            case .comment(let data):
                out.append(contentsOf: Array("<!--".utf8))
                out.append(contentsOf: data.utf8)
                out.append(contentsOf: Array("-->".utf8))
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func escapeText(_ text: String, into out: inout [UInt8]) {
        for byte in text.utf8 {
            switch byte {
            case 0x26: out.append(contentsOf: Array("&amp;".utf8))
            case 0x3C: out.append(contentsOf: Array("&lt;".utf8))
            case 0x3E: out.append(contentsOf: Array("&gt;".utf8))
            default: out.append(byte)
            }
        }
    }

    private static func appendAttributeValue(_ value: String, options: Options, into out: inout [UInt8]) {
        let bytes = Array(value.utf8)
        var quote: UInt8?
        let needsQuotes =
            options.quoteAttributeValues == .always || bytes.isEmpty
            || bytes.contains {
                isHTMLWhitespace($0) || $0 == 0x22 || $0 == 0x27 || $0 == 0x3D || $0 == 0x3E || $0 == 0x60
            }
        if needsQuotes {
            var chosen: UInt8 = options.quoteCharacter == "'" ? 0x27 : 0x22
            if options.useBestQuoteCharacter {
                let hasSingle = bytes.contains(0x27)
                let hasDouble = bytes.contains(0x22)
                if hasSingle && !hasDouble {
                    chosen = 0x22
                } else if hasDouble && !hasSingle {
                    chosen = 0x27
                }
            }
            quote = chosen
        }
        if let quote { out.append(quote) }
        for byte in bytes {
            switch byte {
            case 0x26: out.append(contentsOf: Array("&amp;".utf8))
            case 0x3C: out.append(contentsOf: Array("&lt;".utf8))
            case 0x3E: out.append(contentsOf: Array("&gt;".utf8))
            case 0x22 where quote == 0x22: out.append(contentsOf: Array("&quot;".utf8))
            case 0x27 where quote == 0x27: out.append(contentsOf: Array("&#39;".utf8))
            default: out.append(byte)
            }
        }
        if let quote { out.append(quote) }
    }

    private static let booleanAttributes: [String: Set<String>] = [
        "": ["irrelevant", "itemscope"], "style": ["scoped"], "img": ["ismap"], "audio": ["autoplay", "controls"],
        "video": ["autoplay", "controls"], "script": ["defer", "async"], "details": ["open"],
        "datagrid": ["multiple", "disabled"], "command": ["hidden", "disabled", "checked", "default"],
        "hr": ["noshade"], "menu": ["autosubmit"], "fieldset": ["disabled", "readonly"],
        "option": ["disabled", "readonly", "selected"], "optgroup": ["disabled", "readonly"],
        "button": ["disabled", "autofocus"],
        "input": ["disabled", "readonly", "required", "autofocus", "checked", "ismap"],
        "select": ["disabled", "readonly", "autofocus", "multiple"], "output": ["disabled", "readonly"],
        "iframe": ["seamless"],
    ]

    private static func isBooleanAttribute(_ name: String, element: String) -> Bool {
        (booleanAttributes[element]?.contains(name) ?? false) || (booleanAttributes[""]?.contains(name) ?? false)
    }

    // MARK: - Filters

    /// A token with a flag telling whether it is a whitespace-only character token.
    private struct StreamToken {
        var token: Token
        var isSpace = false
    }

    private static func splitSpaceCharacters(_ tokens: [Token]) -> [StreamToken] {
        var out: [StreamToken] = []
        for token in tokens {
            guard case .characters(let text) = token else {
                out.append(StreamToken(token: token))
                continue
            }
            let bytes = Array(text.utf8)
            var start = 0
            while start < bytes.count && isHTMLWhitespace(bytes[start]) { start += 1 }
            var end = bytes.count
            while end > start && isHTMLWhitespace(bytes[end - 1]) { end -= 1 }
            if start > 0 {
                out.append(
                    StreamToken(token: .characters(String(decoding: bytes[0..<start], as: UTF8.self)), isSpace: true)
                )
            }
            if end > start {
                out.append(StreamToken(token: .characters(String(decoding: bytes[start..<end], as: UTF8.self))))
            }
            if end > start && end < bytes.count {
                out.append(
                    StreamToken(token: .characters(String(decoding: bytes[end...], as: UTF8.self)), isSpace: true)
                )
            }
        }
        return out
    }

    private static func collapseWhitespace(_ tokens: [StreamToken]) -> [StreamToken] {
        var preserve = 0
        var out: [StreamToken] = []
        for var item in tokens {
            switch item.token {
            case .startTag(let name, _, _, _):
                if preserve > 0 || name == "pre" || name == "textarea"
                    || rawTextElements.contains(HTMLTagID(name: name))
                    || name == "noscript"
                {
                    preserve += 1
                }
            case .endTag:
                if preserve > 0 { preserve -= 1 }
            case .characters(let text) where preserve == 0:
                if item.isSpace {
                    if !text.isEmpty { item.token = .characters(" ") }
                } else {
                    var bytes: [UInt8] = []
                    for byte in text.utf8 {
                        if isHTMLWhitespace(byte) {
                            if bytes.last != 0x20 || bytes.isEmpty { bytes.append(0x20) }
                        } else {
                            bytes.append(byte)
                        }
                    }
                    item.token = .characters(String(decoding: bytes, as: UTF8.self))
                }
            default:
                break
            }
            out.append(item)
        }
        return out
    }

    private static func injectMeta(_ tokens: [StreamToken], encoding: String) -> [StreamToken] {
        var out: [StreamToken] = []
        var inHead = false
        var metaFound = false
        var pending: [StreamToken] = []
        let meta = StreamToken(
            token: .startTag(
                name: "meta",
                attributes: [HTMLAttribute(name: "charset", value: encoding)],
                empty: true
            )
        )
        for var item in tokens {
            switch item.token {
            case .startTag(let name, let namespace, var attributes, let empty):
                if !empty && name.lowercasedASCII == "head" {
                    inHead = true
                } else if empty && name.lowercasedASCII == "meta" {
                    var hasContentType = false
                    var replaced = false
                    for index in attributes.indices where attributes[index].namespace == nil {
                        let attributeName = attributes[index].name
                        if attributeName.lowercasedASCII == "charset" {
                            attributes[index].value = encoding
                            metaFound = true
                            replaced = true
                            break
                        } else if attributeName == "http-equiv"
                            && attributes[index].value.lowercasedASCII == "content-type"
                        {
                            hasContentType = true
                        }
                    }
                    if !replaced && hasContentType,
                        let index = attributes.firstIndex(where: { $0.name == "content" && $0.namespace == nil })
                    {
                        attributes[index].value = "text/html; charset=" + encoding
                        metaFound = true
                    }
                    item.token = .startTag(name: name, namespace: namespace, attributes: attributes, empty: empty)
                } else if empty && name.lowercasedASCII == "head" && !metaFound {
                    out.append(StreamToken(token: .startTag(name: "head", attributes: attributes)))
                    out.append(meta)
                    out.append(StreamToken(token: .endTag(name: "head")))
                    metaFound = true
                    continue
                }
            case .endTag(let name, _):
                if name.lowercasedASCII == "head" && !pending.isEmpty {
                    out.append(pending.removeFirst())
                    if !metaFound { out.append(meta) }
                    out.append(contentsOf: pending)
                    pending = []
                    metaFound = true
                    inHead = false
                }
            default:
                break
            }
            if inHead {
                pending.append(item)
            } else {
                out.append(item)
            }
        }
        out.append(contentsOf: pending)
        return out
    }

    private static func omitOptional(_ tokens: [StreamToken]) -> [StreamToken] {
        var out: [StreamToken] = []
        for index in tokens.indices {
            let item = tokens[index]
            let previous = index > 0 ? tokens[index - 1] : nil
            let next = index + 1 < tokens.count ? tokens[index + 1] : nil
            switch item.token {
            case .startTag(let name, _, let attributes, let empty) where !empty:
                if attributes.isEmpty && isOptionalStart(name, previous: previous, next: next) { continue }
            case .endTag(let name, _):
                if isOptionalEnd(name, next: next) { continue }
            default:
                break
            }
            out.append(item)
        }
        return out
    }

    private enum Kind {
        case start(String)
        case empty(String)
        case end(String)
        case comment
        case space
        case characters
        case doctype
        case none
    }

    private static func kind(_ item: StreamToken?) -> Kind {
        guard let item else { return .none }
        switch item.token {
        case .startTag(let name, _, _, let empty): return empty ? .empty(name) : .start(name)
        case .endTag(let name, _): return .end(name)
        case .comment: return .comment
        case .characters: return item.isSpace ? .space : .characters
        case .doctype: return .doctype
        }
    }

    private static func isOptionalStart(_ name: String, previous: StreamToken?, next: StreamToken?) -> Bool {
        let nextKind = kind(next)
        switch name {
        case "html":
            switch nextKind {
            case .comment, .space: return false
            default: return true
            }
        case "head":
            switch nextKind {
            case .start, .empty: return true
            case .end(let nextName): return nextName == "head"
            default: return false
            }
        case "body":
            switch nextKind {
            case .comment, .space: return false
            case .start(let nextName): return nextName != "script" && nextName != "style"
            default: return true
            }
        case "colgroup":
            switch nextKind {
            case .start(let nextName), .empty(let nextName): return nextName == "col"
            default: return false
            }
        case "tbody":
            guard case .start(let nextName) = nextKind else { return false }
            if case .end(let previousName) = kind(previous), ["tbody", "thead", "tfoot"].contains(previousName) {
                return false
            }
            return nextName == "tr"
        default:
            return false
        }
    }

    private static let pClosers: Set<String> = [
        "address", "article", "aside", "blockquote", "datagrid", "dialog", "dir", "div", "dl", "fieldset", "footer",
        "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "menu", "nav", "ol", "p", "pre", "section",
        "table", "ul",
    ]

    private static func isOptionalEnd(_ name: String, next: StreamToken?) -> Bool {
        let nextKind = kind(next)
        var endOrNone: Bool {
            switch nextKind {
            case .end, .none: return true
            default: return false
            }
        }
        switch name {
        case "html", "head", "body":
            switch nextKind {
            case .comment, .space: return false
            default: return true
            }
        case "li", "optgroup", "tr":
            if case .start(let nextName) = nextKind { return nextName == name }
            return endOrNone
        case "dt", "dd":
            if case .start(let nextName) = nextKind { return nextName == "dt" || nextName == "dd" }
            return name == "dd" && endOrNone
        case "p":
            switch nextKind {
            case .start(let nextName), .empty(let nextName): return pClosers.contains(nextName)
            default: return endOrNone
            }
        case "option":
            if case .start(let nextName) = nextKind { return nextName == "option" || nextName == "optgroup" }
            return endOrNone
        case "rt", "rp":
            if case .start(let nextName) = nextKind { return nextName == "rt" || nextName == "rp" }
            return endOrNone
        case "colgroup":
            switch nextKind {
            case .comment, .space: return false
            case .start(let nextName): return nextName != "colgroup"
            default: return true
            }
        case "thead", "tbody":
            if case .start(let nextName) = nextKind { return nextName == "tbody" || nextName == "tfoot" }
            return name == "tbody" && endOrNone
        case "tfoot":
            if case .start(let nextName) = nextKind { return nextName == "tbody" }
            return endOrNone
        case "td", "th":
            if case .start(let nextName) = nextKind { return nextName == "td" || nextName == "th" }
            return endOrNone
        default:
            return false
        }
    }
}
