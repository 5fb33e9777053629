import CofferCrypto
import CofferTesting
import Crypto
import Foundation
import Testing

@Suite struct StreamingAEADTests {
    let key = try! EnvelopeKey(SecretBytes(randomCount: 32))
    let context: EnvelopeContext = ["attachments", "1"]
    let chunk = StreamingAEAD.chunkSize
    let sealedChunk = StreamingAEAD.chunkSize + StreamingAEAD.tagCount

    func data(_ count: Int) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) } }

    @Test(arguments: [0, 1, 65_535, 65_536, 65_537, 3 * 65_536, 3 * 65_536 + 11])
    func roundTripsAtChunkBoundaries(size: Int) throws {
        let plaintext = data(size)
        let sealed = try StreamingAEAD.seal(plaintext, key: key, context: context)
        let chunks = max(1, (size + chunk - 1) / chunk) + (size > 0 && size % chunk == 0 ? 0 : 0)
        #expect(sealed.count == StreamingAEAD.headerCount + size + chunks * StreamingAEAD.tagCount)
        #expect(try StreamingAEAD.open(sealed, key: key, context: context) == plaintext)
    }

    @Test func chaChaRoundTrips() throws {
        let plaintext = data(100_000)
        let sealed = try StreamingAEAD.seal(plaintext, key: key, context: context, algorithm: .chaCha20Poly1305)
        #expect(sealed[5] == EnvelopeAlgorithm.chaCha20Poly1305.rawValue)
        #expect(try StreamingAEAD.open(sealed, key: key, context: context) == plaintext)
    }

    @Test func truncationAtAChunkBoundaryIsDetected() throws {
        let sealed = try StreamingAEAD.seal(data(3 * chunk + 5), key: key, context: context)
        for chunks in 0...3 {
            let cut = Array(sealed.prefix(StreamingAEAD.headerCount + chunks * sealedChunk))
            #expect(throws: CofferCryptoError.self) { try StreamingAEAD.open(cut, key: key, context: context) }
        }
    }

    @Test func truncationInsideAChunkIsDetected() throws {
        let sealed = try StreamingAEAD.seal(data(2 * chunk), key: key, context: context)
        for cut in [1, 15, 16, 17, 1000, sealedChunk] {
            #expect(throws: CofferCryptoError.self) {
                try StreamingAEAD.open(Array(sealed.dropLast(cut)), key: key, context: context)
            }
        }
    }

    @Test func reorderedChunksAreDetected() throws {
        let sealed = try StreamingAEAD.seal(data(3 * chunk), key: key, context: context)
        let header = Array(sealed.prefix(StreamingAEAD.headerCount))
        let parts = (0..<3).map { index in
            Array(
                sealed[
                    (StreamingAEAD.headerCount + index * sealedChunk)..<(StreamingAEAD.headerCount + (index + 1)
                        * sealedChunk)
                ]
            )
        }
        let swapped = header + parts[1] + parts[0] + parts[2]
        #expect(throws: CofferCryptoError.authenticationFailed) {
            try StreamingAEAD.open(swapped, key: key, context: context)
        }
    }

    @Test func extendingTheStreamIsDetected() throws {
        let sealed = try StreamingAEAD.seal(data(chunk + 10), key: key, context: context)
        let extended = sealed + Array(sealed[StreamingAEAD.headerCount..<(StreamingAEAD.headerCount + sealedChunk)])
        #expect(throws: CofferCryptoError.self) { try StreamingAEAD.open(extended, key: key, context: context) }
        #expect(throws: CofferCryptoError.self) { try StreamingAEAD.open(sealed + [0], key: key, context: context) }
    }

    @Test func chunksFromAnotherFileDoNotOpen() throws {
        let first = try StreamingAEAD.seal(data(2 * chunk), key: key, context: context)
        let second = try StreamingAEAD.seal(data(2 * chunk), key: key, context: context)
        let mixed =
            Array(first.prefix(StreamingAEAD.headerCount + sealedChunk))
            + Array(second.suffix(from: StreamingAEAD.headerCount + sealedChunk))
        #expect(throws: CofferCryptoError.authenticationFailed) {
            try StreamingAEAD.open(mixed, key: key, context: context)
        }
    }

    @Test func wrongKeyAndWrongContextAndHeaderTampering() throws {
        let sealed = try StreamingAEAD.seal(data(100), key: key, context: context)
        let other = try EnvelopeKey(SecretBytes(randomCount: 32))
        #expect(throws: CofferCryptoError.wrongKey) { try StreamingAEAD.open(sealed, key: other, context: context) }
        #expect(throws: CofferCryptoError.authenticationFailed) {
            try StreamingAEAD.open(sealed, key: key, context: ["attachments", "2"])
        }
        for index in 18..<StreamingAEAD.headerCount {
            var tampered = sealed
            tampered[index] ^= 0x80
            #expect(throws: CofferCryptoError.authenticationFailed) {
                try StreamingAEAD.open(tampered, key: key, context: context)
            }
        }
        var version = sealed
        version[4] = 9
        #expect(throws: CofferCryptoError.unsupportedVersion(9)) {
            try StreamingAEAD.open(version, key: key, context: context)
        }
        var chunkSize = sealed
        chunkSize[16] ^= 1
        #expect(throws: CofferCryptoError.malformedStream("unsupported chunk size")) {
            try StreamingAEAD.open(chunkSize, key: key, context: context)
        }
    }

    @Test func sealerRefusesShortChunksBeforeTheLast() {
        var sealer = StreamSealer(key: key, context: context)
        #expect(throws: CofferCryptoError.self) { try sealer.seal([1, 2, 3], isLast: false) }
        _ = try? sealer.seal([1], isLast: true)
        #expect(throws: CofferCryptoError.self) { try sealer.seal([1], isLast: true) }
    }

    @Test func encryptsFilesThroughDescriptors() throws {
        let folder = TemporaryDirectory()
        let plaintext = data(5 * chunk + 123)
        let plainPath = "\(folder.path)/plain"
        let sealedPath = "\(folder.path)/sealed"
        let openedPath = "\(folder.path)/opened"
        try SecureFile.writeAtomically(plaintext, to: plainPath)
        let input = open(plainPath, O_RDONLY)
        let output = open(sealedPath, O_WRONLY | O_CREAT, 0o600)
        var source = FileDescriptorSource(fd: input)
        var sink = FileDescriptorSink(fd: output)
        try StreamingAEAD.encrypt(from: &source, to: &sink, key: key, context: context)
        close(input)
        close(output)
        let sealedInput = open(sealedPath, O_RDONLY)
        let openedOutput = open(openedPath, O_WRONLY | O_CREAT, 0o600)
        var sealedSource = FileDescriptorSource(fd: sealedInput)
        var openedSink = FileDescriptorSink(fd: openedOutput)
        try StreamingAEAD.decrypt(from: &sealedSource, to: &openedSink, key: key, context: context)
        close(sealedInput)
        close(openedOutput)
        #expect(try SecureFile.read(openedPath) == plaintext)
        #expect(try SecureFile.read(sealedPath)?.count == plaintext.count + 50 + 6 * 16)
    }

    @Test func matchesKnownAnswerVectors() throws {
        let vectors = try KnownAnswers.load().stream
        #expect(vectors.count == 8)
        for vector in vectors {
            let key = try EnvelopeKey(SecretBytes(copying: [UInt8](hexString: vector.key)!))
            let context = EnvelopeContext(vector.context)
            let algorithm = try #require(EnvelopeAlgorithm(rawValue: vector.algorithm))
            let plaintext = KnownAnswers.pattern(vector.plaintextLength)
            var sealer = StreamSealer(
                key: key,
                context: context,
                algorithm: algorithm,
                salt: [UInt8](hexString: vector.salt)!
            )
            var out = sealer.header
            var offset = 0
            repeat {
                let end = min(offset + StreamingAEAD.chunkSize, plaintext.count)
                out += try sealer.seal(Array(plaintext[offset..<end]), isLast: end == plaintext.count)
                offset = end
            } while offset < plaintext.count
            #expect(out.count == vector.length)
            #expect(Array(SHA256.hash(data: out)).hexString == vector.sha256)
            if let stream = vector.stream {
                #expect(try StreamingAEAD.open([UInt8](hexString: stream)!, key: key, context: context) == plaintext)
            }
        }
    }
}
