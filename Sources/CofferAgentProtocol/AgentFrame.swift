/// One frame of the agent protocol v4 (see docs/FORMAT.md, "Agent protocol v4").
///
/// Layout: `"CF"` (0x43 0x46), the version byte (5), the kind byte, the payload length as a big-endian `UInt32`,
/// then the payload.
public struct AgentFrame: Sendable, Equatable {
    /// What a frame carries.
    public enum Kind: UInt8, Sendable, CaseIterable {
        /// Client → agent: one JSON ``AgentRequest``.
        case request = 1
        /// Agent → client: the JSON ``AgentReply`` that ends a request.
        case reply = 2
        /// Agent → client: a JSON ``AgentEvent`` during a request (progress, a presence question).
        case event = 3
        /// Client → agent: the JSON ``AgentAnswer`` to a presence question.
        case answer = 4
        /// Client → agent: raw secret bytes (a PIN, or an IMAP password) right after the request that announced them; never JSON.
        case secret = 5
        /// Agent → client: the ``AgentReply/summaries(_:)`` that ends a `list` or `search`, in the binary
        /// ``SummaryPage`` encoding instead of JSON.
        case summaries = 6
    }

    /// The protocol version this code speaks.
    public static let version: UInt8 = 7
    /// The header's size in bytes.
    public static let headerSize = 8
    /// The largest payload the agent accepts from a client (requests, answers and secrets are small).
    public static let maximumRequestPayload = 64 << 10
    /// The largest payload a client accepts from the agent (a reply may carry an attachment).
    public static let maximumReplyPayload = 48 << 20

    /// The kind.
    public var kind: Kind
    /// The payload.
    public var payload: [UInt8]

    /// A frame.
    public init(kind: Kind, payload: [UInt8]) {
        self.kind = kind
        self.payload = payload
    }

    /// A checked header: the frame's kind and its size on the wire.
    public struct Header: Sendable, Equatable {
        /// The kind.
        public var kind: Kind
        /// The payload's length in bytes.
        public var payloadLength: Int
        /// Header and payload, in bytes.
        public var frameSize: Int { AgentFrame.headerSize + payloadLength }
    }

    /// Checks the start of a frame in `bytes` as far as it goes: a wrong magic is refused on its first byte, another
    /// version on the third, an unknown kind or an announced length over `maximumPayload` once the header is in. The
    /// one header check of the protocol, for ``FrameDecoder`` (the client) and the agent's channel decoder.
    ///
    /// - Returns: The header once its 8 bytes are in; `nil` while they are not (and none seen is wrong).
    /// - Throws: ``FrameError``.
    public static func header<Bytes: Collection<UInt8>>(
        _ bytes: Bytes,
        maximumPayload: Int
    ) throws(FrameError) -> Header? {
        var index = bytes.startIndex
        var seen: [UInt8] = []
        seen.reserveCapacity(headerSize)
        while seen.count < headerSize, index != bytes.endIndex {
            seen.append(bytes[index])
            bytes.formIndex(after: &index)
        }
        if seen.count >= 1, seen[0] != 0x43 { throw .badMagic }
        if seen.count >= 2, seen[1] != 0x46 { throw .badMagic }
        if seen.count >= 3, seen[2] != version { throw .unsupportedVersion(seen[2]) }
        guard seen.count == headerSize else { return nil }
        guard let kind = Kind(rawValue: seen[3]) else { throw .unknownKind(seen[3]) }
        let length = seen[4...].reduce(0) { $0 << 8 | Int($1) }
        guard length <= maximumPayload else { throw .tooLarge(announced: length, maximum: maximumPayload) }
        return Header(kind: kind, payloadLength: length)
    }

    /// The header's 8 bytes on the wire: magic, version, kind, the payload's length (big-endian). The one writer of
    /// the header, for ``encoded`` (the client) and the agent's channel encoder.
    public var headerBytes: [UInt8] {
        let count = UInt32(payload.count)
        return [
            0x43, 0x46, Self.version, kind.rawValue,
            UInt8(count >> 24), UInt8(count >> 16 & 0xff), UInt8(count >> 8 & 0xff), UInt8(count & 0xff),
        ]
    }

    /// The bytes on the wire.
    public var encoded: [UInt8] { headerBytes + payload }
}

/// Why bytes are not a valid frame.
public enum FrameError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The first two bytes are not `"CF"`.
    case badMagic
    /// Another protocol version.
    case unsupportedVersion(UInt8)
    /// An unknown kind byte.
    case unknownKind(UInt8)
    /// The announced payload is larger than allowed.
    case tooLarge(announced: Int, maximum: Int)
    /// The stream ended (or stalled past its timeout) inside a frame.
    case incomplete

    /// A sentence for people.
    public var description: String {
        switch self {
        case .badMagic: "The bytes received are not an agent protocol frame."
        case .unsupportedVersion(let version):
            "An agent protocol frame of version \(version) arrived; this side speaks version \(AgentFrame.version)."
        case .unknownKind(let kind): "Agent protocol frame kind \(kind) is unknown."
        case .tooLarge(let announced, let maximum):
            "An agent protocol frame of \(announced) bytes is larger than the limit of \(maximum) bytes."
        case .incomplete: "An agent protocol frame was cut off before its end."
        }
    }
}

/// Reassembles frames from a byte stream. It checks each header as soon as its 8 bytes are in, so an oversized or
/// garbage frame is refused before its payload is read; after an error the stream is unusable (close it).
package struct FrameDecoder: Sendable {
    /// The largest payload accepted.
    public let maximumPayload: Int
    private var buffer: [UInt8] = []
    private var start = 0
    private var failed: FrameError?

    /// A decoder accepting payloads up to `maximumPayload` bytes.
    public init(maximumPayload: Int) { self.maximumPayload = maximumPayload }

    /// Whether bytes of an unfinished frame are buffered.
    public var hasPartialFrame: Bool { buffer.count > start }

    /// Appends received bytes.
    public mutating func feed<Bytes: Collection>(_ bytes: Bytes) where Bytes.Element == UInt8 {
        if start > 0 && start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next complete frame, or `nil` until more bytes arrive.
    ///
    /// - Throws: ``FrameError`` for a bad header; every later call throws the same error.
    public mutating func next() throws(FrameError) -> AgentFrame? {
        if let failed { throw failed }
        let header: AgentFrame.Header?
        do { header = try AgentFrame.header(buffer[start...], maximumPayload: maximumPayload) } catch {
            failed = error
            throw error
        }
        guard let header, buffer.count - start >= header.frameSize else { return nil }
        let payloadStart = start + AgentFrame.headerSize
        let frame = AgentFrame(kind: header.kind, payload: Array(buffer[payloadStart..<start + header.frameSize]))
        // Secret payloads must not linger in the buffer.
        for index in payloadStart..<start + header.frameSize { buffer[index] = 0 }
        start += header.frameSize
        if start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
        }
        return frame
    }

    /// Zeroes and drops everything buffered.
    public mutating func wipe() {
        for index in buffer.indices { buffer[index] = 0 }
        buffer.removeAll()
        start = 0
    }

}
