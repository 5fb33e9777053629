import CofferCrypto
import CofferKeymaker
import CofferStore
import Dispatch
import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import UnixSignals

#if canImport(Glibc)
import Glibc
#endif

/// Time and size limits of the agent.
public struct AgentLimits: Sendable {
    /// How long a connection may sit between requests before it is closed (ms).
    public var idleMilliseconds: Int64 = 300_000
    /// How long the rest of a frame may take once its first byte is in (ms); a half-sent frame past this is refused.
    public var frameMilliseconds: Int64 = 5_000
    /// How long a request may run (ms), except those below.
    public var requestMilliseconds: Int64 = 30_000
    /// How long an unlock may run (ms): it may wait for a person to confirm presence.
    public var unlockMilliseconds: Int64 = 120_000
    /// How long an import may run (ms).
    public var importMilliseconds: Int64 = 3_600_000
    /// Connections served at once; more are refused with `busy`.
    public var maximumConnections = 64

    /// The defaults.
    public init() {}

    func timeout(for op: AgentOperation) -> Int64 {
        switch op {
        case .unlock, .protect: unlockMilliseconds
        case .import: importMilliseconds
        default: requestMilliseconds
        }
    }
}

/// `coffer agent`: the app process. It holds every account's Keymaker (and so the unlocked MainKeys, whose autolock
/// timers run inside the Keymakers), serves clients of the same user over a Unix socket, treats SIGUSR1 as "the app
/// went to the background", and on shutdown (SIGTERM, SIGINT) locks every Keymaker, zeroing the keys.
public final class AgentServer: Service, Sendable {
    /// What it uses.
    public typealias Dependencies = HasKeymakerRegistry & HasLogger & HasPaths

    /// The socket path.
    public let socketPath: String
    private let dependencies: any Dependencies
    private let limits: AgentLimits
    private let dispatcher: AgentDispatcher
    private let stopping = Atomic<Bool>(false)
    private let connections = ThreadLock<[ObjectIdentifier: AgentConnection]>([:])
    private let started = ThreadLock<[CheckedContinuation<Void, Never>]?>([])

    /// An agent for the home of `dependencies`, listening on `socketPath`.
    public init(dependencies: any Dependencies, socketPath: String, limits: AgentLimits = AgentLimits()) {
        self.dependencies = dependencies
        self.socketPath = socketPath
        self.limits = limits
        dispatcher = AgentDispatcher(dependencies: dependencies, socketPath: socketPath)
    }

