/// A start or end tag token.
public struct HTMLTag: Sendable, Hashable {
    /// The tag name, ASCII-lowercased.
    public var name: String {
        didSet { id = HTMLTagID(name: name) }
    }
    /// The interned ``name``.
    public private(set) var id: HTMLTagID
    /// The attributes in source order; later duplicates are already dropped.
    public var attributes: [HTMLAttribute]
    /// Whether the tag ended in `/>`.
    public var selfClosing: Bool

    /// A tag whose id the caller has already interned.
    init(name: String, id: HTMLTagID) {
        self.name = name
        self.id = id
        self.attributes = []
        self.selfClosing = false
    }

    /// Creates a tag token.
    public init(name: String, attributes: [HTMLAttribute] = [], selfClosing: Bool = false) {
        self.name = name
        self.id = HTMLTagID(name: name)
        self.attributes = attributes
        self.selfClosing = selfClosing
    }
}

/// A DOCTYPE token.
public struct HTMLDoctype: Sendable, Hashable {
    /// The name, or `nil` when missing.
    public var name: String?
    /// The public identifier, or `nil` when missing.
    public var publicId: String?
    /// The system identifier, or `nil` when missing.
    public var systemId: String?
    /// The force-quirks flag.
    public var forceQuirks: Bool

    /// Creates a DOCTYPE token.
    public init(name: String? = nil, publicId: String? = nil, systemId: String? = nil, forceQuirks: Bool = false) {
        self.name = name
        self.publicId = publicId
        self.systemId = systemId
        self.forceQuirks = forceQuirks
    }
}

/// A token produced by ``HTMLTokenizer``.
public enum HTMLToken: Sendable, Hashable {
    /// A run of characters as UTF-8 bytes; never contains U+0000.
    case characters([UInt8])
    /// A U+0000 NULL character emitted in the data or CDATA section state.
    case nullCharacter
    /// A start tag.
    case startTag(HTMLTag)
    /// An end tag (attributes and the self-closing flag are dropped).
    case endTag(HTMLTag)
    /// A comment.
    case comment(String)
    /// A DOCTYPE.
    case doctype(HTMLDoctype)
    /// The end of the input.
    case endOfFile
}
