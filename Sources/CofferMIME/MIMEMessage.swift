#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One header field as it appeared in the message.
public struct HeaderField: Sendable, Hashable, Codable {
    /// The field name with its original capitalisation.
    public var name: String
    /// The value exactly as written after the colon (folding line breaks kept, raw bytes read as UTF-8).
    public var rawValue: String
    /// The value unfolded, with leading whitespace removed and RFC 2047 encoded words decoded.
    public var value: String

    /// Creates a header field.
    public init(name: String, rawValue: String, value: String) {
        self.name = name
        self.rawValue = rawValue
        self.value = value
    }

    /// The value unfolded but not RFC 2047 decoded, as structured parsers (addresses, dates, parameters) need.
    public var unfoldedValue: String {
        var result = String.UnicodeScalarView()
        var started = false
        for scalar in rawValue.unicodeScalars where scalar != "\r" && scalar != "\n" {
            if !started && (scalar == " " || scalar == "\t") {
                continue
            }
            started = true
            result.append(scalar)
        }
        return String(result)
    }

    /// Whether this field's name is `name`, ignoring the case of ASCII letters only.
    ///
    /// Field names are printable US-ASCII (RFC 5322, section 2.2), so no Unicode case folding applies: a name with
    /// another byte (a Kelvin sign for a "K", say) is a different name. Byte by byte, without Foundation's
    /// locale-aware comparison, which was about 4% of an import.
    public func hasName(_ name: String) -> Bool {
        let own = self.name.utf8
        let other = name.utf8
        guard own.count == other.count else { return false }
        for (left, right) in zip(own, other) where left != right {
            // ASCII letters differ from their other case only in bit 0x20.
            guard left ^ right == 0x20, (left | 0x20) >= 0x61, (left | 0x20) <= 0x7A else { return false }
        }
        return true
    }
}

/// A MIME media type with its parameters.
public struct ContentType: Sendable, Hashable, CustomStringConvertible {
    /// The lowercased top-level type, such as `text` or `multipart`.
    public var type: String
    /// The lowercased subtype, such as `plain` or `mixed`.
    public var subtype: String
    /// Parameters with lowercased names; RFC 2231 continuations are joined and decoded.
    public var parameters: [String: String]

    /// Creates a content type.
    public init(type: String, subtype: String, parameters: [String: String] = [:]) {
        self.type = type
        self.subtype = subtype
        self.parameters = parameters
    }

    /// `type/subtype`.
    public var mimeType: String { "\(type)/\(subtype)" }

    /// `type/subtype`.
    public var description: String { mimeType }

    /// The `charset` parameter, if present.
    public var charset: String? { parameters["charset"] }

    /// `text/plain`, the RFC 2045 default.
    public static let textPlain = ContentType(type: "text", subtype: "plain")
    /// `message/rfc822`, the default inside `multipart/digest`.
    public static let messageRFC822 = ContentType(type: "message", subtype: "rfc822")

    /// Parses a Content-Type value; an invalid media type yields `text/plain` (keeping the parameters).
    public static func parse(_ value: String) -> ContentType {
        let (main, parameters) = HeaderDecoding.parseParameterized(value)
        let pieces = main.lowercased().split(separator: "/", omittingEmptySubsequences: false)
        guard pieces.count == 2 else {
            return ContentType(type: "text", subtype: "plain", parameters: parameters)
        }
        return ContentType(type: String(pieces[0]), subtype: String(pieces[1]), parameters: parameters)
    }
}

/// The Content-Disposition of a part.
public struct ContentDisposition: Sendable, Hashable {
    /// The lowercased disposition type, usually `inline` or `attachment`.
    public var type: String
    /// Parameters with lowercased names; RFC 2231 continuations are joined and decoded.
    public var parameters: [String: String]

    /// Creates a disposition.
    public init(type: String, parameters: [String: String] = [:]) {
        self.type = type
        self.parameters = parameters
    }

    /// Whether the disposition type is `attachment`.
    public var isAttachment: Bool { type == "attachment" }
}

