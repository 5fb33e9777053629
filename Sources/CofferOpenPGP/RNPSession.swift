import CRNP
import CofferBlocking
import CofferCrypto

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// RNP's result codes Coffer tells apart (rnp_err.h; Swift imports the anonymous enum as `Int`).
enum RNPCode {
    static let success = rnp_result_t(RNP_SUCCESS)
    static let badFormat = rnp_result_t(RNP_ERROR_BAD_FORMAT)
    static let badParameters = rnp_result_t(RNP_ERROR_BAD_PARAMETERS)
    static let notSupported = rnp_result_t(RNP_ERROR_NOT_SUPPORTED)
    static let read = rnp_result_t(RNP_ERROR_READ)
    static let write = rnp_result_t(RNP_ERROR_WRITE)
    static let badState = rnp_result_t(RNP_ERROR_BAD_STATE)
    static let macInvalid = rnp_result_t(RNP_ERROR_MAC_INVALID)
    static let signatureInvalid = rnp_result_t(RNP_ERROR_SIGNATURE_INVALID)
    static let badPassword = rnp_result_t(RNP_ERROR_BAD_PASSWORD)
    static let keyNotFound = rnp_result_t(RNP_ERROR_KEY_NOT_FOUND)
    static let noSuitableKey = rnp_result_t(RNP_ERROR_NO_SUITABLE_KEY)
    static let decryptFailed = rnp_result_t(RNP_ERROR_DECRYPT_FAILED)
    static let noSignaturesFound = rnp_result_t(RNP_ERROR_NO_SIGNATURES_FOUND)
    static let signatureExpired = rnp_result_t(RNP_ERROR_SIGNATURE_EXPIRED)
    static let signatureUnknown = rnp_result_t(RNP_ERROR_SIGNATURE_UNKNOWN)
    static let notEnoughData = rnp_result_t(RNP_ERROR_NOT_ENOUGH_DATA)
    static let unknownTag = rnp_result_t(RNP_ERROR_UNKNOWN_TAG)
    static let packetNotConsumed = rnp_result_t(RNP_ERROR_PACKET_NOT_CONSUMED)
    static let eof = rnp_result_t(RNP_ERROR_EOF)

    /// Codes that mean the input does not parse.
    static let parseFailures: Set<rnp_result_t> = [
        badFormat, notEnoughData, unknownTag, packetNotConsumed, eof, read, badState,
    ]

    /// Codes with which a verification of a signed, unencrypted message fails.
    static let signatureFailures: Set<rnp_result_t> = [
        signatureInvalid, keyNotFound, signatureExpired, signatureUnknown, noSignaturesFound,
    ]

    static let exportPublic = UInt32(RNP_KEY_EXPORT_PUBLIC)
    static let exportSecret = UInt32(RNP_KEY_EXPORT_SECRET)
    static let exportSubkeys = UInt32(RNP_KEY_EXPORT_SUBKEYS)
    static let exportArmored = UInt32(RNP_KEY_EXPORT_ARMORED)
    static let loadPublic = UInt32(RNP_LOAD_SAVE_PUBLIC_KEYS)
    static let loadSecret = UInt32(RNP_LOAD_SAVE_SECRET_KEYS)
    static let ignoreSignaturesOnDecrypt = UInt32(RNP_VERIFY_IGNORE_SIGS_ON_DECRYPT)
}

/// Runs `body` over the bytes of `array` (`Array.withUnsafeBytes` rethrows untyped errors).
func withRawBytes<R>(
    _ array: [UInt8],
    _ body: (UnsafeRawBufferPointer) throws(OpenPGPError) -> R
)
    throws(OpenPGPError) -> R
{
    let result = array.withUnsafeBytes { raw in Result { () throws(OpenPGPError) -> R in try body(raw) } }
    return try result.get()
}

