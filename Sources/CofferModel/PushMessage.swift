#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

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

/// How the device shows a push (``PushMessage``, docs/FORMAT.md "coffer-notify push message").
extension PushMessage {
    /// The one line shown when there is no desktop notification service.
    public var line: String {
        let sender = Self.clean(from ?? "unknown sender")
        let title = Self.clean(subject ?? "(no subject)")
        return "New mail in \(Self.clean(folder ?? "INBOX")) from \(sender): \(title)"
    }

    /// Drops control characters (a subject must not move the terminal's cursor) and cuts to 200 characters.
    public static func clean(_ text: String) -> String {
        String(
            String.UnicodeScalarView(
                text.unicodeScalars.filter {
                    !$0.properties.isDefaultIgnorableCodePoint && $0.value >= 0x20 && $0.value != 0x7F
                        && !(0x80..<0xA0).contains($0.value)
                }
            ).prefix(200)
        )
    }
}
