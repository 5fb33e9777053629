/// What the store found of OpenPGP on a message when it was stored (migration `v8-openpgp-mail`): whether it came
/// encrypted, whether it was decrypted, and each signature inside it. Sealed in the message's `openPGP` cell.
public struct MessageOpenPGP: Sendable, Hashable, Codable {
    /// What became of the message's encryption.
    public enum Outcome: String, Sendable, Hashable, Codable {
        /// The whole message was a PGP/MIME encrypted message and was decrypted; the stored body is the decrypted one.
        case decrypted
        /// None of the user's secret keys can open it; it is stored as it came.
        case noSecretKey
        /// Its integrity check (MDC or AEAD) failed or is missing: it was changed or crafted. No plaintext was kept.
        case integrityFailure
        /// The encrypted part is not a readable OpenPGP message (or it would expand beyond the size limit).
        case malformed
        /// An encrypted part sits beside other parts of the message: it is never decrypted (EFAIL), and stays an
        /// opaque part.
        case nestedNotDecrypted
        /// Signed, not encrypted: a PGP/MIME `multipart/signed` message as a whole; ``MessageOpenPGP/signatures``
        /// holds what checking its detached signature over the signed part showed (none when it could not be read).
        case signed
    }

    /// One signature found inside the decrypted message.
    public struct Signature: Sendable, Hashable, Codable {
        /// What checking it showed: `valid`, `expired`, `invalid`, `unknown key` or `unsupported`.
        public var status: String
        /// The signer's fingerprint (a claim unless ``isValid``).
        public var fingerprint: String?
        /// The signer's first user id, when the signer's certificate is known (one of the user's own keys or a
        /// correspondent's).
        public var userID: String?

        /// Whether the signature checked out.
        public var isValid: Bool { status == "valid" }

        /// A signature.
        public init(status: String, fingerprint: String?, userID: String?) {
            self.status = status
            self.fingerprint = fingerprint
            self.userID = userID
        }
    }

    /// What became of the encryption.
    public var outcome: Outcome
    /// The integrity protection checked (`MDC`, or the AEAD mode) when decrypted.
    public var protection: String?
    /// The signatures inside the decrypted message, in order.
    public var signatures: [Signature]

    /// A status.
    public init(outcome: Outcome, protection: String? = nil, signatures: [Signature] = []) {
        self.outcome = outcome
        self.protection = protection
        self.signatures = signatures
    }

    /// The cell's plaintext: a count-prefixed outcome name, the protection and the signatures.
    var cell: [UInt8] {
        var writer = CellWriter(capacity: 96)
        writer.string(outcome.rawValue)
        writer.string(protection)
        writer.count(signatures.count)
        for signature in signatures {
            writer.string(signature.status)
            writer.string(signature.fingerprint)
            writer.string(signature.userID)
        }
        return writer.bytes
    }

    /// Reads a cell written by ``cell``.
    static func read(_ bytes: [UInt8]) throws(CellReader.Malformed) -> MessageOpenPGP {
        var reader = try CellReader(bytes)
        guard let outcome = Outcome(rawValue: try reader.requiredString()) else { throw CellReader.Malformed() }
        let protection = try reader.string()
        let count = try reader.count()
        guard count <= 64 else { throw CellReader.Malformed() }
        var signatures: [Signature] = []
        for _ in 0..<count {
            signatures.append(
                Signature(
                    status: try reader.requiredString(),
                    fingerprint: try reader.string(),
                    userID: try reader.string()
                )
            )
        }
        try reader.finish()
        return MessageOpenPGP(outcome: outcome, protection: protection, signatures: signatures)
    }
}