/// Small helpers over RNP's result codes.
enum RNP {
    /// Throws ``OpenPGPError/failed(operation:code:detail:)`` unless `code` is success.
    static func check(_ code: rnp_result_t, _ operation: String) throws(OpenPGPError) {
        guard code == RNPCode.success else { throw OpenPGPError.failed(operation, code) }
    }
}

/// One RNP FFI object for one operation: created empty, given keys from memory only, destroyed at the end.
///
/// Never loads or saves a keyring, never has a home folder: nothing RNP does here touches a file.
struct RNPSession: ~Copyable {
    let ffi: rnp_ffi_t

    private init(ffi: rnp_ffi_t) { self.ffi = ffi }

    /// Runs `body` with a fresh, empty FFI object and destroys it afterwards (its keys and their secret material
    /// with it).
    static func with<R>(_ body: (borrowing RNPSession) throws(OpenPGPError) -> R) throws(OpenPGPError) -> R {
        var ffi: rnp_ffi_t?
        let code = rnp_ffi_create(&ffi, "GPG", "GPG")
        guard code == RNPCode.success, let ffi else { throw OpenPGPError.failed("setup", code) }
        // The FFI's own messages go nowhere; RNP closes the descriptor when the FFI is destroyed. (Its parser
        // diagnostics ignore this and go to standard error: see docs/OPENPGP.md.)
        let null = open("/dev/null", O_WRONLY | O_CLOEXEC)
        if null >= 0, rnp_ffi_set_log_fd(ffi, null) != RNPCode.success { close(null) }
        let session = RNPSession(ffi: ffi)
        defer {
            rnp_ffi_destroy(ffi)
            // RNP and Botan read and decrypt through buffers on the stack (32 KiB input caches, cipher blocks): the
            // plaintext of a decrypted message and key material would stay there, below this frame, until the
            // thread happens to reuse that depth. They are zeroed now (OpenPGPMailCLITests found a decrypted
            // message's text left on a BlockingPool thread's stack after lock without this).
            ThreadStack.zeroUnused(bytes: 512 << 10)
        }
        return try body(session)
    }

    /// Imports the keys in `bytes` (armored or binary, public or secret), reading them in place (RNP keeps no copy
    /// of the input).
    func importKeys(_ bytes: UnsafeRawBufferPointer, secret: Bool, what: String) throws(OpenPGPError) {
        let flags = RNPCode.loadPublic | (secret ? RNPCode.loadSecret : 0)
        let code = try RNPInput.with(bytes, what: what) { input in rnp_import_keys(ffi, input, flags, nil) }
        guard code == RNPCode.success else {
            if RNPCode.parseFailures.contains(code) { throw .malformed(what: what) }
            throw OpenPGPError.failed("import of the \(what)", code)
        }
    }

    /// The fingerprints of the primary keys now in the session, in RNP's order.
    func primaryFingerprints() throws(OpenPGPError) -> [String] {
        var iterator: rnp_identifier_iterator_t?
        let code = rnp_identifier_iterator_create(ffi, &iterator, "fingerprint")
        guard code == RNPCode.success, let iterator else { throw OpenPGPError.failed("key listing", code) }
        defer { rnp_identifier_iterator_destroy(iterator) }
        var fingerprints: [String] = []
        while true {
            var identifier: UnsafePointer<CChar>?
            let next = rnp_identifier_iterator_next(iterator, &identifier)
            guard next == RNPCode.success else { throw OpenPGPError.failed("key listing", next) }
            guard let identifier else { break }
            let fingerprint = String(cString: identifier)
            let key = try locate(fingerprint: fingerprint)
            if try key.flag(rnp_key_is_primary) { fingerprints.append(fingerprint) }
        }
        return fingerprints
    }

    /// The key with `fingerprint`, which must be in the session.
    func locate(fingerprint: String) throws(OpenPGPError) -> RNPKey {
        var handle: rnp_key_handle_t?
        let code = rnp_locate_key(ffi, "fingerprint", fingerprint, &handle)
        guard code == RNPCode.success, let handle else { throw OpenPGPError.failed("key lookup", code) }
        return RNPKey(handle: handle)
    }
}

