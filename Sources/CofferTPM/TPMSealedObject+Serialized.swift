extension TPMSealedObject {
    /// The record's magic, "CFTP".
    static let magic: [UInt8] = Array("CFTP".utf8)
    /// The record's version.
    static let version: UInt8 = 1

    /// The stored form, TPM sealed object v1 (docs/FORMAT.md): `"CFTP" ‖ 0x01 ‖ u16 length ‖ TPM2B_PUBLIC ‖
    /// u16 length ‖ TPM2B_PRIVATE`, lengths big-endian.
    public var serialized: [UInt8] {
        var bytes = Self.magic + [Self.version]
        for area in [publicArea, privateArea] {
            let count = UInt16(clamping: area.count)
            bytes += [UInt8(count >> 8), UInt8(count & 0xFF)] + area.prefix(Int(count))
        }
        return bytes
    }

    /// Reads a stored TPM sealed object v1.
    ///
    /// - Throws: ``TPMError/malformed(what:)`` for another magic or version, a truncated record or trailing bytes.
    public init(serialized bytes: [UInt8]) throws(TPMError) {
        var rest = bytes[...]
        guard rest.count >= 5, Array(rest.prefix(4)) == Self.magic, rest[rest.startIndex + 4] == Self.version else {
            throw .malformed(what: "TPM sealed object record")
        }
        rest = rest.dropFirst(5)
        var areas: [[UInt8]] = []
        for _ in 0..<2 {
            guard rest.count >= 2 else { throw .malformed(what: "TPM sealed object record") }
            let count = Int(rest[rest.startIndex]) << 8 | Int(rest[rest.startIndex + 1])
            rest = rest.dropFirst(2)
            guard count > 0, rest.count >= count else { throw .malformed(what: "TPM sealed object record") }
            areas.append(Array(rest.prefix(count)))
            rest = rest.dropFirst(count)
        }
        guard rest.isEmpty else { throw .malformed(what: "TPM sealed object record") }
        self.init(publicArea: areas[0], privateArea: areas[1])
    }
}
