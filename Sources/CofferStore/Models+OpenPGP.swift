extension MessageOpenPGP {
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
