import Testing

@testable import CofferOpenPGP

/// The buffer RNP writes plaintext and secret keys into.
@Suite struct ZeroingBufferTests {
    @Test func keepsEveryByteAcrossGrowth() {
        let buffer = ZeroingBuffer(limit: Int.max)
        var expected: [UInt8] = []
        for round in 0..<200 {
            let chunk = (0..<(round * 37 % 5000)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ round) }
            #expect(chunk.withUnsafeBytes { buffer.append($0) })
            expected += chunk
        }
        #expect(buffer.bytes == expected)
        #expect(buffer.secretBytes.withUnsafeBytes { Array($0) } == expected)
        buffer.wipeAndFree()
        #expect(buffer.count == 0 && buffer.bytes.isEmpty)
    }

    @Test func refusesToPassItsLimit() {
        let buffer = ZeroingBuffer(limit: 10)
        #expect([UInt8](repeating: 1, count: 6).withUnsafeBytes { buffer.append($0) })
        #expect(!buffer.exceededLimit)
        #expect(![UInt8](repeating: 2, count: 5).withUnsafeBytes { buffer.append($0) })
        #expect(buffer.exceededLimit)
        #expect(buffer.bytes == [UInt8](repeating: 1, count: 6))
        #expect([UInt8](repeating: 3, count: 4).withUnsafeBytes { buffer.append($0) })
        #expect(buffer.count == 10)
    }
}
