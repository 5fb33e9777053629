import Foundation

/// Paths and helpers shared by the conformance tests.
enum TestPaths {
    /// The repository root: three levels up from this file.
    static let repoRoot: URL = URL(fileURLWithPath: #filePath).resolvingSymlinksInPath()
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The html5lib-tests copy in the repository (`Tests/Fixtures/html5lib-tests`, with its LICENSE and SOURCE).
    static let html5lib: URL = repoRoot.appendingPathComponent("Tests/Fixtures/html5lib-tests")

    /// The conformance report listing every known failure.
    static let conformanceDoc: URL = repoRoot.appendingPathComponent("docs/html5-conformance.md")

    /// Sorted files with the given extension in a folder of the test data.
    static func files(in folder: String, ext: String) -> [URL] {
        let dir = html5lib.appendingPathComponent(folder)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []
        return names.filter { $0.hasSuffix("." + ext) }.sorted().map { dir.appendingPathComponent($0) }
    }
}

/// The known-failure ids listed in docs/html5-conformance.md: every line of the form
/// "- `id`: reason".
func loadKnownFailures() -> Set<String> {
    guard let text = try? String(contentsOf: TestPaths.conformanceDoc, encoding: .utf8) else { return [] }
    var ids = Set<String>()
    for line in text.split(separator: "\n") {
        guard line.hasPrefix("- `") else { continue }
        let rest = line.dropFirst(3)
        guard let end = rest.firstIndex(of: "`") else { continue }
        ids.insert(String(rest[rest.startIndex..<end]))
    }
    return ids
}

/// A minimal JSON value whose strings are kept as WTF-8 bytes, so that the lone surrogates
/// some html5lib tokenizer tests use survive decoding.
indirect enum JSONValue: Equatable {
    case string([UInt8])
    case number(Double)
    case bool(Bool)
    case null
    case array([JSONValue])
    case object([(key: [UInt8], value: JSONValue)])

    static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.string(let a), .string(let b)): return a == b
        case (.number(let a), .number(let b)): return a == b
        case (.bool(let a), .bool(let b)): return a == b
        case (.null, .null): return true
        case (.array(let a), .array(let b)): return a == b
        case (.object(let a), .object(let b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        default: return false
        }
    }

    subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        let bytes = Array(key.utf8)
        return members.first { $0.key == bytes }?.value
    }

    var bytes: [UInt8]? {
        if case .string(let value) = self { return value }
        return nil
    }

    var string: String? { bytes.map { String(decoding: $0, as: UTF8.self) } }

    var array: [JSONValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    var bool: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    var isNull: Bool {
        if case .null = self { return true }
        return false
    }
}

/// Appends `scalar` as UTF-8, encoding surrogates WTF-8 style.
func appendWTF8(_ scalar: UInt32, to out: inout [UInt8]) {
    if scalar < 0x80 {
        out.append(UInt8(scalar))
    } else if scalar < 0x800 {
        out.append(UInt8(0xC0 | (scalar >> 6)))
        out.append(UInt8(0x80 | (scalar & 0x3F)))
    } else if scalar < 0x10000 {
        out.append(UInt8(0xE0 | (scalar >> 12)))
        out.append(UInt8(0x80 | ((scalar >> 6) & 0x3F)))
        out.append(UInt8(0x80 | (scalar & 0x3F)))
    } else {
        out.append(UInt8(0xF0 | (scalar >> 18)))
        out.append(UInt8(0x80 | ((scalar >> 12) & 0x3F)))
        out.append(UInt8(0x80 | ((scalar >> 6) & 0x3F)))
        out.append(UInt8(0x80 | (scalar & 0x3F)))
    }
}

private func hexValue(_ bytes: ArraySlice<UInt8>) -> UInt32? {
    var value: UInt32 = 0
    for byte in bytes {
        let nibble: UInt32
        switch byte {
        case 0x30...0x39: nibble = UInt32(byte - 0x30)
        case 0x41...0x46: nibble = UInt32(byte - 0x41 + 10)
        case 0x61...0x66: nibble = UInt32(byte - 0x61 + 10)
        default: return nil
        }
        value = value << 4 | nibble
    }
    return value
}

