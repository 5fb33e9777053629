import Crypto

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The AEAD that an envelope or stream uses.
public enum EnvelopeAlgorithm: UInt8, Sendable, CaseIterable {
    /// AES-256-GCM (the default: hardware accelerated on current x86 and ARM processors).
    case aes256GCM = 1
    /// ChaCha20-Poly1305 (for processors without AES instructions).
    case chaCha20Poly1305 = 2
}

/// Sealed envelope v1: the one format for every small ciphertext at rest (keychain items, wrapped keys, store cells,
/// settings).
///
/// Layout (all integers big-endian; `docs/FORMAT.md` is the reference):
///
/// ```
/// "CFEV" | version 0x01 | algorithm | key id (8) | context tag (8) | nonce (12) | ciphertext | tag (16)
/// ```
///
/// The 34-byte header and the encoded context are the AEAD's associated data, so any changed header byte, any
/// other key and any other context fail to open. Nonces are random (96 bits); one key should seal fewer than 2^32
/// envelopes.
public enum Envelope {
    /// `"CFEV"`.
    public static let magic: [UInt8] = [0x43, 0x46, 0x45, 0x56]
    /// The version this build writes.
    public static let version: UInt8 = 1
    /// Header bytes before the ciphertext.
    public static let headerCount = 34
    /// Bytes an envelope adds to its plaintext.
    public static let overhead = headerCount + 16

    /// Seals `plaintext` for `context` under `key`.
    ///
    /// - Parameters:
    ///   - plaintext: The bytes to protect.
    ///   - key: The key.
    ///   - context: Where the ciphertext belongs; opening needs the same context.
    ///   - algorithm: The AEAD; AES-256-GCM by default.
    /// - Returns: The envelope bytes.
    public static func seal(
        _ plaintext: [UInt8],
        with key: EnvelopeKey,
        context: EnvelopeContext,
        algorithm: EnvelopeAlgorithm = .aes256GCM
    ) throws(CofferCryptoError) -> [UInt8] {
        let result = plaintext.withUnsafeBytes { raw in
            Result { () throws(CofferCryptoError) in try seal(raw, with: key, context: context, algorithm: algorithm) }
        }
        return try result.get()
    }

    /// Seals bytes in place in memory (for example a ``SecretBytes`` buffer) without copying them into an array.
    public static func seal(
        _ plaintext: UnsafeRawBufferPointer,
        with key: EnvelopeKey,
        context: EnvelopeContext,
        algorithm: EnvelopeAlgorithm = .aes256GCM
    ) throws(CofferCryptoError) -> [UInt8] {
        try withAssociatedData(context: context) { aad throws(CofferCryptoError) in
            // The nonce is drawn straight into the header, from the process's buffer of kernel randomness
            // (swift-crypto's AES.GCM.Nonce() makes two getrandom calls).
            SystemRandom.fillPublic(UnsafeMutableRawBufferPointer(rebasing: aad[nonceRange]))
            return try seal(plaintext, with: key, context: context, algorithm: algorithm, header: aad)
        }
    }

    /// Seals with a caller-chosen nonce. Only for known-answer tests: a repeated nonce under one key breaks both
    /// confidentiality and integrity.
    ///
    /// - Warning: Never call this outside tests. It is `package`, so it is out of reach of other packages.
    package static func seal(
        _ plaintext: UnsafeRawBufferPointer,
        with key: EnvelopeKey,
        context: EnvelopeContext,
        algorithm: EnvelopeAlgorithm,
        nonce: [UInt8]
    ) throws(CofferCryptoError) -> [UInt8] {
        precondition(nonce.count == nonceRange.count, "an envelope nonce is 12 bytes")
        return try withAssociatedData(context: context) { aad throws(CofferCryptoError) in
            UnsafeMutableRawBufferPointer(rebasing: aad[nonceRange]).copyBytes(from: nonce)
            return try seal(plaintext, with: key, context: context, algorithm: algorithm, header: aad)
        }
    }

