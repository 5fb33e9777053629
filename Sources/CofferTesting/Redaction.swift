/// Checks that a value's printed forms do not reveal secret bytes.
public enum Redaction {
    /// Every way a value reaches text: `description` (`String(describing:)` and interpolation), `debugDescription`
    /// (`String(reflecting:)`) and `dump`, which walks the value's mirror.
    public static func renderings(of value: Any) -> [String] {
        var dumped = ""
        dump(value, to: &dumped)
        return [String(describing: value), "\(value)", String(reflecting: value), dumped]
    }

    /// The forms of `secret` found in any rendering of `value`: the bytes as text (when at least 4 long), lower- and
    /// upper-case hex, base64, and the decimal array form that a reflected `[UInt8]` prints. Empty when redacted.
    public static func leaks(of secret: [UInt8], in value: Any) -> [String] {
        var forms = [hex(secret), hex(secret).uppercased(), base64(secret), "\(secret)"]
        if secret.count >= 4 { forms.append(String(decoding: secret, as: UTF8.self)) }
        let texts = renderings(of: value)
        return forms.filter { form in texts.contains { $0.contains(form) } }
    }

    private static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef")
        return String(bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0x0f)]] })
    }

    private static func base64(_ bytes: [UInt8]) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
        var out = ""
        var index = 0
        while index < bytes.count {
            let chunk = Array(bytes[index..<min(index + 3, bytes.count)])
            let value = chunk.enumerated().reduce(0) { $0 | Int($1.element) << (16 - 8 * $1.offset) }
            for position in 0..<4 {
                out.append(position <= chunk.count ? alphabet[(value >> (18 - 6 * position)) & 0x3f] : "=")
            }
            index += 3
        }
        return out
    }
}