    /// Returns once the socket accepts connections (for in-process use: benchmarks, tests).
    public func waitUntilListening() async {
        await withCheckedContinuation { continuation in
            let resumeNow = started.withLock { waiting -> Bool in
                guard waiting != nil else { return true }
                waiting?.append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    /// Serves until graceful shutdown or cancellation, then locks every Keymaker and removes the socket.
    public func run() async throws {
        let logger = try dependencies.logger
        let registry = try dependencies.keymakerRegistry
        let (listener, lock) = try AgentSocket.listen(socketPath)
        defer {
            unlink(socketPath)
            close(lock)
        }
        // Opening each account's cache deletes previews and temporary files a killed agent left behind.
        for account in (try? registry.accounts()) ?? [] {
            let user = registry.user(account)
            do {
                _ = try user.attachmentCache
            } catch {
                logger.warning("could not open an account", metadata: ["account": "\(account)", "error": "\(error)"])
            }
        }
        let acceptor = Thread { [self] in acceptLoop(listener, logger: logger) }
        acceptor.name = "coffer-agent-accept"
        acceptor.start()
        logger.info("listening", metadata: ["socket": "\(socketPath)", "pid": "\(getpid())"])
        for waiter in started.withLock({ waiting in
            defer { waiting = nil }
            return waiting ?? []
        }) { waiter.resume() }

        let background = await UnixSignalsSequence(trapping: .sigusr1)
        for await _ in background.cancelOnGracefulShutdown() {
            logger.info("background signal: applying every account's background policy")
            await registry.enteredBackground()
        }

        logger.info("shutting down: locking every account")
        stopping.store(true, ordering: .releasing)
        for connection in connections.withLock({ Array($0.values) }) { connection.close() }
        for _ in 0..<100 where !connections.withLock({ $0.isEmpty }) { try? await Task.sleep(for: .milliseconds(20)) }
        await registry.shutdown()
        close(listener)
        logger.info("stopped; every key was zeroed")
    }

    private func acceptLoop(_ listener: Int32, logger: Logger) {
        let ownUID = getuid()
        while !stopping.load(ordering: .acquiring) {
            guard AgentSocket.waitReadable(listener, milliseconds: 200) else { continue }
            let fd = accept(listener, nil, nil)
            if fd < 0 { continue }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            let connection = AgentConnection(fd: fd, maximumIncoming: AgentFrame.maximumRequestPayload)
            let peer = try? AgentSocket.peer(fd)
            guard let peer, peer.uid == ownUID else {
                let uid = peer.map { String($0.uid) } ?? "unknown"
                let pid = peer.map { String($0.pid) } ?? "unknown"
                logger.warning("refused a connection from another user", metadata: ["uid": "\(uid)", "pid": "\(pid)"])
                refuse(connection, AgentFailure(.forbidden, "This agent serves only its own user."))
                continue
            }
            let admitted = connections.withLock { open -> Bool in
                guard open.count < limits.maximumConnections else { return false }
                open[ObjectIdentifier(connection)] = connection
                return true
            }
            guard admitted else {
                refuse(connection, AgentFailure(.busy, "The agent is serving too many clients; try again."))
                continue
            }
            let thread = Thread { [self] in
                serve(connection, logger: logger)
                connections.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(connection)) }
            }
            thread.name = "coffer-agent-client"
            thread.start()
        }
    }

    private func refuse(_ connection: AgentConnection, _ failure: AgentFailure) {
        if let bytes = try? AgentCoding.encode(AgentReply.failure(failure)) { try? connection.send(.reply, bytes) }
        connection.close()
    }

    /// One client's requests, one at a time, until it leaves, idles out or breaks the protocol.
    private func serve(_ connection: AgentConnection, logger: Logger) {
        let conversation = ConnectionConversation(connection: connection, limits: limits)
        defer {
            conversation.finish()
            connection.close()
        }
        while !stopping.load(ordering: .acquiring) {
            let frame: AgentFrame
            do {
                guard let next = try connection.receive(idle: limits.idleMilliseconds, frame: limits.frameMilliseconds)
                else { return }
                frame = next
            } catch {
                logger.notice("closed a connection after a bad frame", metadata: ["error": "\(error)"])
                refuse(connection, AgentFailure(.badFrame, error.description))
                return
            }
            guard frame.kind == .request else {
                refuse(connection, AgentFailure(.badFrame, "A request frame was expected."))
                return
            }
            guard let request = try? AgentCoding.decode(AgentRequest.self, frame.payload) else {
                logger.notice("closed a connection after an unreadable request")
                refuse(connection, AgentFailure(.badRequest, "The request could not be read."))
                return
            }
            var secret: SecretBytes?
            if AgentDispatcher.expectsSecret(request) {
                do {
                    guard
                        var next = try connection.receive(
                            idle: limits.frameMilliseconds,
                            frame: limits.frameMilliseconds
                        ),
                        next.kind == .secret
                    else {
                        refuse(connection, AgentFailure(.badFrame, "The PIN was expected in a secret frame."))
                        return
                    }
                    secret = SecretBytes(copying: next.payload)
                    for index in next.payload.indices { next.payload[index] = 0 }
                } catch {
                    refuse(connection, AgentFailure(.badFrame, error.description))
                    return
                }
            }
            let started = AgentSocket.nowMilliseconds()
            guard let reply = run(request, secret: secret, conversation: conversation) else {
                logger.notice("a request timed out", metadata: ["op": "\(request.op.rawValue)"])
                refuse(connection, AgentFailure(.timeout, "The request took too long and was abandoned."))
                return
            }
            logger.debug(
                "request",
                metadata: [
                    "op": "\(request.op.rawValue)", "ok": "\(reply.ok)",
                    "ms": "\(AgentSocket.nowMilliseconds() - started)",
                ]
            )
            guard let bytes = try? AgentCoding.encode(reply), (try? connection.send(.reply, bytes)) != nil else {
                return
            }
        }
    }

    /// Runs the request on the concurrency pool and waits for it on this (connection) thread, up to its timeout.
    private func run(
        _ request: AgentRequest,
        secret: SecretBytes?,
        conversation: ConnectionConversation
    ) -> AgentReply? {
        let box = ThreadLock<AgentReply?>(nil)
        let done = DispatchSemaphore(value: 0)
        let dispatcher = self.dispatcher
        let task = Task {
            let reply = await dispatcher.handle(request, secret: secret, conversation: conversation)
            box.withLock { $0 = reply }
            done.signal()
        }
        guard done.wait(timeout: .now() + .milliseconds(Int(limits.timeout(for: request.op)))) == .success else {
            task.cancel()
            return nil
        }
        return box.withLock { $0 }
    }
}

/// A handler's line back to the client of one connection.
final class ConnectionConversation: AgentConversation {
    private let connection: AgentConnection
    private let limits: AgentLimits
    /// The connection's preview folder, and whether the connection is over (a handler that outlived it, after a
    /// timeout, must not leave a preview behind).
    private let preview = ThreadLock<(folder: String?, finished: Bool)>((nil, false))

    init(connection: AgentConnection, limits: AgentLimits) {
        self.connection = connection
        self.limits = limits
    }

    func confirmPresence(reason: String) async -> Bool {
        let seconds = Int(max(1, limits.unlockMilliseconds / 1000))
        guard let question = try? AgentCoding.encode(AgentEvent(event: "presence", reason: reason, seconds: seconds)),
            (try? connection.send(.event, question)) != nil
        else { return false }
        // The answer is read on a thread of its own: a person may take a while, and the pool must not wait.
        let connection = self.connection
        let wait = limits.unlockMilliseconds
        return await withCheckedContinuation { continuation in
            let reader = Thread {
                let frame = try? connection.receive(idle: wait, frame: 5_000)
                guard let frame, frame.kind == .answer,
                    let answer = try? AgentCoding.decode(AgentAnswer.self, frame.payload)
                else {
                    continuation.resume(returning: false)
                    return
                }
                continuation.resume(returning: answer.confirmed)
            }
            reader.start()
        }
    }

    func progress(_ progress: ImportProgress) {
        guard let bytes = try? AgentCoding.encode(AgentEvent(event: "progress", progress: progress)) else { return }
        try? connection.send(.event, bytes)
    }

    func ownPreview(_ folder: String) {
        let kept = preview.withLock { state -> Bool in
            guard !state.finished else { return false }
            state.folder = folder
            return true
        }
        if !kept { SecureFile.removeTree(folder) }
    }

    func endPreview() {
        let folder = preview.withLock { state in
            defer { state.folder = nil }
            return state.folder
        }
        if let folder { SecureFile.removeTree(folder) }
    }

    /// The connection closed: deletes its preview now and any a handler hands over later.
    func finish() {
        preview.withLock { $0.finished = true }
        endPreview()
    }
}