/// A key handle, destroyed with the value.
final class RNPKey {
    let handle: rnp_key_handle_t

    init(handle: rnp_key_handle_t) { self.handle = handle }

    deinit { rnp_key_handle_destroy(handle) }

    /// A yes-or-no property of the key (`rnp_key_have_secret`, `rnp_key_is_protected`, …).
    func flag(_ query: (rnp_key_handle_t?, UnsafeMutablePointer<Bool>?) -> rnp_result_t) throws(OpenPGPError) -> Bool {
        var result = false
        let code = query(handle, &result)
        guard code == RNPCode.success else { throw OpenPGPError.failed("key inspection", code) }
        return result
    }

    /// A string property of the key (`rnp_key_get_fprint`, …).
    func string(
        _ query: (rnp_key_handle_t?, UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> rnp_result_t
    )
        throws(OpenPGPError) -> String
    {
        var value: UnsafeMutablePointer<CChar>?
        let code = query(handle, &value)
        guard code == RNPCode.success, let value else { throw OpenPGPError.failed("key inspection", code) }
        return RNPBuffer.takeString(value)
    }

    /// What secret material the key holds.
    enum Secret {
        /// A certificate only.
        case none
        /// A secret part without usable material: a GnuPG stub (`--export-secret-subkeys`, a smartcard) or unknown.
        case unavailable
        /// Secret material under a passphrase.
        case protected
        /// Secret material in the clear.
        case plain
    }

    /// What secret material the key holds.
    func secret() throws(OpenPGPError) -> Secret {
        guard try flag(rnp_key_have_secret) else { return .none }
        if ["GPG-None", "GPG-Smartcard", "Unknown"].contains(try string(rnp_key_get_protection_type)) {
            return .unavailable
        }
        return try flag(rnp_key_is_protected) ? .protected : .plain
    }

    /// Whether the key (the primary or one of its subkeys) has a valid key for `usage` ("encrypt", "sign") now,
    /// and, with `secret`, that key's secret material in the clear (not a GnuPG stub).
    func hasValidKey(for usage: String, secret: Bool = false) -> Bool {
        var found: rnp_key_handle_t?
        guard rnp_key_get_default_key(handle, usage, 0, &found) == RNPCode.success, let found else { return false }
        let key = RNPKey(handle: found)
        return !secret || (try? key.secret()) == .plain
    }

    /// The key's fingerprint, upper-case hex.
    func fingerprint() throws(OpenPGPError) -> String { try string(rnp_key_get_fprint) }

    /// The key's user ids that carry a valid self-signature and are not revoked, in the key's order (photo ids
    /// left out). Anyone can append a user id packet to someone's certificate, or splice in another key's user id
    /// with its signature: only the key's own valid certification makes the name the key's.
    func userIDs() throws(OpenPGPError) -> [String] {
        var count = 0
        let code = rnp_key_get_uid_count(handle, &count)
        guard code == RNPCode.success else { throw OpenPGPError.failed("key inspection", code) }
        var userIDs: [String] = []
        for index in 0..<count {
            var uid: rnp_uid_handle_t?
            let found = rnp_key_get_uid_handle_at(handle, index, &uid)
            guard found == RNPCode.success, let uid else { throw OpenPGPError.failed("key inspection", found) }
            defer { rnp_uid_handle_destroy(uid) }
            var type: UInt32 = 0
            var valid = false
            var revoked = true
            guard rnp_uid_get_type(uid, &type) == RNPCode.success, type == UInt32(RNP_USER_ID),
                rnp_uid_is_valid(uid, &valid) == RNPCode.success, valid,
                rnp_uid_is_revoked(uid, &revoked) == RNPCode.success, !revoked
            else { continue }
            var value: UnsafeMutablePointer<CChar>?
            let read = rnp_key_get_uid_at(handle, index, &value)
            guard read == RNPCode.success, let value else { throw OpenPGPError.failed("key inspection", read) }
            userIDs.append(RNPBuffer.takeString(value))
        }
        return userIDs
    }

    /// The key's subkeys.
    func subkeys() throws(OpenPGPError) -> [RNPKey] {
        var count = 0
        let code = rnp_key_get_subkey_count(handle, &count)
        guard code == RNPCode.success else { throw OpenPGPError.failed("key inspection", code) }
        var subkeys: [RNPKey] = []
        for index in 0..<count {
            var subkey: rnp_key_handle_t?
            let code = rnp_key_get_subkey_at(handle, index, &subkey)
            guard code == RNPCode.success, let subkey else { throw OpenPGPError.failed("key inspection", code) }
            subkeys.append(RNPKey(handle: subkey))
        }
        return subkeys
    }

    /// Writes the key (with its subkeys) in `flags`' form to a collector.
    func export(flags: UInt32) throws(OpenPGPError) -> ZeroingBuffer {
        let buffer = ZeroingBuffer(limit: Int.max)
        try RNPOutput.with(buffer, operation: "key export") { output throws(OpenPGPError) in
            try RNP.check(rnp_key_export(handle, output, flags | RNPCode.exportSubkeys), "key export")
        }
        return buffer
    }
}

/// Strings RNP allocates for the caller: copied out, then cleared and freed as its header asks.
enum RNPBuffer {
    /// Copies the C string and releases RNP's buffer (`rnp_buffer_clear` + `rnp_buffer_destroy`).
    static func takeString(_ pointer: UnsafeMutablePointer<CChar>) -> String {
        let string = String(cString: pointer)
        rnp_buffer_clear(pointer, strlen(pointer))
        rnp_buffer_destroy(pointer)
        return string
    }
}

/// An RNP input that reads caller memory in place.
enum RNPInput {
    /// The start of every armor line (RFC 4880, section 6.2).
    private static let armorStart = Array("-----BEGIN PGP ".utf8)

