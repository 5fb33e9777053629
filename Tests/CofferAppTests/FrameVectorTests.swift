import CofferAgentProtocol
import Foundation
import Testing

/// The agent protocol's frames and messages against known answers computed independently from docs/FORMAT.md by
/// `Fixtures/make_frame_vectors.py` (Python standard library).
@Suite struct FrameVectorTests {
    struct Vectors: Decodable {
        struct Frame: Decodable {
            var name: String
            var kind: String
            var header: String
            var payload: String?
            var patternLength: Int?
            var frame: String?
        }
        struct Stream: Decodable {
            var names: [String]
            var bytes: String
        }
        struct Refusal: Decodable {
            var name: String
            var bytes: String
            var maximum: Int
            var error: String
            var value: Int?
        }
        struct Request: Decodable {
            var json: String
            var op: String
            var account: String?
            var secret: Bool?
        }
        struct Failure: Decodable {
            var json: String
            var code: String
        }
        var frames: [Frame]
        var stream: Stream
        var refused: [Refusal]
        var incomplete: [String]
        var requests: [Request]
        var failures: [Failure]
    }

    static let vectors: Vectors = {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Fixtures/frame_vectors.json")
        guard let data = try? Data(contentsOf: url), let vectors = try? JSONDecoder().decode(Vectors.self, from: data)
        else {
            Issue.record("Fixtures/frame_vectors.json is missing or unreadable; run make_frame_vectors.py")
            return Vectors(
                frames: [],
                stream: .init(names: [], bytes: ""),
                refused: [],
                incomplete: [],
                requests: [],
                failures: []
            )
        }
        return vectors
    }()

    static func bytes(_ hex: String) -> [UInt8] {
        var result: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex, let next = hex.index(index, offsetBy: 2, limitedBy: hex.endIndex) {
            guard let byte = UInt8(hex[index..<next], radix: 16) else { return [] }
            result.append(byte)
            index = next
        }
        return result
    }

    static func payload(_ vector: Vectors.Frame) -> [UInt8] {
        if let length = vector.patternLength { return (0..<length).map { UInt8($0 % 251) } }
        return bytes(vector.payload ?? "")
    }

    static func kind(_ name: String) -> AgentFrame.Kind? {
        switch name {
        case "request": .request
        case "reply": .reply
        case "event": .event
        case "answer": .answer
        case "secret": .secret
        case "summaries": .summaries
        default: nil
        }
    }

    @Test func theVectorsAreThere() {
        #expect(Self.vectors.frames.count >= 10)
        #expect(Self.vectors.refused.count >= 9)
        #expect(Self.vectors.requests.count >= 8)
    }

