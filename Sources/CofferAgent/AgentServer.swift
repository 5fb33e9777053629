import CofferAgentProtocol
import CofferApp
import CofferBlocking
import CofferCrypto
import CofferKeymaker
import CofferStore
import CofferSync
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
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
        case .unlock, .protect, .logout, .fastSyncOn, .notifyRegister: unlockMilliseconds
        case .import, .sync, .watch, .push, .saveDraft, .sendDraft, .outboxRetry, .outboxFlush: importMilliseconds
        default: requestMilliseconds
        }
    }
}

/// `coffer agent`: the app process. It holds every account's Keymaker (and so the unlocked MainKeys, whose autolock
/// timers run inside the Keymakers), serves clients of the same user over a Unix socket, treats SIGUSR1 as "the app
/// went to the background", and on shutdown (SIGTERM, SIGINT) locks every Keymaker, zeroing the keys.
///
/// The socket is a NIO server channel on `eventLoopGroup`; each accepted connection is one child task of
/// ``run()``'s task group, which reads its frames from an `NIOAsyncChannel` and runs one request at a time. The time
/// limits are timers on the connection's event loop (``AgentDeadlines``): a request that runs out of time gets its
/// `timeout` reply from there, and the connection's task is cancelled. The agent starts no thread of its own.
public final class AgentServer: Service, Sendable {
    /// What it uses.
    public typealias Dependencies = AgentDispatcher.Dependencies

    /// The socket path.
    public let socketPath: String
    private let dependencies: any Dependencies
    private let limits: AgentLimits
    private let dispatcher: AgentDispatcher
    private let eventLoopGroup: any EventLoopGroup
    private let active = Atomic<Int>(0)
    private let started = NIOLockedValueBox<[CheckedContinuation<Void, Never>]?>([])

    /// An agent for the home of `dependencies`, listening on `socketPath`, its sockets on `eventLoopGroup`.
    public init(
        dependencies: any Dependencies,
        socketPath: String,
        limits: AgentLimits = AgentLimits(),
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) {
        self.dependencies = dependencies
        self.socketPath = socketPath
        self.limits = limits
        self.eventLoopGroup = eventLoopGroup
        dispatcher = AgentDispatcher(dependencies: dependencies, socketPath: socketPath)
    }