    /// Whether `bytes` look armored (RNP looks for armor near the start) and hold a control character other than tab,
    /// line feed and carriage return anywhere.
    static func isArmoredWithControlCharacters(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let head = UnsafeRawBufferPointer(rebasing: bytes.prefix(64 << 10))
        guard ByteSearch.count(of: armorStart, in: head) > 0 else { return false }
        return bytes.contains { $0 < 0x20 && $0 != 0x09 && $0 != 0x0A && $0 != 0x0D || $0 == 0x7F }
    }

    /// A reader at its end from the start.
    private static let emptyReader:
        @convention(c) (UnsafeMutableRawPointer?, UnsafeMutableRawPointer?, Int, UnsafeMutablePointer<Int>?) -> Bool = {
            _,
            _,
            _,
            read in
            read?.pointee = 0
            return true
        }

    /// Runs `body` with an input over `bytes` (no copy: the buffer outlives the input).
    ///
    /// OpenPGP input (keys, messages, signatures) must not be empty, and armored OpenPGP input must hold no control
    /// character: RNP 0.16 prints unknown armor header lines, which the sender chose, to standard error, and a
    /// terminal would obey escape sequences in them. `isData` marks bytes RNP does not parse (what is encrypted,
    /// signed or checked against a detached signature): they may be empty and are taken as they are.
    static func with<R>(
        _ bytes: UnsafeRawBufferPointer,
        what: String,
        isData: Bool = false,
        _ body: (rnp_input_t) throws(OpenPGPError) -> R
    ) throws(OpenPGPError) -> R {
        if !isData {
            guard !bytes.isEmpty else { throw .malformed(what: what) }
            guard !isArmoredWithControlCharacters(bytes) else { throw .malformed(what: what) }
        }
        var input: rnp_input_t?
        // RNP refuses an empty memory input ("buffer too short"); an empty stream reads as empty data.
        let code =
            if let base = bytes.baseAddress, !bytes.isEmpty {
                rnp_input_from_memory(&input, base.assumingMemoryBound(to: UInt8.self), bytes.count, false)
            } else {
                rnp_input_from_callback(&input, emptyReader, nil, nil)
            }
        guard code == RNPCode.success, let input else { throw OpenPGPError.failed("reading the \(what)", code) }
        defer { rnp_input_destroy(input) }
        return try body(input)
    }
}

/// An RNP output that writes into a ``ZeroingBuffer`` through a callback, so no output of RNP's own holds the bytes.
enum RNPOutput {
    /// Runs `body` with an output into `buffer`, then flushes the output (RNP caches the last bytes written until
    /// its output is finished) and destroys it.
    static func with<R>(
        _ buffer: ZeroingBuffer,
        operation: String,
        _ body: (rnp_output_t) throws(OpenPGPError) -> R
    )
        throws(OpenPGPError) -> R
    {
        var output: rnp_output_t?
        let context = Unmanaged.passUnretained(buffer).toOpaque()
        let code = rnp_output_to_callback(&output, writer, closer, context)
        guard code == RNPCode.success, let output else { throw OpenPGPError.failed(operation, code) }
        defer { rnp_output_destroy(output) }
        return try withExtendedLifetime(buffer) { () throws(OpenPGPError) -> R in
            let result = try body(output)
            let finished = rnp_output_finish(output)
            guard finished == RNPCode.success else { throw OpenPGPError.failed(operation, finished) }
            return result
        }
    }

