import CCofferSystem

/// Random bytes from the kernel (getrandom(2)).
///
/// Swift's `SystemRandomNumberGenerator`, and swift-crypto's random nonces built on it, make one system call per
/// eight bytes; an envelope's 12-byte nonce cost two, which was most of a small envelope's seal. Secrets come
/// straight from the kernel, one call per fill; public values (nonces, salts) come from a process-wide buffer of
/// kernel output that a forked child never shares (``publicBytes(_:)``).
package enum SystemRandom {
    /// Fills `buffer`. Traps when the kernel has no getrandom, as the standard library's generator does.
    package static func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        guard coffer_random_bytes(base, buffer.count) == 0 else {
            fatalError("the kernel's random number generator (getrandom) is unavailable")
        }
    }

    /// `count` (at most 64) random bytes for a value that is written in the clear: a nonce or a salt, never a key.
    ///
    /// They come from a buffer refilled with one getrandom call per 4,032 bytes; each byte is handed out once and
    /// overwritten, and the buffer's page is wiped in a forked child (MADV_WIPEONFORK), which refills it instead
    /// of repeating its parent's nonces. A kernel without that mark gets one getrandom call per value.
    package static func publicBytes(_ count: Int) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            fillPublic(UnsafeMutableRawBufferPointer(buffer))
            initialized = count
        }
    }

    /// Fills `buffer` (at most 64 bytes) with a public random value, in place, as ``publicBytes(_:)`` does.
    package static func fillPublic(_ buffer: UnsafeMutableRawBufferPointer) {
        precondition(buffer.count <= 64, "public random values are at most 64 bytes")
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        guard coffer_random_public_bytes(base, buffer.count) == 0 else {
            fatalError("the kernel's random number generator (getrandom) is unavailable")
        }
    }
}