/// Replaces `\uXXXX` escapes (combining surrogate pairs) in already decoded bytes, as the
/// tokenizer tests' `doubleEscaped` flag asks.
func unescapeDoubleEscaped(_ bytes: [UInt8]) -> [UInt8] {
    var out: [UInt8] = []
    var index = 0
    while index < bytes.count {
        if bytes[index] == 0x5C, index + 5 < bytes.count, bytes[index + 1] == 0x75,
            let high = hexValue(bytes[(index + 2)..<(index + 6)])
        {
            index += 6
            var scalar = high
            if high >= 0xD800 && high < 0xDC00, index + 5 < bytes.count, bytes[index] == 0x5C,
                bytes[index + 1] == 0x75, let low = hexValue(bytes[(index + 2)..<(index + 6)]),
                low >= 0xDC00 && low < 0xE000
            {
                scalar = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
                index += 6
            }
            appendWTF8(scalar, to: &out)
        } else {
            out.append(bytes[index])
            index += 1
        }
    }
    return out
}

/// A small JSON parser (enough for the html5lib test files).
struct JSONParser {
    private let bytes: [UInt8]
    private var index = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    static func parse(_ data: Data) -> JSONValue? {
        var parser = JSONParser([UInt8](data))
        return parser.value()
    }

    private mutating func skipSpace() {
        while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
    }

    private mutating func value() -> JSONValue? {
        skipSpace()
        guard index < bytes.count else { return nil }
        switch bytes[index] {
        case 0x7B:
            index += 1
            var members: [(key: [UInt8], value: JSONValue)] = []
            skipSpace()
            if index < bytes.count && bytes[index] == 0x7D {
                index += 1
                return .object(members)
            }
            while true {
                skipSpace()
                guard case .string(let key)? = value() else { return nil }
                skipSpace()
                guard index < bytes.count, bytes[index] == 0x3A else { return nil }
                index += 1
                guard let member = value() else { return nil }
                members.append((key, member))
                skipSpace()
                guard index < bytes.count else { return nil }
                if bytes[index] == 0x2C {
                    index += 1
                    continue
                }
                if bytes[index] == 0x7D {
                    index += 1
                    return .object(members)
                }
                return nil
            }
        case 0x5B:
            index += 1
            var elements: [JSONValue] = []
            skipSpace()
            if index < bytes.count && bytes[index] == 0x5D {
                index += 1
                return .array(elements)
            }
            while true {
                guard let element = value() else { return nil }
                elements.append(element)
                skipSpace()
                guard index < bytes.count else { return nil }
                if bytes[index] == 0x2C {
                    index += 1
                    continue
                }
                if bytes[index] == 0x5D {
                    index += 1
                    return .array(elements)
                }
                return nil
            }
        case 0x22:
            return string()
        case 0x74:
            index += 4
            return .bool(true)
        case 0x66:
            index += 5
            return .bool(false)
        case 0x6E:
            index += 4
            return .null
        default:
            let start = index
            while index < bytes.count, [0x2C, 0x5D, 0x7D, 0x20, 0x0A, 0x0D, 0x09].contains(bytes[index]) == false {
                index += 1
            }
            return .number(Double(String(decoding: bytes[start..<index], as: UTF8.self)) ?? 0)
        }
    }

    private mutating func string() -> JSONValue? {
        index += 1
        var out: [UInt8] = []
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            if byte == 0x22 { return .string(out) }
            guard byte == 0x5C, index < bytes.count else {
                out.append(byte)
                continue
            }
            let escape = bytes[index]
            index += 1
            switch escape {
            case 0x6E: out.append(0x0A)
            case 0x74: out.append(0x09)
            case 0x72: out.append(0x0D)
            case 0x62: out.append(0x08)
            case 0x66: out.append(0x0C)
            case 0x75:
                guard index + 4 <= bytes.count, let high = hexValue(bytes[index..<(index + 4)]) else { return nil }
                index += 4
                var scalar = high
                if high >= 0xD800 && high < 0xDC00, index + 6 <= bytes.count, bytes[index] == 0x5C,
                    bytes[index + 1] == 0x75, let low = hexValue(bytes[(index + 2)..<(index + 6)]),
                    low >= 0xDC00 && low < 0xE000
                {
                    scalar = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
                    index += 6
                }
                appendWTF8(scalar, to: &out)
            default: out.append(escape)
            }
        }
        return nil
    }
}

/// Collects pass/fail results of one conformance suite.
struct ConformanceTally {
    var passed = 0
    var total = 0
    var failures: [(id: String, detail: String)] = []

    mutating func record(_ id: String, passed ok: Bool, detail: @autoclosure () -> String) {
        total += 1
        if ok {
            passed += 1
        } else {
            failures.append((id, detail()))
        }
    }

    var rate: Double { total == 0 ? 0 : Double(passed) / Double(total) }

    /// Failures that are not listed in the conformance document.
    func unlisted(in known: Set<String>) -> [(id: String, detail: String)] {
        failures.filter { !known.contains($0.id) }
    }
}
