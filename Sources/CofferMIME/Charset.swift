import NIOConcurrencyHelpers

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Converts bytes in a MIME charset to text.
///
/// UTF-8, US-ASCII and ISO-8859-1 are decoded directly. Every other charset is looked up in an alias table and
/// handed to Foundation's converters; single-byte charsets are turned into a 256-entry table once so that bytes the
/// charset leaves undefined become U+FFFD instead of failing the whole text. Unknown charsets decode as UTF-8 with
/// replacement characters. Decoding never fails.
public enum Charset {
    private enum Kind: Sendable {
        case utf8
        case ascii
        case latin1
        /// A single-byte charset known to Foundation (raw `String.Encoding` value).
        case singleByte(UInt)
        /// A multi-byte charset known to Foundation (raw `String.Encoding` value).
        case multiByte(UInt)
    }

    /// Decodes `bytes` in the charset named `name` (any case, with or without quotes, aliases accepted).
    public static func decode(_ bytes: some Collection<UInt8>, charset name: String) -> String {
        switch kind(of: name) {
        case .utf8, nil:
            return String(decoding: bytes, as: UTF8.self)
        case .ascii:
            var scalars = String.UnicodeScalarView()
            for byte in bytes {
                scalars.append(byte < 0x80 ? Unicode.Scalar(byte) : "\u{FFFD}")
            }
            return String(scalars)
        case .latin1:
            var scalars = String.UnicodeScalarView()
            for byte in bytes {
                scalars.append(Unicode.Scalar(byte))
            }
            return String(scalars)
        case .singleByte(let raw):
            let table = singleByteTable(raw)
            var scalars = String.UnicodeScalarView()
            for byte in bytes {
                scalars.append(table[Int(byte)])
            }
            return String(scalars)
        case .multiByte(let raw):
            let array = Array(bytes)
            if let text = String(bytes: array, encoding: String.Encoding(rawValue: raw)) {
                return text
            }
            return String(decoding: array, as: UTF8.self)
        }
    }

    /// Decodes `bytes` as text in the charset `name` only when they are text in it: nil for bytes that are not
    /// valid UTF-8 (or ASCII, or the multi-byte charset) where that is declared. An unknown charset is read as
    /// UTF-8 and must be valid UTF-8. Single-byte charsets map every byte. RFC 2047 encoded words use this: a word
    /// that does not decode is shown as written (RFC 2047 section 6.3), not as replacement characters.
    static func decodeStrict(_ bytes: [UInt8], charset name: String) -> String? {
        switch kind(of: name) {
        case .utf8, nil:
            return String(validating: bytes, as: UTF8.self)
        case .ascii:
            return bytes.allSatisfy { $0 < 0x80 } ? decode(bytes, charset: name) : nil
        case .latin1, .singleByte:
            return decode(bytes, charset: name)
        case .multiByte(let raw):
            return String(bytes: bytes, encoding: String.Encoding(rawValue: raw))
        }
    }

    /// Whether `name` is a charset this module can decode (as opposed to falling back to UTF-8).
    public static func isKnown(_ name: String) -> Bool {
        kind(of: name) != nil
    }

    /// Decodes bytes whose charset was not declared: UTF-8 if they are valid UTF-8, Windows-1252 otherwise.
    static func decodeUndeclared(_ bytes: some Collection<UInt8>) -> String {
        let array = Array(bytes)
        if let text = String(validating: array, as: UTF8.self) {
            return text
        }
        return decode(array, charset: "windows-1252")
    }

    private static func normalize(_ name: String) -> String {
        var lowered = name.trimmingWhitespace().lowercased()
        if lowered.hasPrefix("\"") && lowered.hasSuffix("\"") && lowered.count >= 2 {
            lowered = String(lowered.dropFirst().dropLast())
        }
        // RFC 2231 allows a language suffix such as "iso-8859-1*fr".
        if let star = lowered.firstIndex(of: "*") {
            lowered = String(lowered[..<star])
        }
        return String(lowered.map { $0 == "_" ? "-" : $0 })
    }

    private static func kind(of name: String) -> Kind? {
        let key = normalize(name)
        if let kind = aliases[key] {
            return kind
        }
        if key.hasPrefix("x-"), let kind = aliases[String(key.dropFirst(2))] {
            return kind
        }
        return nil
    }

    // Raw values are CoreFoundation encoding numbers with the high bit set, which is how Foundation exposes them
    // as `String.Encoding` on every platform.
    private static func foundation(_ cf: UInt) -> UInt { 0x8000_0000 | cf }

