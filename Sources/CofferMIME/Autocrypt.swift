#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// An `Autocrypt` header field (Autocrypt Level 1, "The Autocrypt Header"): the sender's address, whether they prefer
/// encrypted replies, and a minimal OpenPGP certificate.
///
/// Written by ``MessageWriter`` from ``OutgoingMessage/autocrypt`` (the address is always the From address) and read
/// from received mail by ``parse(_:)``, which takes received headers as hostile input: anything but a well-formed
/// field is `nil`, never an error.
public struct AutocryptHeader: Sendable, Hashable {
    /// The largest keydata accepted, decoded (a minimal key is a few hundred bytes to a few KiB).
    public static let maximumKeyDataSize = 64 << 10

    /// The address the key is for, as written (compare it case-insensitively).
    public var address: String
    /// `prefer-encrypt=mutual`; any other value, or none, is "nopreference".
    public var preferEncryptMutual: Bool
    /// The OpenPGP certificate in binary form (not checked here: RNP reads it).
    public var keyData: [UInt8]

    /// Creates a header.
    public init(address: String, preferEncryptMutual: Bool, keyData: [UInt8]) {
        self.address = address
        self.preferEncryptMutual = preferEncryptMutual
        self.keyData = keyData
    }

    /// Reads one `Autocrypt` field value (unfolded or not) strictly: `;`-separated `name=value` attributes, each at
    /// most once; `addr` and `keydata` required; `prefer-encrypt` optional; attributes whose name starts with `_`
    /// ignored; any other attribute (an unknown critical one) makes the whole field invalid. `keydata` is base64
    /// (white space anywhere is removed) of at most ``maximumKeyDataSize`` bytes.
    ///
    /// - Returns: The header, or `nil` for a field that is not valid.
    public static func parse(_ value: String) -> AutocryptHeader? {
        // Bounded before any work: base64 of 64 KiB is under 88 KiB, with room for folding and attributes.
        guard value.utf8.count <= maximumKeyDataSize * 2 else { return nil }
        var address: String?
        var prefer: String?
        var keyData: String?
        for attribute in value.split(separator: ";", omittingEmptySubsequences: false) {
            let trimmed = attribute.trimmingWhitespace()
            if trimmed.isEmpty { continue }
            guard let equals = trimmed.firstIndex(of: "=") else { return nil }
            let name = trimmed[..<equals].trimmingWhitespace().lowercased()
            let text = trimmed[trimmed.index(after: equals)...].trimmingWhitespace()
            switch name {
            case "addr":
                guard address == nil else { return nil }
                address = text
            case "prefer-encrypt":
                guard prefer == nil else { return nil }
                prefer = text
            case "keydata":
                guard keyData == nil else { return nil }
                keyData = text
            default:
                // Non-critical attributes start with an underscore; an unknown critical one voids the header.
                guard name.hasPrefix("_") else { return nil }
            }
        }
        guard let address, !address.isEmpty, address.contains("@"),
            !address.unicodeScalars.contains(where: { $0.value < 0x21 || $0.value == 0x7F }),
            let keyData
        else { return nil }
        let compact = String(keyData.unicodeScalars.filter { !($0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n") })
        guard !compact.isEmpty, let decoded = Data(base64Encoded: compact), !decoded.isEmpty,
            decoded.count <= maximumKeyDataSize
        else { return nil }
        return AutocryptHeader(
            address: address,
            preferEncryptMutual: prefer?.lowercased() == "mutual",
            keyData: Array(decoded)
        )
    }

    /// The one usable `Autocrypt` header of a received message, per Level 1: the message has exactly one From
    /// address; of its `Autocrypt` fields, those that parse and whose `addr` is that address (case-insensitively)
    /// are counted; exactly one is taken. Several valid fields, or none, give `nil` (the message counts as one
    /// without the header).
    public static func find(in message: MIMEMessage) -> AutocryptHeader? {
        find(in: message, from: message.from)
    }

    /// ``find(in:)`` for a caller that has already read the message's From addresses (`from`), so that the header
    /// is not parsed again.
    public static func find(in message: MIMEMessage, from: [MailAddress]) -> AutocryptHeader? {
        guard from.count == 1 else { return nil }
        let sender = from[0].address.lowercased()
        let valid = message.root.headers(named: "Autocrypt").prefix(16).compactMap { field -> AutocryptHeader? in
            guard let header = parse(field.unfoldedValue), header.address.lowercased() == sender else { return nil }
            return header
        }
        return valid.count == 1 ? valid[0] : nil
    }

    /// The keydata as the header carries it: base64 in lines of 76 characters or fewer.
    func keyDataLines() -> [String] {
        let text = Data(keyData).base64EncodedString()
        var lines: [String] = []
        var index = text.startIndex
        while index < text.endIndex {
            let end = text.index(index, offsetBy: 72, limitedBy: text.endIndex) ?? text.endIndex
            lines.append(String(text[index..<end]))
            index = end
        }
        return lines
    }
}

/// The `Autocrypt` header of an outgoing message: ``MessageWriter`` writes it with the From address as `addr`, so it
/// can never name another address, and the keydata as base64 it encodes itself, folded, so nothing in it can inject
/// a header line.
public struct OutgoingAutocrypt: Sendable, Hashable {
    /// The minimal certificate (primary key, encryption subkey, the user id of the sending address, their
    /// self-signatures) in binary form: at most ``AutocryptHeader/maximumKeyDataSize`` bytes.
    public var keyData: [UInt8]
    /// Writes `prefer-encrypt=mutual`; otherwise the attribute is left out ("nopreference").
    public var preferEncryptMutual: Bool

    /// Creates one.
    public init(keyData: [UInt8], preferEncryptMutual: Bool) {
        self.keyData = keyData
        self.preferEncryptMutual = preferEncryptMutual
    }

    /// The whole field, folded: `Autocrypt: addr=…; [prefer-encrypt=mutual; ]keydata=` then the base64 on
    /// continuation lines of 73 characters.
    func field(address: String) -> [UInt8] {
        var text = "Autocrypt: addr=\(address);"
        if preferEncryptMutual { text += " prefer-encrypt=mutual;" }
        text += " keydata="
        let lines = AutocryptHeader(address: address, preferEncryptMutual: false, keyData: keyData).keyDataLines()
        for line in lines { text += "\r\n " + line }
        return Array((text + "\r\n").utf8)
    }
}
