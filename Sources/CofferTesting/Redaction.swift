import CofferCrypto
import Foundation

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
        var forms = [secret.hexString, secret.hexString.uppercased(), Data(secret).base64EncodedString(), "\(secret)"]
        if secret.count >= 4 { forms.append(String(decoding: secret, as: UTF8.self)) }
        let texts = renderings(of: value)
        return forms.filter { form in texts.contains { $0.contains(form) } }
    }
}
