import Foundation

/// base64url without padding (RFC 4648 section 5), as Web Push, VAPID and JWT use it.
public enum Base64URL {
    /// Encodes `bytes` as base64url without `=` padding.
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        var text = Data(bytes).base64EncodedString()
        text = text.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        while text.hasSuffix("=") { text.removeLast() }
        return text
    }

    /// Decodes base64url text without padding; `nil` when it holds any other character or has an impossible length.
    ///
    /// Trailing `=` padding is tolerated, since some senders add it.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        var body = Substring(text)
        while body.hasSuffix("=") { body.removeLast() }
        guard body.count % 4 != 1 else { return nil }
        var standard = ""
        standard.reserveCapacity(body.count + 3)
        for character in body.unicodeScalars {
            switch character {
            case "A"..."Z", "a"..."z", "0"..."9": standard.unicodeScalars.append(character)
            case "-": standard.append("+")
            case "_": standard.append("/")
            default: return nil
            }
        }
        while standard.count % 4 != 0 { standard.append("=") }
        guard let data = Data(base64Encoded: standard) else { return nil }
        return [UInt8](data)
    }
}