    private static let aliases: [String: Kind] = {
        var table: [String: Kind] = [:]
        for name in ["utf-8", "utf8", "unicode-1-1-utf-8"] { table[name] = .utf8 }
        for name in ["us-ascii", "ascii", "ansi-x3.4-1968", "iso646-us", "iso-ir-6", "cp367", "646", "us"] {
            table[name] = .ascii
        }
        for name in ["iso-8859-1", "iso8859-1", "iso-8859-1:1987", "latin1", "latin-1", "l1", "iso-ir-100", "cp819"] {
            table[name] = .latin1
        }
        let iso: [(Int, UInt)] = [
            (2, 0x202), (3, 0x203), (4, 0x204), (5, 0x205), (6, 0x206), (7, 0x207), (8, 0x208), (9, 0x209),
            (10, 0x20A), (11, 0x20B), (13, 0x20D), (14, 0x20E), (15, 0x20F), (16, 0x210),
        ]
        for (number, cf) in iso {
            table["iso-8859-\(number)"] = .singleByte(foundation(cf))
            table["iso8859-\(number)"] = .singleByte(foundation(cf))
        }
        let latinNames: [(String, Int)] = [
            ("latin2", 2), ("latin-2", 2), ("l2", 2), ("latin3", 3), ("latin4", 4), ("cyrillic", 5), ("arabic", 6),
            ("greek", 7), ("hebrew", 8), ("latin5", 9), ("l5", 9), ("latin6", 10), ("thai", 11), ("tis-620", 11),
            ("latin7", 13), ("latin8", 14), ("latin9", 15), ("latin-9", 15), ("l9", 15), ("latin10", 16),
        ]
        for (name, number) in latinNames { table[name] = table["iso-8859-\(number)"] }
        let windows: [(Int, UInt)] = [
            (1250, 0x501), (1251, 0x502), (1252, 0x500), (1253, 0x503), (1254, 0x504), (1255, 0x505),
            (1256, 0x506), (1257, 0x507), (1258, 0x508),
        ]
        for (number, cf) in windows {
            table["windows-\(number)"] = .singleByte(foundation(cf))
            table["cp\(number)"] = .singleByte(foundation(cf))
            table["win-\(number)"] = .singleByte(foundation(cf))
        }
        let other: [(String, Kind)] = [
            ("koi8-r", .singleByte(foundation(0xA02))), ("koi8-u", .singleByte(foundation(0xA08))),
            ("cp437", .singleByte(foundation(0x400))), ("ibm437", .singleByte(foundation(0x400))),
            ("cp850", .singleByte(foundation(0x410))), ("ibm850", .singleByte(foundation(0x410))),
            ("cp852", .singleByte(foundation(0x411))), ("cp866", .singleByte(foundation(0x413))),
            ("ibm866", .singleByte(foundation(0x413))), ("macintosh", .singleByte(String.Encoding.macOSRoman.rawValue)),
            ("mac", .singleByte(String.Encoding.macOSRoman.rawValue)),
            ("shift-jis", .multiByte(foundation(0xA01))), ("sjis", .multiByte(foundation(0xA01))),
            ("ms-kanji", .multiByte(foundation(0xA01))), ("cp932", .multiByte(foundation(0x420))),
            ("windows-31j", .multiByte(foundation(0x420))), ("euc-jp", .multiByte(foundation(0x920))),
            ("iso-2022-jp", .multiByte(foundation(0x820))), ("gb2312", .multiByte(foundation(0x930))),
            ("euc-cn", .multiByte(foundation(0x930))), ("gbk", .multiByte(foundation(0x631))),
            ("cp936", .multiByte(foundation(0x631))), ("gb18030", .multiByte(foundation(0x632))),
            ("big5", .multiByte(foundation(0xA03))), ("big5-hkscs", .multiByte(foundation(0xA06))),
            ("euc-kr", .multiByte(foundation(0x940))), ("ks-c-5601-1987", .multiByte(foundation(0x422))),
            ("cp949", .multiByte(foundation(0x422))), ("iso-2022-kr", .multiByte(foundation(0x840))),
            ("utf-16", .multiByte(String.Encoding.utf16.rawValue)),
            ("utf-16be", .multiByte(String.Encoding.utf16BigEndian.rawValue)),
            ("utf-16le", .multiByte(String.Encoding.utf16LittleEndian.rawValue)),
            ("utf-32", .multiByte(String.Encoding.utf32.rawValue)),
            ("utf-32be", .multiByte(String.Encoding.utf32BigEndian.rawValue)),
            ("utf-32le", .multiByte(String.Encoding.utf32LittleEndian.rawValue)),
        ]
        for (name, kind) in other { table[name] = kind }
        return table
    }()

    private static let tables = NIOLockedValueBox<[UInt: [Unicode.Scalar]]>([:])

    private static func singleByteTable(_ raw: UInt) -> [Unicode.Scalar] {
        if let table = tables.withLockedValue({ $0[raw] }) {
            return table
        }
        let encoding = String.Encoding(rawValue: raw)
        var table = [Unicode.Scalar](repeating: "\u{FFFD}", count: 256)
        for byte in 0..<256 {
            if byte < 0x80 {
                table[byte] = Unicode.Scalar(UInt8(byte))
                continue
            }
            if let text = String(bytes: [UInt8(byte)], encoding: encoding), text.unicodeScalars.count == 1,
                let scalar = text.unicodeScalars.first
            {
                table[byte] = scalar
            }
        }
        tables.withLockedValue { $0[raw] = table }
        return table
    }
}
