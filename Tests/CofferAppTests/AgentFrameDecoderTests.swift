import CofferAgent
import CofferAgentProtocol
import NIOCore
import NIOEmbedded
import Testing

/// The agent's NIO frame decoder on an embedded channel: frames out whatever the chunking, typed errors, the frame
/// deadline on the event loop's clock, and payloads zeroed in the buffer they arrived in.
@Suite struct AgentFrameDecoderTests {
    static func channel(maximum: Int = 1024, timeout: TimeAmount = .seconds(5)) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(
            ByteToMessageHandler(AgentFrameDecoder(maximumPayload: maximum, frameTimeout: timeout))
        )
        return channel
    }

    @Test(arguments: [1, 3, 8, 9, 1000])
    func framesComeOutWhateverTheChunking(chunk: Int) throws {
        let frames = [
            AgentFrame(kind: .request, payload: Array(#"{"op":"hello"}"#.utf8)),
            AgentFrame(kind: .secret, payload: []),
            AgentFrame(kind: .answer, payload: [UInt8](repeating: 7, count: 300)),
        ]
        let stream = frames.flatMap(\.encoded)
        let channel = try Self.channel()
        var decoded: [AgentFrame] = []
        for start in stride(from: 0, to: stream.count, by: chunk) {
            try channel.writeInbound(ByteBuffer(bytes: stream[start..<min(stream.count, start + chunk)]))
            while let frame = try channel.readInbound(as: AgentFrame.self) { decoded.append(frame) }
        }
        #expect(decoded == frames)
        #expect(try channel.finish().isClean)
    }

    @Test(arguments: [
        ([0x47, 0x45, 0x54, 0x20], FrameError.badMagic),
        ([0x43, 0x46, 0x01], FrameError.unsupportedVersion(1)),
        ([0x43, 0x46, 0x03], FrameError.unsupportedVersion(3)),
        ([0x43, 0x46, AgentFrame.version, 0x09, 0, 0, 0, 0], FrameError.unknownKind(9)),
        (
            [0x43, 0x46, AgentFrame.version, 0x01, 0, 0, 0x04, 0x01],
            FrameError.tooLarge(announced: 1025, maximum: 1024)
        ),
    ])
    func badHeadersAreRefusedBeforeAnyPayload(bytes: [UInt8], error: FrameError) throws {
        let channel = try Self.channel()
        #expect(throws: error) { try channel.writeInbound(ByteBuffer(bytes: bytes)) }
        #expect(try channel.readInbound(as: AgentFrame.self) == nil)
    }

    @Test func aFrameWhoseRestDoesNotComeInTimeIsIncomplete() throws {
        let channel = try Self.channel(timeout: .seconds(5))
        let frame = AgentFrame(kind: .request, payload: Array(#"{"op":"status"}"#.utf8)).encoded
        try channel.writeInbound(ByteBuffer(bytes: frame.prefix(10)))
        channel.embeddedEventLoop.advanceTime(by: .seconds(4))
        try channel.throwIfErrorCaught()
        channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(throws: FrameError.incomplete) { try channel.throwIfErrorCaught() }
    }

    @Test func aFrameCompletedInTimeStopsItsDeadline() throws {
        let channel = try Self.channel(timeout: .seconds(5))
        let frame = AgentFrame(kind: .request, payload: Array(#"{"op":"status"}"#.utf8)).encoded
        try channel.writeInbound(ByteBuffer(bytes: frame.prefix(10)))
        channel.embeddedEventLoop.advanceTime(by: .seconds(4))
        try channel.writeInbound(ByteBuffer(bytes: frame.dropFirst(10)))
        channel.embeddedEventLoop.advanceTime(by: .seconds(60))
        try channel.throwIfErrorCaught()
        #expect(try channel.readInbound(as: AgentFrame.self)?.encoded == frame)
    }

    @Test func theStreamEndingInsideAFrameIsIncomplete() throws {
        let channel = try Self.channel()
        try channel.writeInbound(ByteBuffer(bytes: [0x43, 0x46, AgentFrame.version, 0x05, 0, 0, 0, 6, 0x31]))
        #expect(throws: FrameError.incomplete) { try channel.finish() }
    }

    @Test func aSecretIsZeroedInTheBufferItArrivedIn() throws {
        let pin = Array("739146".utf8)
        let bytes = AgentFrame(kind: .secret, payload: pin).encoded
        let buffer = ByteBuffer(bytes: bytes)
        // Shares the storage, as the channel's receive pool does.
        let witness = buffer
        let channel = try Self.channel()
        try channel.writeInbound(buffer)
        #expect(try channel.readInbound(as: AgentFrame.self)?.payload == pin)
        #expect(witness.getBytes(at: 0, length: AgentFrame.headerSize) == Array(bytes.prefix(AgentFrame.headerSize)))
        #expect(
            witness.getBytes(at: AgentFrame.headerSize, length: pin.count) == [UInt8](repeating: 0, count: pin.count)
        )
    }
}
