import Foundation

/// The commands the client sends, each encoded as one CRLF-terminated line that nothing a caller passes can break.
enum SMTPCommand: Sendable, Equatable {
    case ehlo(String)
    case startTLS
    /// AUTH PLAIN with its initial response (RFC 4954, RFC 4616).
    case authPlain(user: String, password: String)
    /// AUTH LOGIN, answered by the user and the password lines.
    case authLogin
    /// One line of a SASL exchange: base64 of `bytes`.
    case saslResponse([UInt8])
    /// `*`: cancels a SASL exchange.
    case saslCancel
    case mail(from: String, size: Int?)
    case rcpt(to: String)
    case data
    case rset
    case quit

    /// The verb for errors and logs: never an argument (no address, no credential).
    var verb: String {
        switch self {
        case .ehlo: "EHLO"
        case .startTLS: "STARTTLS"
        case .authPlain, .authLogin, .saslResponse, .saslCancel: "AUTH"
        case .mail: "MAIL FROM"
        case .rcpt: "RCPT TO"
        case .data: "DATA"
        case .rset: "RSET"
        case .quit: "QUIT"
        }
    }

    /// The command line, CRLF included.
    ///
    /// - Throws: `SMTPError.invalidAddress` for an address that cannot be sent.
    func encoded() throws(SMTPError) -> [UInt8] {
        let line: String
        switch self {
        case .ehlo(let name):
            guard !name.isEmpty, name.utf8.count <= 255,
                name.utf8.allSatisfy({ Self.helloBytes.contains($0) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A) })
            else { throw .invalidAddress(reason: "the EHLO name is not a domain or an address literal") }
            line = "EHLO \(name)"
        case .startTLS: line = "STARTTLS"
        case .authPlain(let user, let password):
            line = "AUTH PLAIN " + Self.base64([0] + Array(user.utf8) + [0] + Array(password.utf8))
        case .authLogin: line = "AUTH LOGIN"
        case .saslResponse(let bytes): line = Self.base64(bytes)
        case .saslCancel: line = "*"
        case .mail(let from, let size):
            try Self.check(from, allowEmpty: true)
            line = "MAIL FROM:<\(from)>" + (size.map { " SIZE=\($0)" } ?? "")
        case .rcpt(let to):
            try Self.check(to, allowEmpty: false)
            line = "RCPT TO:<\(to)>"
        case .data: line = "DATA"
        case .rset: line = "RSET"
        case .quit: line = "QUIT"
        }
        return Array(line.utf8) + [0x0D, 0x0A]
    }

    /// An address that goes between angle brackets: printable ASCII without space, `<`, `>` or a backslash outside
    /// a quoted local part's rules (kept simple: no backslash, no quote), one `@` with text on both sides, at most 254
    /// bytes (RFC 5321 4.5.3.1.3). Non-ASCII needs SMTPUTF8, which this client does not use.
    static func check(_ address: String, allowEmpty: Bool) throws(SMTPError) {
        if address.isEmpty {
            guard allowEmpty else { throw .invalidAddress(reason: "a recipient address is empty") }
            return
        }
        let bytes = Array(address.utf8)
        guard bytes.count <= 254 else { throw .invalidAddress(reason: "an address is longer than 254 bytes") }
        guard bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw .invalidAddress(
                reason: "an address holds a space, a control character or a non-ASCII character (SMTPUTF8 is not used)"
            )
        }
        guard !bytes.contains(where: { [0x3C, 0x3E, 0x5C, 0x22, 0x2C, 0x3A, 0x3B].contains($0) }) else {
            throw .invalidAddress(reason: "an address holds one of < > \\ \" , : ;")
        }
        guard let at = bytes.lastIndex(of: 0x40), at > 0, at < bytes.count - 1,
            bytes.filter({ $0 == 0x40 }).count == 1
        else { throw .invalidAddress(reason: "an address is not of the form local@domain") }
    }

    /// Digits and the punctuation of a domain or an address literal (`[127.0.0.1]`, `[IPv6:::1]`).
    private static let helloBytes = Set(Array("0123456789-.[]:".utf8))

    private static func base64(_ bytes: [UInt8]) -> String { Data(bytes).base64EncodedString() }
}
