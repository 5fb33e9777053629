import CofferCrypto
import CofferStore
import Foundation

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
    /// - Returns: The agent's reply (its pid, socket and version).
    /// - Throws: ``AppError/versionMismatch(agent:client:)`` when the agent speaks another version.
    public func hello() async throws(AppError) -> AgentReply {
        var request = AgentRequest(.hello)
        request.version = Int(AgentFrame.version)
        let reply = try await send(request)
        let spoken = reply.version ?? Int(AgentFrame.version)
        guard spoken == Int(AgentFrame.version), reply.error?.code != .unsupportedVersion else {
            throw .versionMismatch(agent: spoken, client: Int(AgentFrame.version))
        }
        guard reply.ok else {
            let failure = reply.error ?? AgentFailure(.failed, "The agent refused without saying why.")
            throw .remote(code: failure.code, message: failure.message)
        }
        return reply
    }

    /// Closes the connection (the agent deletes this connection's preview, if any).
    public func close() { connection.close() }

    /// Sends `request` (with `secret` in a secret frame when given) and waits for its reply, answering events with
    /// `onEvent` on the way.
    ///
    /// - Parameters:
    ///   - request: The request.
    ///   - secret: A PIN, for unlock with `pin` and protect `pin`; its bytes are zeroed after sending.
    ///   - timeoutSeconds: How long to wait for a frame of the agent.
    ///   - onEvent: Called for each event; return an answer for a presence question.
    /// - Returns: The reply, whatever its `ok`.
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
            let received: AgentFrame?
            do {
                received = try connection.receive(idle: Int64(timeoutSeconds) * 1000, frame: 30_000)
            } catch .frame(.unsupportedVersion(let version)) {
                throw .versionMismatch(agent: Int(version), client: Int(AgentFrame.version))
            }
            guard let frame = received else { throw .agentClosed }
            switch frame.kind {
            case .reply:
                return try AgentCoding.decode(AgentReply.self, frame.payload)
            case .event:
                let event = try AgentCoding.decode(AgentEvent.self, frame.payload)
                if let answer = await onEvent(event) { try connection.send(.answer, AgentCoding.encode(answer)) }
            default:
                throw .malformedMessage
            }
        }
    }

    /// Like ``send(_:secret:timeoutSeconds:onEvent:)``, but a failure reply is thrown as ``AppError/remote(code:message:)``.
    public func call(
        _ request: AgentRequest,
        secret: SecretBytes? = nil,
        onEvent: (AgentEvent) async -> AgentAnswer? = { _ in nil }
    ) async throws(AppError) -> AgentReply {
        let reply = try await send(request, secret: secret, onEvent: onEvent)
        guard reply.ok else {
            let failure = reply.error ?? AgentFailure(.failed, "The agent refused without saying why.")
            throw .remote(code: failure.code, message: failure.message)
        }
        return reply
    }
}
