/// Scans of UTF-8 text eight bytes at a time, for the checks the sanitizer runs on every attribute value and style:
/// whether a value holds a byte that needs the slow path at all. A word `w` has a zero byte exactly when
/// `(w - 0x01…) & ~w & 0x80…` is non-zero; a byte below `n` (at most 0x80) exactly when `(w - n·0x01…) & ~w & 0x80…`
/// is; a byte equal to `b` is a zero byte of `w ^ b·0x01…`.
enum ByteScan {
    private static let ones: UInt64 = 0x0101_0101_0101_0101
    private static let highs: UInt64 = 0x8080_8080_8080_8080

    /// Whether some byte of `text` is below `limit`, which is at most 0x80.
    static func contains(_ text: String, byteBelow limit: UInt8) -> Bool {
        precondition(limit <= 0x80)
        let subtrahend = ones &* UInt64(limit)
        return scan(text) {
            ($0 &- subtrahend) & ~$0 & highs != 0
        } tail: {
            $0 < limit
        }
    }

    /// Whether some byte of `text` equals `first`, `second` or `third` (repeat a value to look for fewer).
    static func contains(_ text: String, anyOf first: UInt8, _ second: UInt8, _ third: UInt8) -> Bool {
        let masks = (ones &* UInt64(first), ones &* UInt64(second), ones &* UInt64(third))
        func hasZero(_ word: UInt64) -> Bool { (word &- ones) & ~word & highs != 0 }
        return scan(text) { word in
            hasZero(word ^ masks.0) || hasZero(word ^ masks.1) || hasZero(word ^ masks.2)
        } tail: {
            $0 == first || $0 == second || $0 == third
        }
    }

    /// Whether some byte of `text` is not ASCII.
    static func containsNonASCII(_ text: String) -> Bool {
        scan(text) {
            $0 & highs != 0
        } tail: {
            $0 >= 0x80
        }
    }

    private static func scan(_ text: String, word: (UInt64) -> Bool, tail: (UInt8) -> Bool) -> Bool {
        var text = text
        return text.withUTF8 { bytes in
            guard let base = bytes.baseAddress else { return false }
            var index = 0
            while index + 8 <= bytes.count {
                if word(UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self)) { return true }
                index += 8
            }
            return bytes[index...].contains(where: tail)
        }
    }
}