    @Test func framesEncodeAndDecodeToTheKnownBytes() throws {
        for vector in Self.vectors.frames {
            let kind = try #require(Self.kind(vector.kind), "\(vector.name)")
            let payload = Self.payload(vector)
            let wire = Self.bytes(vector.header) + payload
            if let frame = vector.frame { #expect(Self.bytes(frame) == wire, "\(vector.name): vector file") }
            let encoded = AgentFrame(kind: kind, payload: payload).encoded
            #expect(encoded == wire, "\(vector.name)")
            var decoder = FrameDecoder(maximumPayload: AgentFrame.maximumRequestPayload)
            decoder.feed(wire)
            let decoded = try decoder.next()
            #expect(decoded == AgentFrame(kind: kind, payload: payload), "\(vector.name)")
            #expect(!decoder.hasPartialFrame)
        }
    }

    @Test(arguments: [1, 2, 7, 8, 9, 64, 100_000])
    func aConnectionsStreamDecodesToItsFramesInOrder(chunk: Int) throws {
        let byName = Dictionary(uniqueKeysWithValues: Self.vectors.frames.map { ($0.name, $0) })
        let expected = try Self.vectors.stream.names.map { name in
            let vector = try #require(byName[name])
            return AgentFrame(kind: try #require(Self.kind(vector.kind)), payload: Self.payload(vector))
        }
        #expect(expected.flatMap(\.encoded) == Self.bytes(Self.vectors.stream.bytes))
        let stream = Self.bytes(Self.vectors.stream.bytes)
        var decoder = FrameDecoder(maximumPayload: AgentFrame.maximumRequestPayload)
        var decoded: [AgentFrame] = []
        var index = 0
        while index < stream.count {
            decoder.feed(stream[index..<min(stream.count, index + chunk)])
            index += chunk
            while let frame = try decoder.next() { decoded.append(frame) }
        }
        #expect(decoded == expected)
    }

    @Test func badBytesAreRefusedForTheDocumentedReason() {
        for vector in Self.vectors.refused {
            let expected: FrameError
            switch vector.error {
            case "badMagic": expected = .badMagic
            case "unsupportedVersion": expected = .unsupportedVersion(UInt8(vector.value ?? -1))
            case "unknownKind": expected = .unknownKind(UInt8(vector.value ?? -1))
            case "tooLarge": expected = .tooLarge(announced: vector.value ?? -1, maximum: vector.maximum)
            default:
                Issue.record("unknown error \(vector.error) in \(vector.name)")
                continue
            }
            var decoder = FrameDecoder(maximumPayload: vector.maximum)
            decoder.feed(Self.bytes(vector.bytes))
            #expect(throws: expected, "\(vector.name)") { try decoder.next() }
        }
    }

    @Test func theStartOfAFrameIsNeitherAFrameNorAnError() throws {
        for hex in Self.vectors.incomplete {
            var decoder = FrameDecoder(maximumPayload: AgentFrame.maximumRequestPayload)
            decoder.feed(Self.bytes(hex))
            #expect(try decoder.next() == nil, "\(hex)")
            #expect(decoder.hasPartialFrame)
        }
    }

    @Test func requestPayloadsDecodeToTheDocumentedOperationsAndSurviveARoundTrip() throws {
        for vector in Self.vectors.requests {
            let request = try JSONDecoder().decode(AgentRequest.self, from: Data(vector.json.utf8))
            #expect(request.operation.rawValue == vector.op, "\(vector.json)")
            #expect(request.accountName == vector.account, "\(vector.json)")
            #expect(request.expectsSecret == (vector.secret ?? false), "\(vector.json)")
            let again = try JSONDecoder().decode(AgentRequest.self, from: JSONEncoder().encode(request))
            #expect(again == request)
        }
    }

    @Test func requestsWithAnUnknownOperationOrAMissingArgumentAreRefused() {
        for json in [
            #"{"op":"hello"}"#, #"{"fly":{}}"#, #"{"unlock":{"account":"alice"}}"#,
            #"{"unlock":{"account":"alice","method":"fingerprint"}}"#, #"{"list":{"account":"a","limit":"5"}}"#,
            #"{"hello":{"version":2},"status":{}}"#,
            // v5's forward start, without attachOriginal (docs/FORMAT.md, "Agent protocol v7").
            #"{"compose":{"account":"dave","start":{"forward":{"message":12}}}}"#,
        ] {
            #expect(throws: (any Error).self, "\(json)") {
                try JSONDecoder().decode(AgentRequest.self, from: Data(json.utf8))
            }
        }
    }

    @Test func failureRepliesDecodeToTheirCodes() throws {
        for vector in Self.vectors.failures {
            let reply = try JSONDecoder().decode(AgentReply.self, from: Data(vector.json.utf8))
            #expect(reply.failure?.code.rawValue == vector.code, "\(vector.json)")
        }
    }

    @Test func theVectorsMessagesDecodeAsTheirKinds() throws {
        for vector in Self.vectors.frames where vector.payload != nil {
            let data = Data(Self.payload(vector))
            switch vector.kind {
            case "request": _ = try JSONDecoder().decode(AgentRequest.self, from: data)
            case "reply": _ = try JSONDecoder().decode(AgentReply.self, from: data)
            case "event" where vector.name == "presence event":
                #expect(
                    try JSONDecoder().decode(AgentEvent.self, from: data)
                        == .presence(reason: "Unlock Coffer account alice.", seconds: 120)
                )
            case "event":
                #expect(try JSONDecoder().decode(AgentEvent.self, from: data) == .chunk(Data([0, 1, 2, 3])))
            case "answer" where vector.name == "presence answer":
                #expect(try JSONDecoder().decode(AgentAnswer.self, from: data).confirmed == true)
            default: continue
            }
        }
    }
}
