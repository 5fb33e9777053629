import CofferAgentProtocol
import CofferSampleMail
import Testing

@Suite struct FrameDecoderTests {
    @Test func framesRoundTripWhateverTheChunking() throws {
        let frames = [
            AgentFrame(kind: .request, payload: Array(#"{"op":"hello"}"#.utf8)),
            AgentFrame(kind: .secret, payload: []),
            AgentFrame(kind: .answer, payload: [UInt8](repeating: 7, count: 1000)),
        ]
        let stream = frames.flatMap(\.encoded)
        for chunk in [1, 3, 8, 9, 100, stream.count] {
            var decoder = FrameDecoder(maximumPayload: 4096)
            var decoded: [AgentFrame] = []
            var index = 0
            while index < stream.count {
                decoder.feed(stream[index..<min(stream.count, index + chunk)])
                index += chunk
                while let frame = try decoder.next() { decoded.append(frame) }
            }
            #expect(decoded == frames)
            #expect(!decoder.hasPartialFrame)
        }
    }

    @Test(arguments: [
        ([0x47, 0x45, 0x54, 0x20], FrameError.badMagic),
        ([0x43, 0x46, 0x01, 0x01, 0, 0, 0, 0], FrameError.unsupportedVersion(1)),
        ([0x43, 0x46, AgentFrame.version, 0x09, 0, 0, 0, 0], FrameError.unknownKind(9)),
        ([0x43, 0x46, 0x03, 0x01, 0, 0, 0, 0], FrameError.unsupportedVersion(3)),
        (
            [0x43, 0x46, AgentFrame.version, 0x01, 0xff, 0xff, 0xff, 0xff],
            FrameError.tooLarge(announced: 0xffff_ffff, maximum: 4096)
        ),
    ])
    func badHeadersAreRefusedBeforeAnyPayload(bytes: [UInt8], error: FrameError) {
        var decoder = FrameDecoder(maximumPayload: 4096)
        decoder.feed(bytes)
        #expect(throws: error) { try decoder.next() }
        // The stream stays refused.
        decoder.feed(AgentFrame(kind: .request, payload: []).encoded)
        #expect(throws: error) { try decoder.next() }
    }

    @Test func aHalfSentFrameIsPartialNotAFrame() throws {
        var decoder = FrameDecoder(maximumPayload: 4096)
        decoder.feed(AgentFrame(kind: .request, payload: [1, 2, 3, 4]).encoded.dropLast())
        #expect(try decoder.next() == nil)
        #expect(decoder.hasPartialFrame)
    }

    @Test func randomAndMutatedStreamsNeverCrashTheDecoder() throws {
        var random = SplitMix(seed: 0xC0FF_EE00_0004)
        let valid = AgentFrame(kind: .request, payload: Array(#"{"op":"status"}"#.utf8)).encoded
        var outcomes = (frames: 0, errors: 0, partial: 0)
        for round in 0..<5_000 {
            var bytes: [UInt8]
            if round % 2 == 0 {
                bytes = (0..<Int.random(in: 0...64, using: &random)).map { _ in
                    UInt8.random(in: 0...255, using: &random)
                }
            } else {
                bytes = valid + valid
                for _ in 0..<Int.random(in: 1...4, using: &random) {
                    bytes[Int.random(in: 0..<bytes.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
                }
                if Bool.random(using: &random) { bytes.removeLast(Int.random(in: 0..<bytes.count, using: &random)) }
            }
            var decoder = FrameDecoder(maximumPayload: 1024)
            decoder.feed(bytes)
            do {
                while let frame = try decoder.next() {
                    #expect(frame.payload.count <= 1024)
                    outcomes.frames += 1
                }
                if decoder.hasPartialFrame { outcomes.partial += 1 }
            } catch {
                outcomes.errors += 1
            }
        }
        // The mutations reach all three outcomes.
        #expect(outcomes.frames > 0 && outcomes.errors > 0 && outcomes.partial > 0)
    }
}