    /// Returns once the socket accepts connections (for in-process use: benchmarks, tests).
    public func waitUntilListening() async {
        await withCheckedContinuation { continuation in
            let resumeNow = started.withLockedValue { waiting -> Bool in
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
        let lock = try AgentSocket.claim(socketPath)
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
        let untaken = UntakenConnections()
        let server = try await listen(untaken: untaken, logger: logger)
        logger.info("listening", metadata: ["socket": "\(socketPath)", "pid": "\(getpid())"])
        for waiter in started.withLockedValue({ waiting in
            defer { waiting = nil }
            return waiting ?? []
        }) { waiter.resume() }

        var failure: (any Error)?
        do {
            // Accepting runs on the listening socket's event loop, and each connection on its own (below): a client's
            // connection reaches its task without waking a thread of the cooperative pool.
            try await withTaskExecutorPreference(EventLoopTaskExecutor(server.channel.eventLoop)) {
                try await serve(server, untaken: untaken, registry: registry, logger: logger)
            }
        } catch {
            failure = error
        }
        await registry.shutdown()
        logger.info("stopped; every key was zeroed")
        if let failure { throw failure }
    }

    /// Accepts connections until graceful shutdown or cancellation, each in a task of its own, beside the SIGUSR1
    /// listener; then closes those accepted and never taken, cancels the rest and returns once every one has ended.
    private func serve(
        _ server: NIOAsyncChannel<AcceptedConnection, Never>,
        untaken: UntakenConnections,
        registry: KeymakerRegistry,
        logger: Logger
    ) async throws {
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask {
                let background = await UnixSignalsSequence(trapping: .sigusr1)
                for await _ in background.cancelOnGracefulShutdown() {
                    logger.info("background signal: applying every account's background policy")
                    await registry.enteredBackground()
                }
            }
            // Graceful shutdown closes the listening channel, which ends the sequence after the connections handed
            // over: each gets its task (cancelled below), which closes it. Those accepted and not handed over (still
            // being set up, or dropped by a cancelled loop) are closed from `untaken`.
            let accepting: Result<Void, any Error>
            do {
                try await withGracefulShutdownHandler {
                    try await server.executeThenClose { connections in
                        for try await connection in connections {
                            admit(connection, untaken: untaken, into: &group, logger: logger)
                        }
                    }
                } onGracefulShutdown: {
                    server.channel.close(promise: nil)
                }
                accepting = .success(())
            } catch {
                accepting = .failure(error)
            }
            // Connections accepted and never taken (see ``UntakenConnections``) are closed here.
            for connection in untaken.close() {
                switch connection {
                case .arriving(let channel): try? await channel.close()
                case .wrapped(let channel): try? await channel.executeThenClose { _, _ in }
                }
            }
            try accepting.get()
            logger.info("shutting down: locking every account")
            // Every connection's task ends: a wait for a frame, a request or a presence answer is cancelled.
            group.cancelAll()
        }
    }

    /// The listening channel: the socket file is made 0600 right after bind, in the 0700 folder (which keeps
    /// everyone else out meanwhile). Not by umask: it is process-wide, so a thread or child process started while
    /// it is narrowed would inherit it.
    private func listen(
        untaken: UntakenConnections,
        logger: Logger
    ) async throws -> NIOAsyncChannel<AcceptedConnection, Never> {
        let ownUID = getuid()
        let limits = self.limits
        let server: NIOAsyncChannel<AcceptedConnection, Never>
        do {
            server = try await ServerBootstrap(group: eventLoopGroup)
                .serverChannelOption(.backlog, value: 64)
                .serverChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(UntakenConnections.Arrivals(untaken))
                    }
                }
                .childChannelOption(.allowRemoteHalfClosure, value: true)
                .bind(unixDomainSocketPath: socketPath) { channel in
                    AcceptedConnection.accept(
                        channel,
                        ownUID: ownUID,
                        limits: limits,
                        untaken: untaken,
                        logger: logger
                    )
                }
        } catch {
            throw AppError.socket(operation: "listen on \(socketPath)", errno: (error as? IOError)?.errnoCode ?? EIO)
        }
        guard chmod(socketPath, 0o600) == 0 else {
            let code = errno
            try? await server.channel.close()
            throw AppError.socket(operation: "restrict \(socketPath) to its owner", errno: code)
        }
        return server
    }

    /// Starts `connection`'s task, or refuses it when the agent already serves its maximum.
    private func admit(
        _ connection: AcceptedConnection,
        untaken: UntakenConnections,
        into group: inout ThrowingDiscardingTaskGroup<any Error>,
        logger: Logger
    ) {
        let channel: NIOAsyncChannel<AgentFrame, AgentFrame>
        let answers: NIOLoopBound<PresenceAnswers>
        let deadlines: NIOLoopBound<AgentDeadlines>
        let task: ConnectionTask
        switch connection {
        case .served(let served, let servedAnswers, let servedDeadlines, let servedTask):
            (channel, answers, deadlines, task) = (served, servedAnswers, servedDeadlines, servedTask)
        case .refused:
            logger.warning("refused a connection from another user")
            return
        case .late:
            return
        }
        untaken.take(channel)
        let admitted =
            active.wrappingAdd(1, ordering: .acquiringAndReleasing).newValue <= limits.maximumConnections
        let executor = EventLoopTaskExecutor(channel.channel.eventLoop)
        group.addTask(executorPreference: executor) { [self] in
            defer { active.wrappingSubtract(1, ordering: .acquiringAndReleasing) }
            guard admitted else {
                try? await channel.executeThenClose { _, outbound in
                    try await Self.refuse(
                        outbound,
                        AgentFailure(.busy, "The agent is serving too many clients; try again.")
                    )
                }
                return
            }
            let conversation = ConnectionConversation(
                channel: channel.channel,
                answers: answers,
                deadlines: deadlines,
                limits: limits
            )
            defer { conversation.finish() }
            try? await channel.executeThenClose { inbound, outbound in
                // Its own task, so that the event loop can cancel it when a request runs out of time.
                // On the connection's event loop (see ``AgentOperation/runsOnEventLoop`` for what leaves it).
                let serving = Task(executorPreference: executor) { [self] () async -> Void in
                    try? await serve(inbound, outbound, conversation: conversation, logger: logger)
                }
                task.run(serving)
                await withTaskCancellationHandler {
                    await serving.value
                } onCancel: {
                    serving.cancel()
                }
            }
        }
    }

    private static func refuse(
        _ outbound: NIOAsyncChannelOutboundWriter<AgentFrame>,
        _ failure: AgentFailure
    ) async throws {
        try await outbound.write(AgentFrame(kind: .reply, payload: AgentCoding.encode(AgentReply.failure(failure))))
    }

    /// One client's requests, one at a time, until it leaves, idles out or breaks the protocol.
    private func serve(
        _ inbound: NIOAsyncChannelInboundStream<AgentFrame>,
        _ outbound: NIOAsyncChannelOutboundWriter<AgentFrame>,
        conversation: ConnectionConversation,
        logger: Logger
    ) async throws {
        var frames = inbound.makeAsyncIterator()
        while true {
            let frame: AgentFrame
            switch await Self.next(&frames) {
            case .frame(let next): frame = next
            case .end, .expired: return
            case .failed(let error):
                logger.notice("closed a connection after a bad frame", metadata: ["error": "\(error)"])
                try await Self.refuse(outbound, Self.failure(for: error))
                return
            }
            guard frame.kind == .request else {
                try await Self.refuse(outbound, AgentFailure(.badFrame, "A request frame was expected."))
                return
            }
            guard let request = try? AgentCoding.decode(AgentRequest.self, frame.payload) else {
                logger.notice("closed a connection after an unreadable request")
                try await Self.refuse(outbound, AgentFailure(.badRequest, "The request could not be read."))
                return
            }
            let limit = limits.timeout(for: request.operation)
            if limit != limits.requestMilliseconds { conversation.extendDeadline(to: limit) }
            var secret: SecretBytes?
            if request.expectsSecret {
                var received = await Self.next(&frames, within: limits.frameMilliseconds, channel: conversation.channel)
                guard case .frame(var next) = received, next.kind == .secret else {
                    let failure =
                        if case .failed(let error) = received { Self.failure(for: error) } else {
                            AgentFailure(.badFrame, "The PIN was expected in a secret frame.")
                        }
                    try await Self.refuse(outbound, failure)
                    return
                }
                // `next` holds the only reference to the payload now, so it is zeroed in place, not copied.
                received = .end
                secret = SecretBytes(copying: next.payload)
                for index in next.payload.indices { next.payload[index] = 0 }
            }
            let start = ContinuousClock.now
            let reply =
                if request.operation.runsOnEventLoop {
                    await dispatcher.handle(request, secret: secret, conversation: conversation)
                } else {
                    // Blocking work (keychain `flock`/`fsync`, files, child processes) may run anywhere inside.
                    await withTaskExecutorPreference(BlockingPool.taskExecutor) {
                        await dispatcher.handle(request, secret: secret, conversation: conversation)
                    }
                }
            // Cancelled: the request ran out of time (the client has its `timeout` reply) or the agent shuts down.
            guard !Task.isCancelled else { return }
            logger.debug(
                "request",
                metadata: [
                    "op": "\(request.operation.rawValue)", "ok": "\(reply.failure == nil)",
                    "ms": "\(Self.milliseconds(since: start))",
                ]
            )
            try await outbound.write(AgentCoding.frame(reply))
            // A search word or a page's snippets went through this loop's stack: the frames are gone, their bytes
            // are not, and the loop may idle above them past a lock (AgentMemoryTests).
            if request.operation.runsOnEventLoop { ThreadStack.zeroUnused() }
        }
    }

    private static func milliseconds(since start: ContinuousClock.Instant) -> Int64 {
        let elapsed = (ContinuousClock.now - start).components
        return elapsed.seconds * 1000 + elapsed.attoseconds / 1_000_000_000_000_000
    }

    /// The failure reply for a frame that broke the protocol: another version gets its own code and sentence.
    static func failure(for error: FrameError) -> AgentFailure {
        if case .unsupportedVersion(let version) = error {
            let sentence = AppError.versionMismatch(agent: Int(AgentFrame.version), client: Int(version)).description
            return AgentFailure(.unsupportedVersion, sentence)
        }
        return AgentFailure(.badFrame, error.description)
    }

    /// What came of waiting for a frame.
    enum Received {
        /// A frame.
        case frame(AgentFrame)
        /// The client closed its side (or the wait was cancelled).
        case end
        /// Nothing came in time.
        case expired
        /// The bytes broke the protocol.
        case failed(FrameError)
    }

    /// Fired into a connection's pipeline when a wait for a frame is over: it ends the inbound stream.
    struct WaitExpired: Error {}

    /// The next frame of `frames`; the connection's ``AgentDeadlines`` closes it when none comes in time.
    static func next(_ frames: inout NIOAsyncChannelInboundStream<AgentFrame>.AsyncIterator) async -> Received {
        do {
            guard let frame = try await frames.next() else { return .end }
            return .frame(frame)
        } catch let error as FrameError {
            return .failed(error)
        } catch is WaitExpired {
            return .expired
        } catch {
            return .end
        }
    }

    /// The next frame of `frames` within `milliseconds` (the secret frame that follows its request), racing a timer
    /// on the connection's event loop: if the timer wins it ends the stream with ``WaitExpired`` (a stream that was
    /// waited out is not read again), else it is cancelled.
    static func next(
        _ frames: inout NIOAsyncChannelInboundStream<AgentFrame>.AsyncIterator,
        within milliseconds: Int64,
        channel: any Channel
    ) async -> Received {
        let timer = channel.eventLoop.scheduleTask(in: .milliseconds(milliseconds)) {
            channel.pipeline.fireErrorCaught(WaitExpired())
        }
        defer { timer.cancel() }
        return await next(&frames)
    }
}

