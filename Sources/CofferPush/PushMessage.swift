import Foundation

/// The plaintext of a push (documented in docs/FORMAT.md, "coffer-notify push message"): compact JSON
/// `{"v":1,"type":"new-mail","folder":…,"uidValidity":…,"uid":…,"from":…,"subject":…}` (version 2 adds
/// `"fastSync":{"expires":…,"kek":…}`), sealed with RFC 8291 and padded so every body is exactly 4096 bytes.
public struct PushMessage: Codable, Sendable, Equatable {
    /// The format version (1).
    public var v: Int
    /// "new-mail".
    public var type: String
    /// The folder.
    public var folder: String?
    /// The folder's UIDVALIDITY.
    public var uidValidity: UInt32?
    /// The message's UID.
    public var uid: UInt32?
    /// The sender, cut to fit.
    public var from: String?
    /// The subject, cut to fit.
    public var subject: String?
    /// The session's escrowed FastSync key while unexpired (version 2 only).
    public var fastSync: FastSyncKey? {
        didSet { v = fastSync == nil ? 1 : 2 }
    }

    /// A FastSync key in a push: `{"expires": Unix seconds, "kek": base64url of 32 octets}`.
    public struct FastSyncKey: Codable, Sendable, Equatable {
        /// The KEK, base64url.
        public var kek: String
        /// Its expiry, Unix seconds.
        public var expires: Int64

        /// Creates the field.
        public init(kek: String, expires: Int64) {
            self.kek = kek
            self.expires = expires
        }
    }

    /// A version 1 message; set ``fastSync`` to make it version 2.
    public init(folder: String?, uidValidity: UInt32?, uid: UInt32?, from: String?, subject: String?) {
        v = 1
        type = "new-mail"
        self.folder = folder
        self.uidValidity = uidValidity
        self.uid = uid
        self.from = from
        self.subject = subject
    }

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

extension PushMessage.FastSyncKey: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The expiry only: the KEK never prints.
    public var description: String { "FastSyncKey(kek: <redacted>, expires: \(expires))" }

    /// Same as ``description``.
    public var debugDescription: String { description }

    /// The expiry only.
    public var customMirror: Mirror { Mirror(self, children: ["expires": expires], displayStyle: .struct) }
}

extension PushMessage: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The folder and UID only: sender, subject and any FastSync key never print.
    public var description: String {
        "PushMessage(v\(v), \(type), folder: \(folder ?? "-"), uid: \(uid.map(String.init) ?? "-"), "
            + "from: <redacted>, subject: <redacted>\(fastSync == nil ? "" : ", fastSync: <redacted>"))"
    }

    /// Same as ``description``.
    public var debugDescription: String { description }

    /// The fields that are not the message's text or a key.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "v": v, "type": type, "folder": folder as Any, "uidValidity": uidValidity as Any, "uid": uid as Any,
                "fastSync": fastSync as Any,
            ],
            displayStyle: .struct
        )
    }
}
