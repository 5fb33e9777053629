import Crypto

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Streaming AEAD v1 for large data (attachments): the plaintext is cut into 64 KiB chunks, each sealed with a
/// per-file key and a nonce made of the chunk counter and a last-chunk flag.
///
/// Layout (`docs/FORMAT.md`, "Stream v1"):
///
/// ```
/// header: "CFST" | version 0x01 | algorithm | key id (8) | chunk size u32 (65536) | salt (32)     = 50 bytes
/// chunks: ciphertext (65536, or 0...65536 for the last) | tag (16), repeated
/// ```
///
/// The per-file key is HKDF-SHA256(stream subkey, salt, "coffer.stream.v1" ‖ header ‖ context), so a changed
/// header, another file's chunk or another context fails to open. The nonce is an 11-byte big-endian chunk counter
/// followed by `0x01` on the last chunk and `0x00` otherwise, so reordering, truncation at a chunk boundary and
/// appending are all detected. Only the last chunk may be shorter than 64 KiB, and it is empty only when the whole
/// plaintext is.
public enum StreamingAEAD {
    /// `"CFST"`.
    public static let magic: [UInt8] = [0x43, 0x46, 0x53, 0x54]
    /// The version this build writes.
    public static let version: UInt8 = 1
    /// Plaintext bytes per chunk.
    public static let chunkSize = 65_536
    /// Header bytes.
    public static let headerCount = 50
    /// Tag bytes after each chunk.
    public static let tagCount = 16

    /// Encrypts everything `source` yields into `sink`, holding at most two chunks in memory.
    public static func encrypt(
        from source: inout some ByteSource,
        to sink: inout some ByteSink,
        key: EnvelopeKey,
        context: EnvelopeContext,
        algorithm: EnvelopeAlgorithm = .aes256GCM
    ) throws(CofferCryptoError) {
        var sealer = StreamSealer(key: key, context: context, algorithm: algorithm)
        try sink.write(sealer.header)
        var current = try readFull(from: &source, count: chunkSize)
        while true {
            // Read one chunk ahead: a chunk is the last exactly when nothing follows it.
            let next = current.count == chunkSize ? try readFull(from: &source, count: chunkSize) : []
            let isLast = next.isEmpty
            try sink.write(try sealer.seal(current, isLast: isLast))
            if isLast { return }
            current = next
        }
    }

    /// Decrypts a stream from `source` into `sink`, holding at most two chunks in memory.
    ///
    /// - Warning: Chunks are written as they verify, before the end of the stream has been seen. If this throws,
    ///   whatever reached `sink` is incomplete and must be discarded (delete the partial file).
    public static func decrypt(
        from source: inout some ByteSource,
        to sink: inout some ByteSink,
        key: EnvelopeKey,
        context: EnvelopeContext
    ) throws(CofferCryptoError) {
        let header = try readFull(from: &source, count: headerCount)
        var opener = try StreamOpener(key: key, context: context, header: header)
        let sealedChunk = chunkSize + tagCount
        var current = try readFull(from: &source, count: sealedChunk)
        while true {
            let next = current.count == sealedChunk ? try readFull(from: &source, count: sealedChunk) : []
            let isLast = next.isEmpty
            try sink.write(try opener.open(current, isLast: isLast))
            if isLast { return }
            current = next
        }
    }

    /// Seals a whole in-memory buffer (for small data and tests).
    public static func seal(
        _ plaintext: [UInt8],
        key: EnvelopeKey,
        context: EnvelopeContext,
        algorithm: EnvelopeAlgorithm = .aes256GCM
    ) throws(CofferCryptoError) -> [UInt8] {
        var source = BufferSource(plaintext)
        var sink = BufferSink()
        try encrypt(from: &source, to: &sink, key: key, context: context, algorithm: algorithm)
        return sink.bytes
    }

    /// Opens a whole in-memory stream (for small data and tests).
    public static func open(
        _ stream: [UInt8],
        key: EnvelopeKey,
        context: EnvelopeContext
    ) throws(CofferCryptoError)
        -> [UInt8]
    {
        var source = BufferSource(stream)
        var sink = BufferSink()
        try decrypt(from: &source, to: &sink, key: key, context: context)
        return sink.bytes
    }