    private static let writer: @convention(c) (UnsafeMutableRawPointer?, UnsafeRawPointer?, Int) -> Bool = {
        context,
        bytes,
        count in
        guard let context else { return false }
        let buffer = Unmanaged<ZeroingBuffer>.fromOpaque(context).takeUnretainedValue()
        guard count > 0 else { return true }
        guard let bytes else { return false }
        return buffer.append(UnsafeRawBufferPointer(start: bytes, count: count))
    }

    private static let closer: @convention(c) (UnsafeMutableRawPointer?, Bool) -> Void = { _, _ in }
}

/// A growing byte buffer that zeroes every allocation it lets go of, and refuses to grow past `limit`.
///
/// RNP writes decrypted messages and exported secret keys into one; the bytes leave it as ``SecretBytes`` or as a
/// copy the caller asked for, and the buffer itself is zeroed when released.
final class ZeroingBuffer {
    private var pointer: UnsafeMutableRawPointer?
    private var capacity = 0
    private(set) var count = 0
    let limit: Int
    /// Whether a write was refused because it would pass ``limit``.
    private(set) var exceededLimit = false

    init(limit: Int) { self.limit = limit }

    deinit { wipeAndFree() }

    func append(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard bytes.count <= limit - count else {
            exceededLimit = true
            return false
        }
        let needed = count + bytes.count
        if needed > capacity {
            let newCapacity = max(needed, min(limit, max(4096, capacity * 2)))
            guard let grown = malloc(newCapacity) else { return false }
            if let pointer {
                grown.copyMemory(from: pointer, byteCount: count)
                explicit_bzero(pointer, capacity)
                free(pointer)
            }
            pointer = grown
            capacity = newCapacity
        }
        if let base = bytes.baseAddress, let pointer {
            (pointer + count).copyMemory(from: base, byteCount: bytes.count)
        }
        count = needed
        return true
    }

    /// The bytes, read in place.
    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// A copy as an array (for public data: ciphertext, public keys, signatures, and plaintext the caller takes).
    var bytes: [UInt8] { withUnsafeBytes { Array($0) } }

    /// A copy in locked, zeroing memory.
    var secretBytes: SecretBytes { withUnsafeBytes { SecretBytes(copying: $0) } }

    /// Zeroes and frees the storage now.
    func wipeAndFree() {
        if let pointer {
            explicit_bzero(pointer, capacity)
            free(pointer)
        }
        pointer = nil
        capacity = 0
        count = 0
    }
}
