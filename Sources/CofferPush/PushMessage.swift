import CofferModel
import Foundation

extension PushMessage {
    /// The JSON bytes, with subject, sender and folder cut (at character boundaries) until they fit `maximum`.
    ///
    /// The bytes are those `JSONEncoder` writes with `[.sortedKeys, .withoutEscapingSlashes]` (the tests compare
    /// them), written by hand into one buffer: this runs for every push.
    public func encoded(maximum: Int = WebPush.maximumPlaintextLength) -> [UInt8] {
        var message = self
        for _ in 0..<64 {
            let data = message.json()
            if data.count <= maximum { return data }
            message.subject = message.subject.map { String($0.prefix($0.count / 2)) }
            message.from = message.from.map { String($0.prefix($0.count / 2)) }
            message.folder = message.folder.map { String($0.prefix($0.count / 2)) }
        }
        return Array(#"{"type":"new-mail","v":1}"#.utf8)
    }

    /// The compact JSON with sorted keys, as `JSONEncoder` with `[.sortedKeys, .withoutEscapingSlashes]` writes it.
    func json() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(
            160 + (folder?.utf8.count ?? 0) + (from?.utf8.count ?? 0) + (subject?.utf8.count ?? 0)
        )
        out.append(UInt8(ascii: "{"))
        var first = true
        func key(_ name: StaticString) {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            out.append(UInt8(ascii: "\""))
            out.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
            out.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: ":")])
        }
        if let fastSync {
            key("fastSync")
            out.append(contentsOf: Array(#"{"expires":"#.utf8))
            out.append(contentsOf: String(fastSync.expires).utf8)
            out.append(contentsOf: Array(#","kek":"#.utf8))
            Self.appendString(fastSync.kek, to: &out)
            out.append(UInt8(ascii: "}"))
        }
        if let folder {
            key("folder")
            Self.appendString(folder, to: &out)
        }
        if let from {
            key("from")
            Self.appendString(from, to: &out)
        }
        if let subject {
            key("subject")
            Self.appendString(subject, to: &out)
        }
        key("type")
        Self.appendString(type, to: &out)
        if let uid {
            key("uid")
            out.append(contentsOf: String(uid).utf8)
        }
        if let uidValidity {
            key("uidValidity")
            out.append(contentsOf: String(uidValidity).utf8)
        }
        key("v")
        out.append(contentsOf: String(v).utf8)
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// A JSON string: `"` and `\` escaped, the C0 controls as `\b \f \n \r \t` or `\u00XX`, everything else
    /// (`/`, non-ASCII) as its UTF-8.
    static func appendString(_ text: String, to out: inout [UInt8]) {
        let hex = Array("0123456789abcdef".utf8)
        out.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): out.append(contentsOf: [UInt8(ascii: "\\"), byte])
            case 0x08: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "b")])
            case 0x0C: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "f")])
            case 0x0A: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0..<0x20:
                out.append(contentsOf: Array(#"\u00"#.utf8))
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0x0F)])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    /// Encodes, pads to 4096 bytes and seals the message to one session's keys.
    public func seal(to subscription: WebPush.Subscription) throws(CofferPushError) -> [UInt8] {
        try WebPush.seal(encoded(), to: subscription, padding: .standard)
    }
}
