import CofferSampleMail
import Testing

@testable import CofferHTML

/// The input stream's preprocessing: CR LF and CR become LF, ill-formed UTF-8 becomes U+FFFD by maximal subparts.
/// Checked against the standard library's decoder, which replaces maximal subparts too, on inputs without encoded
/// surrogates (which the HTML input stream passes through and the standard library replaces).
@Suite struct InputStreamTests {
    /// CR LF and CR as LF, then decoded and encoded again by the standard library.
    static func reference(_ bytes: [UInt8]) -> [UInt8] {
        var normalized: [UInt8] = []
        var index = 0
        while index < bytes.count {
            if bytes[index] == 0x0D {
                normalized.append(0x0A)
                index += index + 1 < bytes.count && bytes[index + 1] == 0x0A ? 2 : 1
            } else {
                normalized.append(bytes[index])
                index += 1
            }
        }
        return Array(String(decoding: normalized, as: UTF8.self).utf8)
    }

    /// Random mixes of ASCII runs, CR, LF, well-formed and ill-formed sequences, around the eight-byte steps of the
    /// ASCII scan.
    @Test func agreesWithTheStandardDecoderOnRandomInput() {
        var generator = SplitMix(seed: 0x1A_2B_3C)
        let pieces: [[UInt8]] = [
            Array("abcdefgh".utf8), Array("<p>".utf8), [0x0D], [0x0A], [0x0D, 0x0A], [0xC3, 0xA9], [0xE2, 0x82, 0xAC],
            [0xF0, 0x9F, 0x98, 0x80], [0xE2, 0x82], [0xF0, 0x9F], [0xFF], [0x80], [0xC0, 0xAF],
            [0xF4, 0x90, 0x80, 0x80],
            [0xE0, 0x80, 0x80], [0x00],
        ]
        for _ in 0..<5_000 {
            var bytes: [UInt8] = []
            for _ in 0..<Int.random(in: 0..<24, using: &generator) {
                bytes += pieces[Int.random(in: 0..<pieces.count, using: &generator)]
            }
            #expect(preprocessInput(bytes) == Self.reference(bytes), "\(bytes)")
        }
    }

    /// A CR or a non-ASCII byte at every offset of a long ASCII run, before and after other changes.
    @Test func findsEveryChangeInALongASCIIRun() {
        for special: [UInt8] in [[0x0D], [0x0D, 0x0A], [0xC3, 0xA9], [0xFF]] {
            for offset in 0..<40 {
                let run =
                    [UInt8](repeating: 0x61, count: offset) + special + [UInt8](repeating: 0x62, count: 40 - offset)
                #expect(preprocessInput(run) == Self.reference(run))
                let twice = [0xC3, 0xA9] + run + [0x0D] + run
                #expect(preprocessInput(twice) == Self.reference(twice))
            }
        }
    }
}
