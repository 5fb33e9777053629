import CofferCrypto

/// What can go wrong in CofferApp and the agent, written for the person who reads it. No case carries a PIN, a key
/// or message text.
public enum AppError: Error, Sendable, Equatable, CustomStringConvertible {
    /// `--account` names no account of this device.
    case unknownAccount(String)
    /// An account name breaks the rule of ``AccountName`` (the case does not carry the name).
    case invalidAccountName(AccountNameProblem)
    /// The device has no account yet.
    case noAccount
    /// Several accounts and none chosen.
    case chooseAccount(count: Int)
    /// A socket call failed.
    case socket(operation: String, errno: Int32)
    /// A file the agent writes for a client (a preview, a saved attachment) could not be written.
    case file(CofferCryptoError)
    /// Another agent already serves this home.
    case agentRunning(socket: String)
    /// The socket path does not fit in a `sockaddr_un`.
    case socketPathTooLong(String)
    /// The peer is not the agent's user.
    case wrongPeer
    /// A frame broke the protocol.
    case frame(FrameError)
    /// A message could not be read or written.
    case malformedMessage
    /// The agent closed the connection before answering.
    case agentClosed
    /// The agent (or client) did not answer in time.
    case timedOut
    /// The agent and this client speak different versions of the agent protocol.
    case versionMismatch(agent: Int, client: Int)
    /// The account's key is not in memory (every module's way of saying so becomes this one; see `isLocked`).
    case locked(account: String?)
    /// The agent answered with an error other than ``locked(account:)``; `message` is its sentence.
    case remote(code: AgentFailure.Code, message: String)

    /// A sentence for people.
    public var description: String {
        switch self {
        case .unknownAccount(let name):
            "There is no account named \(name) on this device."
        case .invalidAccountName(let problem):
            "That account name cannot be used: \(problem.reason). A name is 1 to \(AccountName.maximumBytes) bytes, "
                + "with no / or \\, no control characters, not starting with . or -."
        case .noAccount: "There is no account on this device yet."
        case .chooseAccount(let count): "There are \(count) accounts on this device; choose one with --account."
        case .socket(let operation, let code): "The agent socket failed to \(operation) (errno \(code))."
        case .file(let error): error.description
        case .agentRunning(let socket): "An agent already serves this home (socket \(socket))."
        case .socketPathTooLong(let path): "The agent socket path \(path) is too long for a Unix socket."
        case .wrongPeer: "The process at the other end of the agent socket belongs to another user; refused."
        case .frame(let error): error.description
        case .malformedMessage: "The agent sent a message that could not be read."
        case .agentClosed: "The agent closed the connection without answering."
        case .timedOut: "The agent did not answer in time."
        case .versionMismatch(let agent, let client):
            "The agent speaks version \(agent), this client speaks \(client) of the agent protocol; they cannot work "
                + "together until both run the same version of Coffer."
        case .locked(let account): "Coffer is locked\(account.map { " for \($0)" } ?? ""): the key is not in memory."
        case .remote(_, let message): message
        }
    }
}

extension AppError {
    /// Runs a file operation, reporting its failure as ``AppError/file(_:)``.
    package static func file<R>(_ body: () throws(CofferCryptoError) -> R) throws(AppError) -> R {
        do { return try body() } catch { throw .file(error) }
    }
}
