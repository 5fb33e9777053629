import CofferCrypto

/// The byte formats the Keymaker keeps in the keychain (each item is additionally sealed by the keychain itself).
/// `docs/FORMAT.md` is the reference.
enum ProtectionRecords {
    static let protectionMagic: [UInt8] = Array("CFPR".utf8)
    static let pinWrapMagic: [UInt8] = Array("CFPW".utf8)
    static let secureElementWrapMagic: [UInt8] = Array("CFSW".utf8)
    static let attemptsMagic: [UInt8] = Array("CFAT".utf8)

    /// `"CFPR" | 0x01 | strategy bits (none 1, pin 2, secure-element 4)`: the commit point of every change.
    static func encodeProtection(_ strategies: Set<ProtectionStrategy>) -> [UInt8] {
        protectionMagic + [1, strategies.reduce(0) { $0 | $1.bit }]
    }

    static func decodeProtection(_ bytes: [UInt8]) throws(KeymakerError) -> Set<ProtectionStrategy> {
        guard bytes.count == 6, Array(bytes[0..<4]) == protectionMagic, bytes[4] == 1 else {
            throw .corrupt("protection record")
        }
        let strategies = Set(ProtectionStrategy.allCases.filter { bytes[5] & $0.bit != 0 })
        guard !strategies.isEmpty, bytes[5] & ~7 == 0, !(strategies.contains(.none) && strategies.count > 1) else {
            throw .corrupt("protection record")
        }
        return strategies
    }

    /// v1, software: `"CFPW" | 0x01 | logN | r u32 | p u32 | salt (16) | envelope(MainKey)` under the PIN KEK.
    /// v2, TPM-bound: `"CFPW" | 0x02 | logN | r u32 | p u32 | salt (16) | binding length u16 | TPM PIN binding v1 |
    /// envelope(MainKey)` under the bound KEK.
    struct PINWrap {
        var parameters: ScryptParameters
        var salt: [UInt8]
        /// The TPM PIN binding record, for a v2 wrap.
        var binding: [UInt8]?
        var envelope: [UInt8]

        var element: PINElement { binding == nil ? .software : .tpm }

        func encoded() -> [UInt8] {
            var bytes = pinWrapMagic + [binding == nil ? 1 : 2, parameters.logN]
            bytes.appendBigEndianUInt32(parameters.r)
            bytes.appendBigEndianUInt32(parameters.p)
            bytes += salt
            if let binding {
                bytes += [UInt8(binding.count >> 8 & 0xff), UInt8(binding.count & 0xff)] + binding
            }
            return bytes + envelope
        }

        init(parameters: ScryptParameters, salt: [UInt8], binding: [UInt8]? = nil, envelope: [UInt8]) {
            self.parameters = parameters
            self.salt = salt
            self.binding = binding
            self.envelope = envelope
        }

        init(decoding bytes: [UInt8]) throws(KeymakerError) {
            guard bytes.count > 30, Array(bytes[0..<4]) == pinWrapMagic, bytes[4] == 1 || bytes[4] == 2 else {
                throw .corrupt("PIN wrap")
            }
            do {
                parameters = try ScryptParameters(
                    logN: bytes[5],
                    r: bytes[6..<10].bigEndianUInt32,
                    p: bytes[10..<14].bigEndianUInt32
                )
            } catch {
                throw .corrupt("PIN wrap")
            }
            salt = Array(bytes[14..<30])
            guard bytes[4] == 2 else {
                binding = nil
                envelope = Array(bytes[30...])
                return
            }
            guard bytes.count > 32 else { throw .corrupt("PIN wrap") }
            let length = Int(bytes[30]) << 8 | Int(bytes[31])
            guard length > 0, bytes.count > 32 + length else { throw .corrupt("PIN wrap") }
            binding = Array(bytes[32..<32 + length])
            envelope = Array(bytes[(32 + length)...])
        }
    }

    /// `"CFSW" | 0x01 | encapsulated key length u16 | encapsulated key | HPKE ciphertext`.
    static func encodeSecureElementWrap(_ box: SecureElementSealedBox) -> [UInt8] {
        secureElementWrapMagic + [1, UInt8(box.encapsulatedKey.count >> 8), UInt8(box.encapsulatedKey.count & 0xff)]
            + box.encapsulatedKey + box.ciphertext
    }

    static func decodeSecureElementWrap(_ bytes: [UInt8]) throws(KeymakerError) -> SecureElementSealedBox {
        guard bytes.count > 7, Array(bytes[0..<4]) == secureElementWrapMagic, bytes[4] == 1 else {
            throw .corrupt("secure element wrap")
        }
        let length = Int(bytes[5]) << 8 | Int(bytes[6])
        guard bytes.count > 7 + length else { throw .corrupt("secure element wrap") }
        return SecureElementSealedBox(
            encapsulatedKey: Array(bytes[7..<7 + length]),
            ciphertext: Array(bytes[(7 + length)...])
        )
    }

    /// v1: `"CFAT" | 0x01 | failures u8 | last failure, wall-clock seconds i64`.
    /// v2, beside a TPM-bound PIN: `"CFAT" | 0x02 | failures u8 | last failure i64 | TPM attempt counter u64`.
    struct Attempts: Equatable {
        var failures: Int
        var lastFailure: Int64
        /// The TPM attempt counter's value this record follows (v2), `nil` for a software PIN.
        var counter: UInt64?

        func encoded() -> [UInt8] {
            var bytes = attemptsMagic + [counter == nil ? 1 : 2, UInt8(clamping: failures)]
            for value in [UInt64(bitPattern: lastFailure)] + (counter.map { [$0] } ?? []) {
                bytes.appendBigEndianUInt32(UInt32(truncatingIfNeeded: value >> 32))
                bytes.appendBigEndianUInt32(UInt32(truncatingIfNeeded: value))
            }
            return bytes
        }

        init(failures: Int, lastFailure: Int64, counter: UInt64? = nil) {
            self.failures = failures
            self.lastFailure = lastFailure
            self.counter = counter
        }

        init(decoding bytes: [UInt8]) throws(KeymakerError) {
            guard bytes.count >= 14, Array(bytes[0..<4]) == attemptsMagic,
                (bytes[4] == 1 && bytes.count == 14) || (bytes[4] == 2 && bytes.count == 22)
            else {
                throw .corrupt("attempt record")
            }
            failures = Int(bytes[5])
            let high = UInt64(bytes[6..<10].bigEndianUInt32)
            let low = UInt64(bytes[10..<14].bigEndianUInt32)
            lastFailure = Int64(bitPattern: high << 32 | low)
            counter =
                bytes[4] == 2
                ? UInt64(bytes[14..<18].bigEndianUInt32) << 32 | UInt64(bytes[18..<22].bigEndianUInt32) : nil
        }
    }
}

extension Array where Element == UInt8 {
    mutating func appendBigEndianUInt32(_ value: UInt32) {
        append(contentsOf: [
            UInt8(value >> 24), UInt8(value >> 16 & 0xff), UInt8(value >> 8 & 0xff), UInt8(value & 0xff),
        ])
    }
}

extension ArraySlice where Element == UInt8 {
    var bigEndianUInt32: UInt32 { reduce(0) { $0 << 8 | UInt32($1) } }
}
