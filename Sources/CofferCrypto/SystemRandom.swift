import CCofferSystem

/// Random bytes from the kernel (getrandom(2)), one system call per fill.
///
/// Swift's `SystemRandomNumberGenerator`, and swift-crypto's random nonces built on it, make one system call per
/// eight bytes; an envelope's 12-byte nonce cost two, which was most of a small envelope's seal.
package enum SystemRandom {
    /// Fills `buffer`. Traps when the kernel has no getrandom, as the standard library's generator does.
    package static func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        guard coffer_random_bytes(base, buffer.count) == 0 else {
            fatalError("the kernel's random number generator (getrandom) is unavailable")
        }
    }

    /// `count` random bytes.
    package static func bytes(_ count: Int) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            fill(UnsafeMutableRawBufferPointer(buffer))
            initialized = count
        }
    }
}