/// One node of a message's MIME tree.
public struct MIMEPart: Sendable, Hashable {
    /// The part's own header fields in order (for the root part these are the message headers).
    public var headers: [HeaderField]
    /// The effective content type (defaults applied).
    public var contentType: ContentType
    /// The Content-Disposition, if the part declares one.
    public var disposition: ContentDisposition?
    /// The lowercased Content-Transfer-Encoding; `7bit` when absent.
    public var transferEncoding: String
    /// The Content-ID without angle brackets, as used by `cid:` URLs.
    public var contentID: String?
    /// The body with the transfer encoding removed. Empty for multiparts. For an enclosed `message/rfc822` it holds
    /// the enclosed message's bytes (also parsed into `children`), except for messages enclosed in another enclosed
    /// message, whose bytes are already part of the outer one: keeping one copy keeps memory linear in the input.
    public var body: [UInt8]
    /// Sub-parts of a multipart, or the single root part of an enclosed `message/rfc822`.
    public var children: [MIMEPart]

    /// Creates a part.
    public init(
        headers: [HeaderField],
        contentType: ContentType,
        disposition: ContentDisposition? = nil,
        transferEncoding: String = "7bit",
        contentID: String? = nil,
        body: [UInt8] = [],
        children: [MIMEPart] = []
    ) {
        self.headers = headers
        self.contentType = contentType
        self.disposition = disposition
        self.transferEncoding = transferEncoding
        self.contentID = contentID
        self.body = body
        self.children = children
    }

    /// The first header field with this name (case-insensitive).
    public func header(_ name: String) -> HeaderField? {
        headers.first { $0.hasName(name) }
    }

    /// All header fields with this name (case-insensitive), in order.
    public func headers(named name: String) -> [HeaderField] {
        headers.filter { $0.hasName(name) }
    }

    /// Whether the part is a multipart container with parsed children.
    public var isMultipart: Bool { contentType.type == "multipart" && !children.isEmpty }

    /// Whether the part encloses another message (`message/rfc822` or `message/global`).
    public var isEnclosedMessage: Bool {
        contentType.type == "message" && (contentType.subtype == "rfc822" || contentType.subtype == "global")
    }

    /// The attachment file name: the disposition's `filename`, else the content type's `name`, decoded (RFC 2231
    /// and RFC 2047) and trimmed of surrounding whitespace.
    public var filename: String? {
        let raw = disposition?.parameters["filename"] ?? contentType.parameters["name"]
        guard let raw else {
            return nil
        }
        let decoded = raw.contains("=?") ? HeaderDecoding.decodeUnstructured(raw) : raw
        return decoded.trimmingWhitespace()
    }

    /// The body decoded to text for `text/*` parts (`nil` for other types). The declared charset is used; unknown
    /// charsets decode as UTF-8 with replacement characters. Without a declared charset, UTF-8 is assumed when the
    /// bytes are valid UTF-8 and Windows-1252 otherwise.
    public var text: String? {
        guard contentType.type == "text" else {
            return nil
        }
        return decodedText
    }

    /// The body decoded to text whatever the content type, using the same charset rules as `text`.
    public var decodedText: String {
        if let charset = contentType.charset, !charset.isEmpty {
            return Charset.decode(body, charset: charset)
        }
        return Charset.decodeUndeclared(body)
    }

    /// The part and all its descendants, depth first, parent before children.
    public var allParts: [MIMEPart] {
        var result: [MIMEPart] = []
        var stack: [MIMEPart] = [self]
        while let part = stack.popLast() {
            result.append(part)
            stack.append(contentsOf: part.children.reversed())
        }
        return result
    }
}

/// A parsed message: its header fields, the decoded values of the common ones, and its MIME tree.
public struct MIMEMessage: Sendable, Hashable {
    /// The root of the MIME tree; its headers are the message headers.
    public var root: MIMEPart
    /// Problems found while parsing that were worked around.
    public var defects: [MIMEDefect]

    /// Creates a message from its root part.
    public init(root: MIMEPart, defects: [MIMEDefect] = []) {
        self.root = root
        self.defects = defects
    }

    /// The message header fields in order.
    public var headers: [HeaderField] { root.headers }