    /// Reads until `count` bytes or the end of the source. The buffer is not zeroed first: only the bytes read are
    /// ever part of the array.
    package static func readFull(
        from source: inout some ByteSource,
        count: Int
    ) throws(CofferCryptoError) -> [UInt8] {
        var failure: CofferCryptoError?
        let buffer = [UInt8](unsafeUninitializedCapacity: count) { raw, initialized in
            let bytes = UnsafeMutableRawBufferPointer(raw)
            var filled = 0
            while filled < count {
                do throws(CofferCryptoError) {
                    let got = try source.read(into: UnsafeMutableRawBufferPointer(rebasing: bytes[filled...]))
                    if got == 0 { break }
                    filled += got
                } catch {
                    failure = error
                    break
                }
            }
            initialized = filled
        }
        if let failure { throw failure }
        return buffer
    }
}

/// Seals the chunks of one stream in order. Most callers use ``StreamingAEAD/encrypt(from:to:key:context:algorithm:)``.
public struct StreamSealer: Sendable {
    /// The 50-byte header to write before the first chunk.
    public let header: [UInt8]
    private let fileKey: SymmetricKey
    private let algorithm: EnvelopeAlgorithm
    private var counter: UInt64 = 0
    private var finished = false

    /// Starts a stream with a fresh random salt.
    public init(key: EnvelopeKey, context: EnvelopeContext, algorithm: EnvelopeAlgorithm = .aes256GCM) {
        self.init(key: key, context: context, algorithm: algorithm, salt: SystemRandom.publicBytes(32))
    }

    /// Starts a stream with a caller-chosen salt. Only for known-answer tests.
    ///
    /// - Warning: Never call this outside tests; a repeated salt repeats nonces.
    package init(key: EnvelopeKey, context: EnvelopeContext, algorithm: EnvelopeAlgorithm, salt: [UInt8]) {
        precondition(salt.count == 32, "a stream salt is 32 bytes")
        var header = StreamingAEAD.magic
        header.append(StreamingAEAD.version)
        header.append(algorithm.rawValue)
        header += key.id
        header.appendBigEndian(UInt32(StreamingAEAD.chunkSize))
        header += salt
        self.header = header
        self.algorithm = algorithm
        self.fileKey = StreamChunkCipher.fileKey(key: key, header: header, context: context)
    }

    /// Seals the next chunk. Every chunk but the last must be exactly ``StreamingAEAD/chunkSize`` bytes.
    public mutating func seal(_ chunk: [UInt8], isLast: Bool) throws(CofferCryptoError) -> [UInt8] {
        guard !finished else { throw .malformedStream("a chunk was sealed after the last one") }
        guard chunk.count <= StreamingAEAD.chunkSize, isLast || chunk.count == StreamingAEAD.chunkSize else {
            throw .malformedStream("only the last chunk may be shorter than the chunk size")
        }
        let nonce = StreamChunkCipher.nonce(counter: counter, isLast: isLast)
        counter += 1
        finished = isLast
        return try StreamChunkCipher.seal(chunk, key: fileKey, nonce: nonce, algorithm: algorithm)
    }
}

/// Opens the chunks of one stream in order. Most callers use ``StreamingAEAD/decrypt(from:to:key:context:)``.
public struct StreamOpener: Sendable {
    private let fileKey: SymmetricKey
    private let algorithm: EnvelopeAlgorithm
    private var counter: UInt64 = 0
    private var finished = false

    /// Validates the 50-byte header and prepares the per-file key.
    public init(key: EnvelopeKey, context: EnvelopeContext, header: [UInt8]) throws(CofferCryptoError) {
        guard header.count >= 4 else { throw .truncated }
        guard Array(header[0..<4]) == StreamingAEAD.magic else { throw .notCofferFormat }
        guard header.count >= 5 else { throw .truncated }
        guard header[4] == StreamingAEAD.version else { throw .unsupportedVersion(header[4]) }
        guard header.count == StreamingAEAD.headerCount else { throw .truncated }
        guard let algorithm = EnvelopeAlgorithm(rawValue: header[5]) else { throw .unsupportedAlgorithm(header[5]) }
        guard ConstantTime.equals(header[6..<14], key.id) else { throw .wrongKey }
        var reader = ByteReader(header, offset: 14)
        guard try reader.readBigEndian(UInt32.self) == UInt32(StreamingAEAD.chunkSize) else {
            throw .malformedStream("unsupported chunk size")
        }
        self.algorithm = algorithm
        self.fileKey = StreamChunkCipher.fileKey(key: key, header: header, context: context)
    }

