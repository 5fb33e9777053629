import Foundation

/// Mailbox names in IMAP's modified UTF-7 (RFC 3501 5.1.3): what a server sends and expects, against the text a
/// person reads.
public enum MailboxName {
    /// The name as sent to the server: printable ASCII as is, `&` as `&-`, every other run as `&`, modified
    /// base64 of its UTF-16 (`,` for `/`, no padding), `-`.
    public static func encode(_ name: String) -> String {
        var out: [UInt8] = []
        var pending: [UInt16] = []
        func flush() {
            guard !pending.isEmpty else { return }
            var bytes: [UInt8] = []
            for unit in pending { bytes += [UInt8(unit >> 8), UInt8(unit & 0xFF)] }
            // Modified base64: the standard alphabet with `,` for `/`, and no `=` padding.
            let base64 = Data(bytes).base64EncodedString().replacingOccurrences(of: "/", with: ",")
            out.append(UInt8(ascii: "&"))
            out += base64.utf8.filter { $0 != UInt8(ascii: "=") }
            out.append(UInt8(ascii: "-"))
            pending = []
        }
        for scalar in name.unicodeScalars {
            if (0x20...0x7E).contains(scalar.value) {
                flush()
                out.append(UInt8(scalar.value))
                if scalar == "&" { out.append(UInt8(ascii: "-")) }
            } else {
                pending += Array(String(scalar).utf16)
            }
        }
        flush()
        return String(decoding: out, as: UTF8.self)
    }

    /// The name a server sent, decoded for people; nil when it is not valid modified UTF-7 (a raw 8-bit byte, a
    /// bad base64 run, a lone surrogate).
    public static func decode(_ wire: String) -> String? {
        let bytes = Array(wire.utf8)
        var out = ""
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            guard (0x20...0x7E).contains(byte) else { return nil }
            guard byte == UInt8(ascii: "&") else {
                out.unicodeScalars.append(Unicode.Scalar(byte))
                index += 1
                continue
            }
            guard let end = bytes[(index + 1)...].firstIndex(of: UInt8(ascii: "-")) else { return nil }
            if end == index + 1 {
                out += "&"
                index = end + 1
                continue
            }
            var run = String(decoding: bytes[(index + 1)..<end], as: UTF8.self)
            guard !run.contains("/"), !run.contains("=") else { return nil }
            run = run.replacingOccurrences(of: ",", with: "/")
            while run.utf8.count % 4 != 0 { run += "=" }
            guard let decodedBytes = Data(base64Encoded: run) else { return nil }
            let data = Array(decodedBytes)
            guard data.count % 2 == 0, !data.isEmpty else { return nil }
            var units: [UInt16] = []
            for pair in stride(from: 0, to: data.count, by: 2) {
                units.append(UInt16(data[pair]) << 8 | UInt16(data[pair + 1]))
            }
            var decoded = ""
            var iterator = units.makeIterator()
            var utf16 = UTF16()
            decoding: while true {
                switch utf16.decode(&iterator) {
                case .scalarValue(let scalar): decoded.unicodeScalars.append(scalar)
                case .emptyInput: break decoding
                case .error: return nil
                }
            }
            out += decoded
            index = end + 1
        }
        return out
    }
}
