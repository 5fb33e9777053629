/// Small helpers for the byte formats in `docs/FORMAT.md`.
extension Array where Element == UInt8 {
    /// Appends `value` as big-endian bytes.
    mutating func appendBigEndian<T: FixedWidthInteger>(_ value: T) {
        var big = value.bigEndian
        Swift.withUnsafeBytes(of: &big) { append(contentsOf: $0) }
    }

    /// Lower-case hexadecimal.
    public var hexString: String {
        let digits = Swift.Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(count * 2)
        for byte in self {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Parses lower- or upper-case hexadecimal; `nil` for odd lengths or other characters.
    public init?(hexString: String) {
        let utf8 = Swift.Array(hexString.utf8)
        guard utf8.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(utf8.count / 2)
        var index = 0
        while index < utf8.count {
            guard let high = Self.nibble(utf8[index]), let low = Self.nibble(utf8[index + 1]) else { return nil }
            out.append(high << 4 | low)
            index += 2
        }
        self = out
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: c - 0x30
        case 0x61...0x66: c - 0x61 + 10
        case 0x41...0x46: c - 0x41 + 10
        default: nil
        }
    }
}

/// Reads big-endian integers from a byte buffer with bounds checks.
struct ByteReader {
    private let bytes: [UInt8]
    private(set) var offset: Int

    init(_ bytes: [UInt8], offset: Int = 0) {
        self.bytes = bytes
        self.offset = offset
    }

    var remaining: Int { bytes.count - offset }

    mutating func read(_ count: Int) throws(CofferCryptoError) -> ArraySlice<UInt8> {
        guard count >= 0, remaining >= count else { throw .truncated }
        defer { offset += count }
        return bytes[offset..<offset + count]
    }

    mutating func readByte() throws(CofferCryptoError) -> UInt8 { try read(1).first! }

    mutating func readBigEndian<T: FixedWidthInteger>(_: T.Type) throws(CofferCryptoError) -> T {
        var value: T = 0
        for byte in try read(MemoryLayout<T>.size) { value = value << 8 | T(byte) }
        return value
    }
}