    /// Opens the next chunk; `isLast` says whether the reader saw the end of the data after it.
    public mutating func open(_ sealed: [UInt8], isLast: Bool) throws(CofferCryptoError) -> [UInt8] {
        guard !finished else { throw .malformedStream("data follows the last chunk") }
        let body = sealed.count - StreamingAEAD.tagCount
        guard body >= 0 else { throw .truncated }
        guard isLast || body == StreamingAEAD.chunkSize else { throw .authenticationFailed }
        guard !(isLast && body == 0 && counter > 0) else { throw .authenticationFailed }
        let nonce = StreamChunkCipher.nonce(counter: counter, isLast: isLast)
        counter += 1
        finished = isLast
        return try StreamChunkCipher.open(sealed, key: fileKey, nonce: nonce, algorithm: algorithm)
    }
}

/// The per-chunk AEAD calls shared by sealer and opener.
enum StreamChunkCipher {
    static func fileKey(key: EnvelopeKey, header: [UInt8], context: EnvelopeContext) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(
            inputKeyMaterial: key.streamKey,
            salt: header[18..<50],
            info: Array("coffer.stream.v1".utf8) + header + context.encoded,
            outputByteCount: 32
        )
    }

    static func nonce(counter: UInt64, isLast: Bool) -> [UInt8] {
        var nonce: [UInt8] = [0, 0, 0]
        nonce.appendBigEndian(counter)
        nonce.append(isLast ? 1 : 0)
        return nonce
    }

    static func seal(
        _ chunk: [UInt8],
        key: SymmetricKey,
        nonce: [UInt8],
        algorithm: EnvelopeAlgorithm
    )
        throws(CofferCryptoError) -> [UInt8]
    {
        do {
            switch algorithm {
            case .aes256GCM:
                let box = try AES.GCM.seal(chunk, using: key, nonce: AES.GCM.Nonce(data: nonce))
                return joined(box.ciphertext, box.tag)
            case .chaCha20Poly1305:
                let box = try ChaChaPoly.seal(chunk, using: key, nonce: ChaChaPoly.Nonce(data: nonce))
                return joined(box.ciphertext, box.tag)
            }
        } catch {
            throw .primitiveFailure("seal")
        }
    }

    /// Ciphertext then tag, copied once each (`Array(a) + Array(b)` copies each twice).
    private static func joined(_ ciphertext: Data, _ tag: Data) -> [UInt8] {
        var sealed: [UInt8] = []
        sealed.reserveCapacity(ciphertext.count + tag.count)
        sealed.append(contentsOf: ciphertext)
        sealed.append(contentsOf: tag)
        return sealed
    }

    static func open(
        _ sealed: [UInt8],
        key: SymmetricKey,
        nonce: [UInt8],
        algorithm: EnvelopeAlgorithm
    )
        throws(CofferCryptoError) -> [UInt8]
    {
        let split = sealed.count - StreamingAEAD.tagCount
        do {
            switch algorithm {
            case .aes256GCM:
                let box = try AES.GCM.SealedBox(
                    nonce: AES.GCM.Nonce(data: nonce),
                    ciphertext: sealed[..<split],
                    tag: sealed[split...]
                )
                return Array(try AES.GCM.open(box, using: key))
            case .chaCha20Poly1305:
                let box = try ChaChaPoly.SealedBox(
                    nonce: ChaChaPoly.Nonce(data: nonce),
                    ciphertext: sealed[..<split],
                    tag: sealed[split...]
                )
                return Array(try ChaChaPoly.open(box, using: key))
            }
        } catch {
            throw .authenticationFailed
        }
    }
}