/// A handler's line back to the client of one connection.
final class ConnectionConversation: AgentConversation {
    /// The connection.
    let channel: any Channel
    private let answers: NIOLoopBound<PresenceAnswers>
    private let deadlines: NIOLoopBound<AgentDeadlines>
    private let limits: AgentLimits
    /// The connection's preview folder, and whether the connection is over (a handler that outlived it must not
    /// leave a preview behind).
    private let preview = NIOLockedValueBox<(folder: String?, finished: Bool)>((nil, false))

    init(
        channel: any Channel,
        answers: NIOLoopBound<PresenceAnswers>,
        deadlines: NIOLoopBound<AgentDeadlines>,
        limits: AgentLimits
    ) {
        self.channel = channel
        self.answers = answers
        self.deadlines = deadlines
        self.limits = limits
    }

    /// Gives the request being served `milliseconds` from now instead of the default limit.
    func extendDeadline(to milliseconds: Int64) {
        let deadlines = self.deadlines
        channel.eventLoop.execute { deadlines.value.extend(to: milliseconds) }
    }

    /// Sends the question and waits for the answer frame until it comes, the client's side closes, or the request
    /// is cancelled (its time limit).
    func confirmPresence(reason: String) async -> Bool {
        let seconds = Int(max(1, limits.unlockMilliseconds / 1000))
        guard let question = try? AgentCoding.encode(AgentEvent.presence(reason: reason, seconds: seconds)) else {
            return false
        }
        let eventLoop = channel.eventLoop
        let promise = eventLoop.makePromise(of: AgentFrame?.self)
        let (answers, channel) = (self.answers, self.channel)
        eventLoop.execute {
            answers.value.expect(promise)
            channel.writeAndFlush(AgentFrame(kind: .event, payload: question), promise: nil)
        }
        let frame = await withTaskCancellationHandler {
            try? await promise.futureResult.get()
        } onCancel: {
            eventLoop.execute { answers.value.withdraw(promise) }
        }
        guard let frame, let answer = try? AgentCoding.decode(AgentAnswer.self, frame.payload) else {
            return false
        }
        return answer.confirmed
    }

