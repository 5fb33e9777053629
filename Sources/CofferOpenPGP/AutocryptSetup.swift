import CRNP
import CofferBlocking
import CofferCrypto

/// The payload of an Autocrypt Setup Message (Autocrypt Level 1, "Autocrypt Setup Message"): the user's secret key,
/// ASCII-armored with an `Autocrypt-Prefer-Encrypt` header, symmetrically encrypted (AES-128, S2K SHA-256) under a
/// Setup Code of 36 random digits written as nine blocks of four joined by dashes, itself armored with the
/// `Passphrase-Format: numeric9x4` and `Passphrase-Begin` headers. RNP does the encryption.
///
/// Every function is blocking CPU work (S2K): call it on `BlockingPool`.
public enum AutocryptSetup {
    /// The largest decrypted payload accepted (an armored secret key is a few KiB).
    public static let maximumPayloadSize = 1 << 20

    /// A new Setup Code from the system's CSPRNG: `dddd-dddd-…-dddd`, nine blocks, in locked memory.
    public static func newSetupCode() -> SecretBytes {
        SecretBytes(uninitializedCount: 44) { code in
            var index = 0
            var digits = 0
            while digits < 36 {
                // Locked memory, zeroed when released.
                let random = SecretBytes(randomCount: 64)
                random.withUnsafeBytes { bytes in
                    // 250 is the largest multiple of ten a byte holds: rejection keeps every digit equally likely.
                    for byte in bytes where byte < 250 && digits < 36 {
                        if digits > 0 && digits % 4 == 0 {
                            code[index] = UInt8(ascii: "-")
                            index += 1
                        }
                        code[index] = UInt8(ascii: "0") + byte % 10
                        index += 1
                        digits += 1
                    }
                }
            }
        }
    }

