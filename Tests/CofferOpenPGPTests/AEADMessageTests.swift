import CRNP
import CofferOpenPGP
import Testing

/// Messages with AEAD integrity (OCB, EAX) instead of an MDC. Neither gpg 2.2 nor sq 0.27 writes them, so RNP
/// itself writes them here, through its FFI: the only place a test calls RNP directly.
@Suite struct AEADMessageTests {
    let plaintext = Array("Sealed with a tag instead of a hash.\n".utf8)

    /// `plaintext` encrypted to `key` with RNP's AEAD `mode` ("OCB" or "EAX").
    func aeadMessage(_ plaintext: [UInt8], to key: OpenPGPPublicKey, mode: String) throws -> [UInt8] {
        var ffi: rnp_ffi_t?
        try #require(rnp_ffi_create(&ffi, "GPG", "GPG") == 0)
        defer { rnp_ffi_destroy(ffi) }
        var keyInput: rnp_input_t?
        var message: [UInt8] = []
        try key.bytes.withUnsafeBufferPointer { keyBytes in
            try #require(rnp_input_from_memory(&keyInput, keyBytes.baseAddress, keyBytes.count, false) == 0)
            defer { rnp_input_destroy(keyInput) }
            try #require(rnp_import_keys(ffi, keyInput, UInt32(RNP_LOAD_SAVE_PUBLIC_KEYS), nil) == 0)
        }
        var handle: rnp_key_handle_t?
        try #require(rnp_locate_key(ffi, "fingerprint", key.fingerprint, &handle) == 0)
        defer { rnp_key_handle_destroy(handle) }
        try plaintext.withUnsafeBufferPointer { data in
            var input: rnp_input_t?
            var output: rnp_output_t?
            try #require(rnp_input_from_memory(&input, data.baseAddress, data.count, false) == 0)
            defer { rnp_input_destroy(input) }
            try #require(rnp_output_to_memory(&output, 0) == 0)
            defer { rnp_output_destroy(output) }
            var op: rnp_op_encrypt_t?
            try #require(rnp_op_encrypt_create(&op, ffi, input, output) == 0)
            defer { rnp_op_encrypt_destroy(op) }
            try #require(rnp_op_encrypt_add_recipient(op, handle) == 0)
            try #require(rnp_op_encrypt_set_aead(op, mode) == 0)
            try #require(rnp_op_encrypt_execute(op) == 0)
            var buffer: UnsafeMutablePointer<UInt8>?
            var length = 0
            try #require(rnp_output_memory_get_buf(output, &buffer, &length, false) == 0)
            message = Array(UnsafeBufferPointer(start: buffer, count: length))
        }
        return message
    }

    @Test(arguments: [("OCB", "aead-ocb"), ("EAX", "aead-eax")])
    func aeadMessageDecryptsAndTamperingFails(mode: String, protection: String) throws {
        let alice = try OpenPGP.generateKey(userID: "Alice <alice@example.org>")
        let message = try aeadMessage(plaintext, to: alice.publicKey, mode: mode)
        let opened = try OpenPGP.decrypt(message, with: [alice])
        #expect(opened.plaintext == plaintext)
        #expect(opened.protection == .aead(protection))

        // The last bytes are the final authentication tag; the middle ones the encrypted chunk.
        for offset in [message.count - 1, message.count - 20, message.count - 40] {
            var tampered = message
            tampered[offset] ^= 0x01
            #expect(throws: OpenPGPError.integrityFailure, "offset \(offset)") {
                try OpenPGP.decrypt(tampered, with: [alice])
            }
        }
        // Cut short: the final tag is missing.
        #expect(throws: OpenPGPError.self) { try OpenPGP.decrypt(Array(message.dropLast(16)), with: [alice]) }
    }
}
