/// Content-Transfer-Encoding and RFC 2047 byte decoders. All are lenient, linear-time and never fail.
package enum TransferDecoding {
    private static let base64Values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        for (index, byte) in alphabet.enumerated() {
            table[Int(byte)] = UInt8(index)
        }
        return table
    }()

    /// ``base64(_:)`` of an array, specialized in this module for callers in others (the generic one, called from
    /// another module, runs unspecialized: several times slower).
    package static func base64(bytes input: [UInt8]) -> [UInt8] { base64(input) }

    /// Decodes base64, skipping characters outside the alphabet (line breaks, spaces, garbage). Decoding stops at
    /// padding that completes a quantum; a trailing partial quantum of two or three characters is still decoded.
    static func base64(_ input: some Collection<UInt8>) -> [UInt8] {
        let values = base64Values
        let decoded = input.withContiguousStorageIfAvailable { base64($0, values: values) }
        return decoded ?? Array(input).withUnsafeBufferPointer { base64($0, values: values) }
    }

    private static func base64(_ input: UnsafeBufferPointer<UInt8>, values: [UInt8]) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: input.count / 4 * 3 + 3) { output, written in
            values.withUnsafeBufferPointer { values in
                var at = 0
                var quantum: UInt32 = 0
                var count = 0
                for byte in input {
                    if byte == UInt8(ascii: "=") {
                        if count >= 2 {
                            break
                        }
                        continue
                    }
                    let value = values[Int(byte)]
                    if value == 0xFF {
                        continue
                    }
                    quantum = quantum << 6 | UInt32(value)
                    count += 1
                    if count == 4 {
                        output[at] = UInt8(truncatingIfNeeded: quantum >> 16)
                        output[at + 1] = UInt8(truncatingIfNeeded: quantum >> 8)
                        output[at + 2] = UInt8(truncatingIfNeeded: quantum)
                        at += 3
                        quantum = 0
                        count = 0
                    }
                }
                if count == 2 {
                    output[at] = UInt8(truncatingIfNeeded: quantum >> 4)
                    at += 1
                } else if count == 3 {
                    output[at] = UInt8(truncatingIfNeeded: quantum >> 10)
                    output[at + 1] = UInt8(truncatingIfNeeded: quantum >> 2)
                    at += 2
                }
                written = at
            }
        }
    }

    /// Whether `byte` is in the base64 alphabet (padding excluded).
    static func isBase64Character(_ byte: UInt8) -> Bool {
        base64Values[Int(byte)] != 0xFF
    }

    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        default: return nil
        }
    }

    /// Decodes quoted-printable. With `header` set (RFC 2047 "Q"), underscores become spaces.
    ///
    /// Malformed escapes are kept literally, `=` followed by a line break is a soft line break, and a lone `=` at
    /// the very end is dropped (the same rules as Python's `binascii.a2b_qp`).
    static func quotedPrintable(_ input: some Collection<UInt8>, header: Bool = false) -> [UInt8] {
        let bytes = Array(input)
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var index = 0
        let end = bytes.count
        while index < end {
            let byte = bytes[index]
            if byte == UInt8(ascii: "=") {
                index += 1
                if index >= end {
                    break
                }
                let next = bytes[index]
                if next == UInt8(ascii: "\n") || next == UInt8(ascii: "\r") {
                    while index < end && bytes[index] != UInt8(ascii: "\n") {
                        index += 1
                    }
                    if index < end {
                        index += 1
                    }
                } else if next == UInt8(ascii: "=") {
                    output.append(UInt8(ascii: "="))
                    index += 1
                } else if index + 1 < end, let high = hexValue(next), let low = hexValue(bytes[index + 1]) {
                    output.append(high << 4 | low)
                    index += 2
                } else {
                    output.append(UInt8(ascii: "="))
                }
            } else if header && byte == UInt8(ascii: "_") {
                output.append(UInt8(ascii: " "))
                index += 1
            } else {
                output.append(byte)
                index += 1
            }
        }
        return output
    }

    /// Decodes RFC 2231 percent-encoding (`%XX`); malformed escapes are kept literally.
    static func percent(_ input: some Collection<UInt8>) -> [UInt8] {
        let bytes = Array(input)
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.count,
                let high = hexValue(bytes[index + 1]), let low = hexValue(bytes[index + 2])
            {
                output.append(high << 4 | low)
                index += 3
            } else {
                output.append(bytes[index])
                index += 1
            }
        }
        return output
    }
}