    /// Queues the event on the connection (best effort; the request's reply is written after it).
    func progress(_ progress: ImportProgress) { queue(.progress(progress)) }

    /// Queues the event on the connection (best effort).
    func syncProgress(_ progress: SyncProgress) { queue(.syncProgress(progress)) }

    private func queue(_ event: AgentEvent) {
        guard let bytes = try? AgentCoding.encode(event) else { return }
        let channel = self.channel
        channel.eventLoop.execute {
            channel.writeAndFlush(AgentFrame(kind: .event, payload: bytes), promise: nil)
        }
    }

    /// Writes the chunk's event and waits until it is flushed, so a slow client slows the sender instead of
    /// queueing the whole attachment in memory.
    func chunk(_ bytes: ArraySlice<UInt8>) async throws {
        var data = Data(bytes)
        defer { data.resetBytes(in: 0..<data.count) }
        let payload = try AgentCoding.encode(AgentEvent.chunk(data))
        try await channel.writeAndFlush(AgentFrame(kind: .event, payload: payload)).get()
    }

    func ownPreview(_ folder: String) {
        let kept = preview.withLockedValue { state -> Bool in
            guard !state.finished else { return false }
            state.folder = folder
            return true
        }
        if !kept { SecureFile.removeTree(folder) }
    }