    /// Where the nonce sits in the header.
    private static let nonceRange = 22..<34

    /// Fills in the header around the nonce already at `aad[22..<34]`, seals, and returns the envelope.
    ///
    /// `aad` is the associated data: the 34-byte header, then the encoded context. The envelope is the header's
    /// first 22 bytes followed by the AEAD's combined output (nonce ‖ ciphertext ‖ tag), which is copied once,
    /// straight into the envelope's one allocation.
    private static func seal(
        _ plaintext: UnsafeRawBufferPointer,
        with key: EnvelopeKey,
        context: EnvelopeContext,
        algorithm: EnvelopeAlgorithm,
        header aad: UnsafeMutableRawBufferPointer
    ) throws(CofferCryptoError) -> [UInt8] {
        aad.copyBytes(from: magic)
        aad[4] = version
        aad[5] = algorithm.rawValue
        UnsafeMutableRawBufferPointer(rebasing: aad[6..<14]).copyBytes(from: key.id)
        key.withContextTag(context) { UnsafeMutableRawBufferPointer(rebasing: aad[14..<22]).copyMemory(from: $0) }
        let associated = UnsafeRawBufferPointer(aad)
        let nonce = UnsafeRawBufferPointer(rebasing: associated[nonceRange])
        let combined: Data
        do {
            switch algorithm {
            case .aes256GCM:
                let box = try AES.GCM.seal(
                    plaintext,
                    using: key.aeadKey,
                    nonce: AES.GCM.Nonce(data: nonce),
                    authenticating: associated
                )
                guard let bytes = box.combined else { throw CofferCryptoError.primitiveFailure("seal") }
                combined = bytes
            case .chaCha20Poly1305:
                combined = try ChaChaPoly.seal(
                    plaintext,
                    using: key.aeadKey,
                    nonce: ChaChaPoly.Nonce(data: nonce),
                    authenticating: associated
                ).combined
            }
        } catch {
            throw .primitiveFailure("seal")
        }
        let count = nonceRange.lowerBound + combined.count
        guard count == overhead + plaintext.count else { throw .primitiveFailure("seal") }
        return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            let out = UnsafeMutableRawBufferPointer(buffer)
            out.copyMemory(from: UnsafeRawBufferPointer(rebasing: associated[..<nonceRange.lowerBound]))
            combined.withUnsafeBytes {
                UnsafeMutableRawBufferPointer(rebasing: out[nonceRange.lowerBound...]).copyMemory(from: $0)
            }
            initialized = count
        }
    }

    /// Calls `body` with stack space for the associated data, the context already written after the header's 34
    /// bytes, which `body` fills in.
    private static func withAssociatedData<T, E: Error>(
        context: EnvelopeContext,
        _ body: (UnsafeMutableRawBufferPointer) throws(E) -> T
    ) throws(E) -> T {
        let count = headerCount + context.encoded.count
        return try withUnsafeTemporaryAllocation(byteCount: count, alignment: 8) { aad throws(E) in
            UnsafeMutableRawBufferPointer(rebasing: aad[headerCount...]).copyBytes(from: context.encoded)
            return try body(aad)
        }
    }

    /// Opens an envelope sealed for `context` under `key`.
    ///
    /// - Throws: ``CofferCryptoError/truncated``, ``CofferCryptoError/notCofferFormat``,
    ///   ``CofferCryptoError/unsupportedVersion(_:)``, ``CofferCryptoError/unsupportedAlgorithm(_:)``,
    ///   ``CofferCryptoError/wrongKey``, ``CofferCryptoError/wrongContext`` or
    ///   ``CofferCryptoError/authenticationFailed``.
    /// - Warning: The returned array is an ordinary copy; use ``openSecret(_:with:context:)`` for key material.
    public static func open(
        _ envelope: [UInt8],
        with key: EnvelopeKey,
        context: EnvelopeContext
    ) throws(CofferCryptoError) -> [UInt8] {
        // Not zeroed: the caller receives an ordinary copy anyway (use openSecret for key material).
        try openData(envelope, with: key, context: context).withUnsafeBytes { Array($0) }
    }

    /// Opens an envelope whose plaintext is key material, straight into ``SecretBytes``; the intermediate buffer is
    /// zeroed.
    public static func openSecret(
        _ envelope: [UInt8],
        with key: EnvelopeKey,
        context: EnvelopeContext
    ) throws(CofferCryptoError) -> SecretBytes {
        var data = try openData(envelope, with: key, context: context)
        defer { zero(&data) }
        return SecretBytes(copying: data)
    }

    /// Reads the header without opening: the algorithm and key id, after checking magic, version and length.
    public static func inspect(
        _ envelope: [UInt8]
    ) throws(CofferCryptoError) -> (
        algorithm: EnvelopeAlgorithm, keyID: [UInt8]
    ) {
        guard envelope.count >= 6 else { throw .truncated }
        guard envelope[0] == magic[0], envelope[1] == magic[1], envelope[2] == magic[2], envelope[3] == magic[3] else {
            throw .notCofferFormat
        }
        guard envelope[4] == version else { throw .unsupportedVersion(envelope[4]) }
        guard let algorithm = EnvelopeAlgorithm(rawValue: envelope[5]) else { throw .unsupportedAlgorithm(envelope[5]) }
        guard envelope.count >= overhead else { throw .truncated }
        return (algorithm, Array(envelope[6..<14]))
    }

    private static func openData(
        _ envelope: [UInt8],
        with key: EnvelopeKey,
        context: EnvelopeContext
    ) throws(CofferCryptoError) -> Data {
        let (algorithm, _) = try inspect(envelope)
        // Compared in place: this runs for every sealed cell a list page shows.
        let idMatches = envelope.withUnsafeBytes { raw in
            key.id.withUnsafeBytes { ConstantTime.equals(UnsafeRawBufferPointer(rebasing: raw[6..<14]), $0) }
        }
        guard idMatches else { throw .wrongKey }
        let opened = withAssociatedData(context: context) { aad in
            UnsafeMutableRawBufferPointer(rebasing: aad[..<headerCount]).copyBytes(from: envelope[..<headerCount])
            return Result { () throws(CryptoKitMetaError) in
                try openAEAD(envelope, key: key, algorithm: algorithm, aad: UnsafeRawBufferPointer(aad))
            }
        }
        do {
            return try opened.get()
        } catch {
            // The header (with its context tag) and the context are both associated data, so an envelope that opens
            // was sealed for this context: the tag (an HMAC, about 0.65 µs through swift-crypto) is only computed to
            // tell a wrong context from damage once opening failed.
            let contextMatches = envelope.withUnsafeBytes { raw in
                key.withContextTag(context) { ConstantTime.equals(UnsafeRawBufferPointer(rebasing: raw[14..<22]), $0) }
            }
            guard contextMatches else { throw .wrongContext }
            throw .authenticationFailed
        }
    }

    private static func openAEAD(
        _ envelope: [UInt8],
        key: EnvelopeKey,
        algorithm: EnvelopeAlgorithm,
        aad: UnsafeRawBufferPointer
    ) throws(CryptoKitMetaError) -> Data {
        // nonce ‖ ciphertext ‖ tag is exactly the AEADs' combined representation.
        let combined = envelope[22...]
        switch algorithm {
        case .aes256GCM:
            return try AES.GCM.open(AES.GCM.SealedBox(combined: combined), using: key.aeadKey, authenticating: aad)
        case .chaCha20Poly1305:
            return try ChaChaPoly.open(
                ChaChaPoly.SealedBox(combined: combined),
                using: key.aeadKey,
                authenticating: aad
            )
        }
    }

    /// Overwrites a plaintext buffer before it is released.
    static func zero(_ data: inout Data) {
        data.withUnsafeMutableBytes { buffer in
            if let base = buffer.baseAddress { explicit_bzero(base, buffer.count) }
        }
    }
}
