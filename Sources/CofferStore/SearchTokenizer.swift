import Foundation

/// Splits text into normalised search tokens: maximal runs of letters, digits and combining marks, lowercased and
/// (when not plain ASCII) put in Unicode NFC, so the same word always hashes the same. Tokens shorter than
/// ``minimumLength`` are dropped and longer ones cut to ``maximumLength`` bytes of UTF-8.
public enum SearchTokenizer {
    /// The shortest token indexed and searched (shorter words are ignored on both sides).
    public static let minimumLength = 2
    /// Tokens are cut to this many UTF-8 bytes.
    public static let maximumLength = 48

    /// Calls `body` with each token's UTF-8 bytes, in order (duplicates included).
    public static func forEachToken(in text: String, _ body: (ArraySlice<UInt8>) -> Void) {
        var token: [UInt8] = []
        token.reserveCapacity(maximumLength)
        var hasNonASCII = false
        var pending = String.UnicodeScalarView()

        func flush() {
            if hasNonASCII {
                let normalised = String(pending).lowercased().precomposedStringWithCanonicalMapping
                let utf8 = Array(normalised.utf8.prefix(maximumLength))
                if normalised.unicodeScalars.count >= minimumLength { body(utf8[...]) }
            } else if token.count >= minimumLength {
                body(token.prefix(maximumLength))
            }
            token.removeAll(keepingCapacity: true)
            pending.removeAll()
            hasNonASCII = false
        }

        for scalar in text.unicodeScalars {
            let value = scalar.value
            if value < 0x80 {
                let byte = UInt8(value)
                let lowered: UInt8?
                switch byte {
                case 0x61...0x7A, 0x30...0x39: lowered = byte
                case 0x41...0x5A: lowered = byte | 0x20
                default: lowered = nil
                }
                if let lowered {
                    if hasNonASCII { pending.append(scalar) } else { token.append(lowered) }
                } else if !token.isEmpty || hasNonASCII {
                    flush()
                }
                continue
            }
            let properties = scalar.properties
            let isWordPart: Bool
            if properties.isAlphabetic {
                isWordPart = true
            } else {
                switch properties.generalCategory {
                case .decimalNumber, .nonspacingMark, .spacingMark, .enclosingMark: isWordPart = true
                default: isWordPart = false
                }
            }
            if isWordPart {
                if !hasNonASCII {
                    hasNonASCII = true
                    pending = String.UnicodeScalarView(token.map { Unicode.Scalar($0) })
                }
                pending.append(scalar)
            } else if !token.isEmpty || hasNonASCII {
                flush()
            }
        }
        if !token.isEmpty || hasNonASCII { flush() }
    }

    /// The distinct tokens of `text`, in first-seen order.
    public static func tokens(in text: String) -> [String] {
        var seen = Set<[UInt8]>()
        var result: [String] = []
        forEachToken(in: text) { token in
            if seen.insert(Array(token)).inserted { result.append(String(decoding: token, as: UTF8.self)) }
        }
        return result
    }
}