    /// The first header field with this name (case-insensitive).
    public func header(_ name: String) -> HeaderField? { root.header(name) }

    /// The decoded Subject, trimmed, or `nil` when absent.
    public var subject: String? { root.header("Subject").map { $0.value.trimmingWhitespace() } }

    private func addresses(_ name: String) -> [MailAddress] {
        root.headers(named: name).flatMap { MailAddress.parseList($0.unfoldedValue) }
    }

    /// The From mailboxes.
    public var from: [MailAddress] { addresses("From") }
    /// The Sender mailbox(es).
    public var sender: [MailAddress] { addresses("Sender") }
    /// The Reply-To mailboxes.
    public var replyTo: [MailAddress] { addresses("Reply-To") }
    /// The To mailboxes (groups flattened; `group` names the group).
    public var to: [MailAddress] { addresses("To") }
    /// The Cc mailboxes.
    public var cc: [MailAddress] { addresses("Cc") }
    /// The Bcc mailboxes.
    public var bcc: [MailAddress] { addresses("Bcc") }

    /// The Date header as an instant, or `nil` when absent or unparseable. A date without a zone is taken as UTC.
    public var date: Date? { root.header("Date").flatMap { DateParsing.parse($0.unfoldedValue) } }

    /// The Message-ID without angle brackets.
    public var messageID: String? {
        guard let value = root.header("Message-ID")?.unfoldedValue else {
            return nil
        }
        return Self.messageIDs(value).first ?? (value.trimmingWhitespace().isEmpty ? nil : value.trimmingWhitespace())
    }

    /// The message IDs in In-Reply-To, without angle brackets.
    public var inReplyTo: [String] { root.header("In-Reply-To").map { Self.messageIDs($0.unfoldedValue) } ?? [] }

    /// The message IDs in References, without angle brackets, oldest first.
    public var references: [String] { root.header("References").map { Self.messageIDs($0.unfoldedValue) } ?? [] }

    /// Extracts every `<...>` message ID from a header value.
    static func messageIDs(_ value: String) -> [String] {
        var result: [String] = []
        var current: String.UnicodeScalarView?
        for scalar in value.unicodeScalars {
            if scalar == "<" {
                current = String.UnicodeScalarView()
            } else if scalar == ">" {
                if let id = current, !id.isEmpty {
                    result.append(String(id))
                }
                current = nil
            } else if scalar != " " && scalar != "\t" {
                current?.append(scalar)
            }
        }
        return result
    }

    /// Leaves in reading order, not descending into enclosed messages.
    private var bodyLeaves: [MIMEPart] {
        var result: [MIMEPart] = []
        var stack: [MIMEPart] = [root]
        while let part = stack.popLast() {
            if part.isMultipart {
                stack.append(contentsOf: part.children.reversed())
            } else {
                result.append(part)
            }
        }
        return result
    }

    private static func isBody(_ part: MIMEPart, _ subtype: String) -> Bool {
        part.contentType.type == "text" && part.contentType.subtype == subtype
            && !(part.disposition?.isAttachment ?? false) && part.filename == nil
    }

    /// The first `text/plain` leaf that is not an attachment, decoded to text.
    public var textBody: String? { bodyLeaves.first { Self.isBody($0, "plain") }?.text }

    /// The first `text/html` leaf that is not an attachment, decoded to text.
    public var htmlBody: String? { bodyLeaves.first { Self.isBody($0, "html") }?.text }

    /// Leaves with a file name or an `attachment` disposition, and inline parts with a Content-ID (such as images
    /// referenced by `cid:` URLs). Enclosed messages are listed as single attachments, not descended into; the
    /// parts chosen as `textBody` and `htmlBody` are never listed.
    public var attachments: [MIMEPart] {
        let leaves = bodyLeaves
        let text = leaves.firstIndex { Self.isBody($0, "plain") }
        let html = leaves.firstIndex { Self.isBody($0, "html") }
        return leaves.indices.compactMap { index in
            let part = leaves[index]
            if index == text || index == html {
                return nil
            }
            let listed = part.filename != nil || (part.disposition?.isAttachment ?? false) || part.contentID != nil
            return listed ? part : nil
        }
    }
}
