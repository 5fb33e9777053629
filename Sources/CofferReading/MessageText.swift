import CofferAgentProtocol
import CofferMIME

/// A message as `show` prints it.
public enum MessageText {
    /// The message as `show` prints it: the main headers (or all with `headers`), a blank line, the text, and the
    /// attachments.
    public static func text(_ message: MessageDetail, headers: Bool) -> String {
        func addresses(_ list: [MailAddress]) -> String { list.map(\.description).joined(separator: ", ") }
        var lines: [String] = []
        if headers {
            for field in message.headers { lines.append("\(field.name): \(field.value)") }
        } else {
            lines.append("From: \(addresses(message.summary.from))")
            lines.append("To: \(addresses(message.to))")
            if !message.cc.isEmpty { lines.append("Cc: \(addresses(message.cc))") }
            lines.append("Date: \(MessageLine.date(message.summary)) UTC")
            lines.append("Subject: \(message.summary.subject ?? "")")
        }
        if let openPGP = message.openPGP { lines.append(openPGPLine(openPGP)) }
        lines.append("")
        lines.append(message.textBody ?? (message.htmlBody == nil ? "(no text)" : "(HTML only; no plain text part)"))
        if !message.attachments.isEmpty {
            lines.append("")
            for attachment in message.attachments {
                lines.append(
                    "[attachment \(attachment.id)] \(attachment.filename ?? "(unnamed)") "
                        + "\(attachment.contentType), \(attachment.size) bytes"
                )
            }
        }
        return lines.joined(separator: "\n")
    }

    /// What the store found of OpenPGP on the message, in one line: whether it was decrypted, and each signature's
    /// signer and check; or why it was not decrypted. User ids and fingerprints are the sender's words: they are
    /// cleaned of terminal controls.
    static func openPGPLine(_ status: MessageOpenPGP) -> String {
        switch status.outcome {
        case .decrypted:
            guard !status.signatures.isEmpty else { return "OpenPGP: encrypted, not signed" }
            let signatures = status.signatures.map(signatureText)
            let first = status.signatures[0].isValid ? "OpenPGP: encrypted, " : "OpenPGP: encrypted; "
            return first + signatures.joined(separator: "; ")
        case .noSecretKey: return "OpenPGP: could not be decrypted (no secret key for it)"
        case .integrityFailure:
            return
                "OpenPGP: could not be decrypted (its integrity check failed: it was changed; nothing of it is shown)"
        case .malformed: return "OpenPGP: could not be decrypted (the encrypted part is damaged or not OpenPGP data)"
        case .nestedNotDecrypted:
            return "OpenPGP: an encrypted part beside other parts was not decrypted "
                + "(only a message encrypted as a whole is; it stays an attachment)"
        case .signed:
            guard !status.signatures.isEmpty else {
                return "OpenPGP: signed, not encrypted; the signature could not be read"
            }
            return "OpenPGP: not encrypted; " + status.signatures.map(signatureText).joined(separator: "; ")
        }
    }

    /// One signature: its signer and what checking it showed.
    static func signatureText(_ signature: MessageOpenPGP.Signature) -> String {
        let fingerprint = PushMessage.clean(signature.fingerprint ?? "no fingerprint")
        let signer = signature.userID.map { "\(PushMessage.clean($0)) (\(fingerprint))" } ?? fingerprint
        switch signature.status {
        case "valid": return "signed by \(signer), verified"
        case "unknown key": return "signature could not be checked (unknown key \(fingerprint))"
        case "invalid": return "bad signature by \(signer) (the message or signature was changed)"
        case "revoked": return "signature by \(signer) is not trusted: its key has been revoked"
        default: return "signature by \(signer) could not be verified (\(PushMessage.clean(signature.status)))"
        }
    }
}
