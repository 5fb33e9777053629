import Testing

@testable import CofferContent

/// ``ByteScan`` reads eight bytes at a time: a byte it looks for is found at every place, in a word or in the tail,
/// and text without one passes, whatever the other bytes (non-ASCII ones included) are.
@Suite("Byte scans")
struct ByteScanTests {
    /// Text of `length` bytes from `filler` (ASCII letters and the two bytes of `é`), with `mark` at `position`.
    private func text(length: Int, mark: String? = nil, at position: Int = 0) -> String {
        var bytes = Array(String(repeating: "é", count: length / 2).utf8) + (length % 2 == 1 ? [0x7A] : [])
        if let mark { bytes.replaceSubrange(position..<position + mark.utf8.count, with: Array(mark.utf8)) }
        return String(decoding: bytes, as: UTF8.self)
    }

    @Test func eachScanFindsItsBytesAtEveryPosition() {
        for length in 0...40 {
            let plain = text(length: length)
            #expect(!ByteScan.contains(plain, byteBelow: 0x21), "\(length)")
            #expect(!ByteScan.contains(plain, anyOf: 0x0D, 0x0C, 0), "\(length)")
            #expect(ByteScan.containsNonASCII(plain) == (length > 1), "\(length)")
            #expect(!ByteScan.containsNonASCII(String(repeating: "~", count: length)), "\(length)")
            for position in 0..<length {
                for mark in [" ", "\t", "\u{0}", "\u{20}"] {
                    #expect(ByteScan.contains(text(length: length, mark: mark, at: position), byteBelow: 0x21))
                }
                #expect(!ByteScan.contains(text(length: length, mark: "!", at: position), byteBelow: 0x21))
                for mark in ["\r", "\u{0C}", "\u{0}"] {
                    #expect(ByteScan.contains(text(length: length, mark: mark, at: position), anyOf: 0x0D, 0x0C, 0))
                }
                #expect(!ByteScan.contains(text(length: length, mark: "\n", at: position), anyOf: 0x0D, 0x0C, 0))
                let ascii = String(repeating: "a", count: position) + "é" + String(repeating: "b", count: length)
                #expect(ByteScan.containsNonASCII(ascii), "\(length) \(position)")
            }
        }
    }
}
