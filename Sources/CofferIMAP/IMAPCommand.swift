/// One argument of an IMAP command, encoded by `IMAPCommandEncoder`.
public enum IMAPArgument: Sendable, Equatable {
    /// Sent as is: a keyword, a number, a sequence set or a search key (checked: printable ASCII, no CR/LF).
    case atom(String)
    /// A string the encoder sends as an atom, a quoted string or a literal, whichever is valid (RFC 3501 astring).
    case string([UInt8])
    /// A string always sent as a literal (a password, a metadata value): never quoted, never in the line.
    case literal([UInt8])
    /// A string always sent as a quoted string (RFC 2971 ID fields and values, which may not be atoms): printable
    /// ASCII of at most ``IMAPCommandEncoder/maxQuotedLength`` bytes, refused otherwise (no CR, LF or NUL).
    case quoted([UInt8])
    /// A parenthesised list of arguments.
    case list([IMAPArgument])

    /// A string argument from text (UTF-8).
    public static func string(_ text: String) -> IMAPArgument { .string(Array(text.utf8)) }
}

/// An IMAP command: its name (`UID FETCH`, `LOGIN`, …) and its arguments.
public struct IMAPCommand: Sendable, Equatable {
    /// The command name as sent, such as `SELECT` or `UID STORE`.
    public var name: String
    /// The arguments, in order.
    public var arguments: [IMAPArgument]

    /// Creates a command.
    public init(_ name: String, _ arguments: [IMAPArgument] = []) {
        self.name = name
        self.arguments = arguments
    }
}

/// A command ready to send: its tag and the parts of its line. With synchronising literals each part after the
/// first may be sent only after the server's `+` continuation; with LITERAL+ there is a single part.
public struct EncodedCommand: Sendable, Equatable {
    /// The tag the server's completion will carry.
    public var tag: String
    /// The bytes to write; wait for `+` before each part after the first.
    public var parts: [[UInt8]]
}

/// Encodes commands with increasing tags, choosing atom, quoted string or literal for each string argument.
public struct IMAPCommandEncoder: Sendable {
    /// The tag prefix (`C` gives tags C1, C2, …).
    public let tagPrefix: String
    /// Use non-synchronising literals `{n+}` (RFC 7888): set when the server advertises LITERAL+.
    public var literalPlus: Bool
    private var counter: UInt64 = 0

    /// Quoted strings longer than this are sent as literals.
    public static let maxQuotedLength = 1024

    /// Creates an encoder.
    public init(tagPrefix: String = "C", literalPlus: Bool = false) {
        self.tagPrefix = tagPrefix
        self.literalPlus = literalPlus
    }

    /// Encodes a command with the next tag.
    ///
    /// - Throws: `IMAPError.unencodable` for an atom with a control byte or space, a string with a NUL byte, or a
    ///   quoted string that is not short printable ASCII.
    public mutating func encode(_ command: IMAPCommand) throws(IMAPError) -> EncodedCommand {
        counter += 1
        let tag = "\(tagPrefix)\(counter)"
        var parts: [[UInt8]] = []
        var current = Array("\(tag) \(command.name)".utf8)
        for argument in command.arguments {
            current.append(0x20)
            try append(argument, to: &current, parts: &parts)
        }
        current += [0x0D, 0x0A]
        parts.append(current)
        return EncodedCommand(tag: tag, parts: parts)
    }

    /// An IMAP line for a continuation reply such as `DONE` or an AUTHENTICATE response (no tag).
    public static func continuationLine(_ text: String) throws(IMAPError) -> [UInt8] {
        guard text.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else {
            throw .unencodable(reason: "a continuation line must be printable ASCII")
        }
        return Array(text.utf8) + [0x0D, 0x0A]
    }

    private func append(
        _ argument: IMAPArgument,
        to current: inout [UInt8],
        parts: inout [[UInt8]]
    ) throws(IMAPError) {
        switch argument {
        case .atom(let text):
            guard !text.isEmpty, text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                throw .unencodable(reason: "an atom must be non-empty printable ASCII without spaces")
            }
            current += Array(text.utf8)
        case .list(let items):
            current.append(UInt8(ascii: "("))
            for (offset, item) in items.enumerated() {
                if offset > 0 { current.append(0x20) }
                try append(item, to: &current, parts: &parts)
            }
            current.append(UInt8(ascii: ")"))
        case .string(let bytes):
            guard !bytes.contains(0) else { throw .unencodable(reason: "a string must not contain a NUL byte") }
            if !bytes.isEmpty, bytes.allSatisfy(Self.isAStringChar) {
                current += bytes
            } else if bytes.count <= Self.maxQuotedLength,
                bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7F })
            {
                appendQuoted(bytes, to: &current)
            } else {
                appendLiteral(bytes, to: &current, parts: &parts)
            }
        case .literal(let bytes):
            guard !bytes.contains(0) else { throw .unencodable(reason: "a literal must not contain a NUL byte") }
            appendLiteral(bytes, to: &current, parts: &parts)
        case .quoted(let bytes):
            guard bytes.count <= Self.maxQuotedLength, bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else {
                throw .unencodable(reason: "a quoted string must be printable ASCII of at most 1024 bytes")
            }
            appendQuoted(bytes, to: &current)
        }
    }

    private func appendQuoted(_ bytes: [UInt8], to current: inout [UInt8]) {
        current.append(UInt8(ascii: "\""))
        for byte in bytes {
            if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { current.append(UInt8(ascii: "\\")) }
            current.append(byte)
        }
        current.append(UInt8(ascii: "\""))
    }

    private func appendLiteral(_ bytes: [UInt8], to current: inout [UInt8], parts: inout [[UInt8]]) {
        current += Array("{\(bytes.count)\(literalPlus ? "+" : "")}\r\n".utf8)
        if !literalPlus {
            parts.append(current)
            current = []
        }
        current += bytes
    }

    /// ASTRING-CHAR: ATOM-CHAR or `]` (RFC 3501 §9).
    static func isAStringChar(_ byte: UInt8) -> Bool {
        if byte <= 0x20 || byte >= 0x7F { return false }
        switch byte {
        case UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "{"), UInt8(ascii: "%"), UInt8(ascii: "*"),
            UInt8(ascii: "\""), UInt8(ascii: "\\"):
            return false
        default:
            return true
        }
    }
}