    /// Whether `code` is a Setup Code: nine blocks of four digits joined by dashes.
    public static func isSetupCode(_ code: SecretBytes) -> Bool {
        code.withUnsafeBytes { bytes in
            bytes.count == 44
                && bytes.enumerated().allSatisfy { index, byte in
                    index % 5 == 4 ? byte == UInt8(ascii: "-") : (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                }
        }
    }

    /// The encrypted, armored payload for `secretKey`.
    ///
    /// - Throws: ``OpenPGPError/invalidArgument(reason:)`` for a code that is not nine blocks of four digits.
    public static func seal(
        _ secretKey: OpenPGPSecretKey,
        preferEncryptMutual: Bool,
        setupCode: SecretBytes
    ) throws(OpenPGPError) -> [UInt8] {
        guard isSetupCode(setupCode) else {
            throw .invalidArgument(reason: "the Setup Code is not 9 blocks of 4 digits")
        }
        return try RNPSession.with { session throws(OpenPGPError) in
            try OpenPGP.load(secretKey, into: session)
            let key = try session.locate(fingerprint: secretKey.fingerprint)
            let armored = try key.export(flags: RNPCode.exportSecret | RNPCode.exportArmored)
            let header = "Autocrypt-Prefer-Encrypt: \(preferEncryptMutual ? "mutual" : "nopreference")"
            let payload = ZeroingBuffer(limit: Int.max)
            try armored.secretBytes.withUnsafeBytes { bytes throws(OpenPGPError) in
                try insertArmorHeaders([header], into: bytes, output: payload)
            }
            let output = ZeroingBuffer(limit: Int.max)
            try payload.secretBytes.withUnsafeBytes { raw throws(OpenPGPError) in
                try RNPInput.with(raw, what: "key", isData: true) { input throws(OpenPGPError) in
                    try RNPOutput.with(output, operation: "encryption") { out throws(OpenPGPError) in
                        var op: rnp_op_encrypt_t?
                        try RNP.check(rnp_op_encrypt_create(&op, session.ffi, input, out), "encryption")
                        guard let op else { throw .failed("encryption", RNPCode.badState) }
                        defer { rnp_op_encrypt_destroy(op) }
                        let added = terminated(setupCode) { password in
                            rnp_op_encrypt_add_password(op, password, "SHA256", 0, "AES128")
                        }
                        try RNP.check(added, "encryption")
                        try RNP.check(rnp_op_encrypt_set_cipher(op, "AES128"), "encryption")
                        try RNP.check(rnp_op_encrypt_set_armor(op, true), "encryption")
                        try RNP.check(rnp_op_encrypt_execute(op), "encryption")
                    }
                }
            }
            let begin = setupCode.withUnsafeBytes { String(decoding: $0.prefix(2), as: UTF8.self) }
            let sealed = ZeroingBuffer(limit: Int.max)
            try withRawBytes(output.bytes) { bytes throws(OpenPGPError) in
                try insertArmorHeaders(
                    ["Passphrase-Format: numeric9x4", "Passphrase-Begin: \(begin)"],
                    into: bytes,
                    output: sealed
                )
            }
            return sealed.bytes
        }
    }

    /// What a Setup Message's payload holds, once opened.
    public struct Opened: Sendable {
        /// The armored secret key (with its `Autocrypt-Prefer-Encrypt` header), for ``OpenPGP/importKeys(from:passphrase:)``.
        public let keys: SecretBytes
        /// The `Autocrypt-Prefer-Encrypt` header: `true` for `mutual`, `false` for `nopreference`, `nil` when absent.
        public let preferEncryptMutual: Bool?
    }

    /// Decrypts a Setup Message's armored payload with `setupCode` (dashes and white space in it are ignored, so a
    /// code typed as blocks or as 36 digits both work).
    ///
    /// - Throws: ``OpenPGPError/wrongPassphrase(fingerprint:)`` (with an empty fingerprint) for a wrong code;
    ///   ``OpenPGPError/integrityFailure`` for a changed or unprotected payload; ``OpenPGPError/malformed(what:)``.
    public static func open(_ payload: [UInt8], setupCode: SecretBytes) throws(OpenPGPError) -> Opened {
        let code = normalized(setupCode)
        defer { code.wipe() }
        guard isSetupCode(code) else { throw .wrongPassphrase(fingerprint: "") }
        return try RNPSession.with { session throws(OpenPGPError) in
            let box = Unmanaged.passRetained(code)
            defer { box.release() }
            try RNP.check(rnp_ffi_set_pass_provider(session.ffi, passwordProvider, box.toOpaque()), "decryption")
            let output = ZeroingBuffer(limit: maximumPayloadSize)
            do throws(OpenPGPError) {
                _ = try withRawBytes(payload) { raw throws(OpenPGPError) in
                    try RNPInput.with(raw, what: "message") { input throws(OpenPGPError) in
                        try OpenPGP.verify(session, input: input, output: output)
                    }
                }
            } catch .noMatchingSecretKey {
                throw .wrongPassphrase(fingerprint: "")
            }
            let text = output.withUnsafeBytes { bytes -> Bool? in
                let header = Array("Autocrypt-Prefer-Encrypt:".utf8)
                guard let start = firstIndex(of: header, in: bytes) else { return nil }
                let rest = bytes[(start + header.count)...].prefix { $0 != 0x0A && $0 != 0x0D }
                let value = rest.drop { $0 == 0x20 || $0 == 0x09 }
                return value.starts(with: Array("mutual".utf8))
            }
            return Opened(keys: output.secretBytes, preferEncryptMutual: text)
        }
    }

    /// The 44-character code from what a person typed: digits only, regrouped into blocks with dashes.
    static func normalized(_ typed: SecretBytes) -> SecretBytes {
        let digitCount = typed.withUnsafeBytes { bytes in bytes.filter { $0 >= 0x30 && $0 <= 0x39 }.count }
        guard digitCount == 36 else { return SecretBytes(copying: [UInt8]()) }
        return SecretBytes(uninitializedCount: 44) { code in
            typed.withUnsafeBytes { bytes in
                var index = 0
                var digits = 0
                for byte in bytes where byte >= 0x30 && byte <= 0x39 {
                    if digits > 0 && digits % 4 == 0 {
                        code[index] = UInt8(ascii: "-")
                        index += 1
                    }
                    code[index] = byte
                    index += 1
                    digits += 1
                }
            }
        }
    }

    /// Gives RNP the Setup Code (held in the context) for a symmetric decryption, never for a key.
    private static let passwordProvider: rnp_password_cb = { _, context, key, _, buffer, length in
        guard key == nil, let context, let buffer else { return false }
        let code = Unmanaged<SecretBytes>.fromOpaque(context).takeUnretainedValue()
        return code.withUnsafeBytes { bytes in
            guard bytes.count < length, let base = bytes.baseAddress else { return false }
            UnsafeMutableRawPointer(buffer).copyMemory(from: base, byteCount: bytes.count)
            buffer[bytes.count] = 0
            return true
        }
    }

    /// Runs `body` with `secret` as a NUL-terminated C string in locked memory, wiped after.
    private static func terminated<R>(_ secret: SecretBytes, _ body: (UnsafePointer<CChar>) -> R) -> R {
        let copy = SecretBytes(uninitializedCount: secret.count + 1) { buffer in
            secret.withUnsafeBytes { bytes in
                for (index, byte) in bytes.enumerated() { buffer[index] = byte }
            }
            buffer[secret.count] = 0
        }
        defer { copy.wipe() }
        return copy.withUnsafeBytes { bytes in body(bytes.baseAddress!.assumingMemoryBound(to: CChar.self)) }
    }

    /// The index of the first `needle` in `haystack`.
    static func firstIndex(of needle: [UInt8], in haystack: UnsafeRawBufferPointer) -> Int? {
        guard !needle.isEmpty, haystack.count >= needle.count else { return nil }
        for start in 0...(haystack.count - needle.count)
        where haystack[start] == needle[0] && haystack[start..<(start + needle.count)].elementsEqual(needle) {
            return start
        }
        return nil
    }

    /// Copies armored `bytes` into `output` with `headers` as armor header lines after the `-----BEGIN` line (in
    /// that line's own line ending).
    static func insertArmorHeaders(
        _ headers: [String],
        into bytes: UnsafeRawBufferPointer,
        output: ZeroingBuffer
    ) throws(OpenPGPError) {
        guard let begin = firstIndex(of: Array("-----BEGIN PGP ".utf8), in: bytes),
            let lineEnd = bytes[begin...].firstIndex(of: 0x0A)
        else { throw .malformed(what: "armor") }
        let crlf = lineEnd > 0 && bytes[lineEnd - 1] == 0x0D
        let head = UnsafeRawBufferPointer(rebasing: bytes[..<(lineEnd + 1)])
        let tail = UnsafeRawBufferPointer(rebasing: bytes[(lineEnd + 1)...])
        var lines: [UInt8] = []
        for header in headers { lines += Array(header.utf8) + (crlf ? [0x0D, 0x0A] : [0x0A]) }
        guard output.append(head),
            lines.withUnsafeBytes({ output.append($0) }),
            output.append(tail)
        else { throw .failed("armor", RNPCode.badState) }
    }
}
