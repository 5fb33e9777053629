import CofferCrypto

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if canImport(Glibc)
import Glibc
#endif

/// A client of the agent: one connection, one request at a time.
public final class AgentClient: Sendable {
    /// The socket path.
    public let socketPath: String
    private let connection: AgentConnection

    private init(socketPath: String, connection: AgentConnection) {
        self.socketPath = socketPath
        self.connection = connection
    }

    /// Connects to the agent at `socketPath`; `nil` when none runs there.
    ///
    /// - Throws: ``AppError/wrongPeer`` when the socket belongs to another user's process; socket errors.
    public static func connect(socketPath: String) throws(AppError) -> AgentClient? {
        guard let fd = try AgentSocket.connect(socketPath) else { return nil }
        return AgentClient(
            socketPath: socketPath,
            connection: AgentConnection(fd: fd, maximumIncoming: AgentFrame.maximumReplyPayload)
        )
    }

    /// Says hello with this client's protocol version and checks the agent's.
    ///
    /// - Returns: The agent's pid and socket.
    /// - Throws: ``AppError/versionMismatch(agent:client:)`` when the agent speaks another version.
    public func hello() async throws(AppError) -> (pid: Int32, socket: String) {
        let reply = try await call(.hello(version: Int(AgentFrame.version)))
        guard case .hello(let pid, let socket, let version) = reply else { throw .malformedMessage }
        guard version == Int(AgentFrame.version) else {
            throw .versionMismatch(agent: version, client: Int(AgentFrame.version))
        }
        return (pid, socket)
    }

    /// Closes the connection (the agent deletes this connection's preview, if any).
    public func close() { connection.close() }

    /// Sends `request` (with `secret` in a secret frame when given) and waits for its reply, answering events with
    /// `onEvent` on the way.
    ///
    /// - Parameters:
    ///   - request: The request.
    ///   - secret: A PIN, PINs or a password, when ``AgentRequest/expectsSecret``; its bytes are zeroed after sending.
    ///   - timeoutSeconds: How long to wait for a frame of the agent.
    ///   - onEvent: Called for each event; return an answer for a presence question.
    /// - Returns: The reply, a failure included.
    public func send(
        _ request: AgentRequest,
        secret: SecretBytes? = nil,
        timeoutSeconds: Int = 3_700,
        onEvent: (AgentEvent) async -> AgentAnswer? = { _ in nil }
    ) async throws(AppError) -> AgentReply {
        try connection.send(.request, AgentCoding.encode(request))
        if let secret {
            var bytes = secret.withUnsafeBytes { Array($0) }
            defer { for index in bytes.indices { bytes[index] = 0 } }
            try connection.send(.secret, bytes)
        }
        while true {
            var frame = try receive(timeoutSeconds: timeoutSeconds)
            if let reply = try reply(in: frame) { return reply }
            let event = try AgentCoding.decode(AgentEvent.self, frame.payload)
            // A chunk's bytes are attachment content: the frame's copy is zeroed once decoded.
            for index in frame.payload.indices { frame.payload[index] = 0 }
            if let answer = await onEvent(event) { try connection.send(.answer, AgentCoding.encode(answer)) }
        }
    }

    /// The agent's next frame.
    private func receive(timeoutSeconds: Int) throws(AppError) -> AgentFrame {
        let received: AgentFrame?
        do {
            received = try connection.receive(idle: Int64(timeoutSeconds) * 1000, frame: 30_000)
        } catch .frame(.unsupportedVersion(let version)) {
            throw .versionMismatch(agent: Int(version), client: Int(AgentFrame.version))
        }
        guard let received else { throw .agentClosed }
        return received
    }

    /// The reply `frame` carries; `nil` for an event.
    private func reply(in frame: AgentFrame) throws(AppError) -> AgentReply? {
        switch frame.kind {
        case .reply: return try AgentCoding.decode(AgentReply.self, frame.payload)
        case .summaries: return .summaries(try SummaryPage.decode(frame.payload))
        case .event: return nil
        default: throw .malformedMessage
        }
    }

    /// `reply`, or its failure thrown: `locked` as ``AppError/locked(account:)``, any other as
    /// ``AppError/remote(code:message:)``.
    private func succeeded(_ reply: AgentReply, to request: AgentRequest) throws(AppError) -> AgentReply {
        if let failure = reply.failure {
            if failure.code == .locked { throw .locked(account: request.accountName) }
            throw .remote(code: failure.code, message: failure.message)
        }
        return reply
    }

    /// Like ``send(_:secret:timeoutSeconds:onEvent:)``, but a failure reply is thrown: `locked` as
    /// ``AppError/locked(account:)``, any other as ``AppError/remote(code:message:)``.
    public func call(
        _ request: AgentRequest,
        secret: SecretBytes? = nil,
        onEvent: (AgentEvent) async -> AgentAnswer? = { _ in nil }
    ) async throws(AppError) -> AgentReply {
        try succeeded(try await send(request, secret: secret, onEvent: onEvent), to: request)
    }

    /// Like ``call(_:secret:onEvent:)`` for a request that takes no secret and raises no event (`account`, `list`,
    /// `search`, `message`), but synchronous: the small `coffer` answers its commands with this and never starts the
    /// concurrency runtime, whose start costs about half a millisecond of a command that takes a few. An event is a
    /// malformed message here.
    public func callNow(_ request: AgentRequest) throws(AppError) -> AgentReply {
        try connection.send(.request, AgentCoding.encode(request))
        guard let reply = try reply(in: receive(timeoutSeconds: 3_700)) else { throw .malformedMessage }
        return try succeeded(reply, to: request)
    }
}