    func endPreview() {
        let folder = preview.withLockedValue { state in
            defer { state.folder = nil }
            return state.folder
        }
        if let folder { SecureFile.removeTree(folder) }
    }

    /// The connection closed: deletes its preview now and any a handler hands over later.
    func finish() {
        preview.withLockedValue { $0.finished = true }
        endPreview()
    }
}

extension AgentOperation {
    /// Whether the agent serves the operation on the connection's event loop, where nothing may block: `hello` (no
    /// I/O), `background` (the Keymakers' own code runs on ``BlockingPool`` whoever calls it), and `list` and
    /// `search`, whose account check (``KeymakerRegistry/chooseAccount(_:)``, a keychain read) the dispatcher sends
    /// to ``BlockingPool`` alone and whose store reads wait on GRDB's queue. Those two stay on the loop because their
    /// mail text (a search word is a short string held inline in a frame; a page's snippets) lands on the stack of
    /// the thread that serves them, and a loop's stack is reused at once, where a parked pool thread's would keep it
    /// past a lock (AgentMemoryTests). Every other operation reaches the keychain
    /// (its `flock`, and `fsync` when it writes), files, processes or the network, so it runs with
    /// ``BlockingPool/taskExecutor`` as its preference (docs/ARCHITECTURE.md, "Concurrency").
    var runsOnEventLoop: Bool {
        switch self {
        case .hello, .background, .list, .search:
            true
        case .status, .account, .create, .unlock, .lock, .autolock, .protect, .logout, .erase,
            .message, .attachments, .attachmentContent, .preview, .previewEnd, .save, .import, .sync, .serverAdd,
            .serverShow, .serverRemove, .notifyRegister, .notifyStatus, .notifyUnregister, .fastSyncOn, .fastSyncOff,
            .fastSyncStatus, .push, .watch, .compose, .saveDraft, .drafts, .deleteDraft, .sendDraft, .outbox,
            .outboxRetry, .outboxCancel, .outboxFlush, .contacts, .contactAdd, .contactsExport, .keys, .keyGenerate,
            .keyImport, .keyExport, .keyAutocrypt, .keyAutocryptSetup, .keyAutocryptImport:
            false
        }
    }
}
