import CofferAgentProtocol
import CofferApp
import Logging
import NIOConcurrencyHelpers
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// The agent's frame decoder in its NIO pipeline: bytes in, ``AgentFrame``s out, with the limits of
/// docs/FORMAT.md ("Agent protocol v3").
///
/// Each header is checked by ``AgentFrame/header(_:maximumPayload:)`` as its bytes arrive, so garbage or an oversized
/// announcement is refused (a ``FrameError`` fired down the pipeline) before its payload is read. Once the first
/// byte of a frame is in, the rest must follow within `frameTimeout`, else ``FrameError/incomplete`` is fired; the
/// stream ending inside a frame is ``FrameError/incomplete`` too.
///
/// A payload is zeroed in the receive buffer as soon as it is copied out (a secret frame carries a PIN). The zeroing
/// writes the buffer's storage in place, not through copy-on-write: the channel's receive pool shares that storage,
/// and it must lose the bytes too.
package struct AgentFrameDecoder: ByteToMessageDecoder {
    package typealias InboundOut = AgentFrame

    /// The largest payload accepted.
    let maximumPayload: Int
    /// How long the rest of a frame may take once its first byte is in.
    let frameTimeout: TimeAmount
    private var deadline: Scheduled<Void>?

    /// A decoder accepting payloads up to `maximumPayload` bytes, each frame's rest within `frameTimeout`.
    package init(maximumPayload: Int, frameTimeout: TimeAmount) {
        self.maximumPayload = maximumPayload
        self.frameTimeout = frameTimeout
    }

    package mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        let header: AgentFrame.Header?
        do { header = try AgentFrame.header(buffer.readableBytesView, maximumPayload: maximumPayload) } catch {
            disarm()
            throw error
        }
        guard let header, buffer.readableBytes >= header.frameSize else {
            if buffer.readableBytes > 0 { arm(context) }
            return .needMoreData
        }
        disarm()
        let payloadStart = buffer.readerIndex + AgentFrame.headerSize
        let payload = buffer.getBytes(at: payloadStart, length: header.payloadLength) ?? []
        buffer.withUnsafeReadableBytes { raw in
            let bytes = UnsafeMutableRawBufferPointer(mutating: raw)
            let range = AgentFrame.headerSize..<header.frameSize
            bytes[range].initializeMemory(as: UInt8.self, repeating: 0)
        }
        buffer.moveReaderIndex(forwardBy: header.frameSize)
        context.fireChannelRead(wrapInboundOut(AgentFrame(kind: header.kind, payload: payload)))
        return .continue
    }

    package mutating func decodeLast(
        context: ChannelHandlerContext,
        buffer: inout ByteBuffer,
        seenEOF: Bool
    ) throws -> DecodingState {
        let state = try decode(context: context, buffer: &buffer)
        if state == .needMoreData, buffer.readableBytes > 0 {
            disarm()
            throw FrameError.incomplete
        }
        return state
    }

    package mutating func decoderRemoved(context: ChannelHandlerContext) { disarm() }

    private mutating func arm(_ context: ChannelHandlerContext) {
        guard deadline == nil else { return }
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        deadline = context.eventLoop.scheduleTask(in: frameTimeout) {
            bound.value.fireErrorCaught(FrameError.incomplete)
        }
    }

    private mutating func disarm() {
        deadline?.cancel()
        deadline = nil
    }
}

/// The agent's frame encoder: ``AgentFrame``s out as their bytes on the wire.
struct AgentFrameEncoder: MessageToByteEncoder {
    typealias OutboundIn = AgentFrame

    func encode(data: AgentFrame, out: inout ByteBuffer) throws {
        out.reserveCapacity(AgentFrame.headerSize + data.payload.count)
        out.writeBytes(data.headerBytes)
        out.writeBytes(data.payload)
    }
}

/// Routes the answer to a presence question to the request that asked it, beside the connection's request loop:
/// while a question is open, the next `answer` frame completes it; every other frame goes on down the pipeline.
/// When the client's side closes, an open question gets `nil` (nobody can answer any more).
final class PresenceAnswers: ChannelInboundHandler {
    typealias InboundIn = AgentFrame
    typealias InboundOut = AgentFrame

    private var waiting: EventLoopPromise<AgentFrame?>?

    /// Opens a question: `promise` gets the next answer frame, or `nil`.
    func expect(_ promise: EventLoopPromise<AgentFrame?>) {
        waiting?.succeed(nil)
        waiting = promise
    }

    /// Withdraws the question `promise` (the request was cancelled); it gets `nil` if still open.
    func withdraw(_ promise: EventLoopPromise<AgentFrame?>) {
        guard let open = waiting, open.futureResult === promise.futureResult else { return }
        waiting = nil
        open.succeed(nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        if frame.kind == .answer, let open = waiting {
            waiting = nil
            open.succeed(frame)
            return
        }
        context.fireChannelRead(data)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .some(.inputClosed) = event as? ChannelEvent { closeQuestion() }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        closeQuestion()
        context.fireErrorCaught(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        closeQuestion()
        context.fireChannelInactive()
    }

    private func closeQuestion() {
        waiting?.succeed(nil)
        waiting = nil
    }
}

/// The time limits of one connection, kept on its event loop, where the frames pass: the wait for a request
/// (``AgentLimits/idleMilliseconds``) starts when the connection opens and whenever a reply ends a request; a
/// request's own limit (``AgentLimits/requestMilliseconds``, or a longer one the connection asks for with
/// ``extend(to:)``) starts when its frame is read. No timer is set, moved or cancelled from another thread, so a
/// request wakes the event loop only to read it and to write its reply.
///
/// When a request runs out of time, the client gets the `timeout` reply at once, the connection's task is cancelled
/// (the request winds down at its cancellation: a presence wait ends, an import stops) and whatever reply it still
/// writes is dropped. When the wait for a request runs out, the connection is closed.
final class AgentDeadlines: ChannelDuplexHandler {
    typealias InboundIn = AgentFrame
    typealias InboundOut = AgentFrame
    typealias OutboundIn = AgentFrame
    typealias OutboundOut = AgentFrame

    private let limits: AgentLimits
    private let task: ConnectionTask
    private let logger: Logger
    private var timer: Scheduled<Void>?
    private var context: ChannelHandlerContext?
    /// Requests read and not yet answered (a client may send the next before the reply).
    private var outstanding = 0
    private var timedOut = false

    init(limits: AgentLimits, task: ConnectionTask, logger: Logger) {
        self.limits = limits
        self.task = task
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { waitForRequest(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        if timer == nil { waitForRequest(context) }
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        disarm()
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        disarm()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if unwrapInboundIn(data).kind == .request {
            outstanding += 1
            if outstanding == 1 { limitRequest(context, milliseconds: limits.requestMilliseconds) }
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard !timedOut else {
            promise?.fail(ChannelError.outputClosed)
            return
        }
        let kind = unwrapOutboundIn(data).kind
        if kind == .reply || kind == .summaries, outstanding > 0 {
            outstanding -= 1
            if outstanding > 0 {
                limitRequest(context, milliseconds: limits.requestMilliseconds)
            } else {
                waitForRequest(context)
            }
        }
        context.write(data, promise: promise)
    }

    /// Gives the request being served `milliseconds` from now instead of the default limit (an unlock may wait for
    /// a person; an import or a sync takes long). Call on the event loop.
    func extend(to milliseconds: Int64) {
        guard let context, outstanding > 0, !timedOut else { return }
        limitRequest(context, milliseconds: milliseconds)
    }

    private func waitForRequest(_ context: ChannelHandlerContext) {
        arm(context, milliseconds: limits.idleMilliseconds) { context in context.close(promise: nil) }
    }

    private func limitRequest(_ context: ChannelHandlerContext, milliseconds: Int64) {
        arm(context, milliseconds: milliseconds) { [self] context in
            timedOut = true
            logger.notice("a request timed out")
            let failure = AgentReply.failure(AgentFailure(.timeout, "The request took too long and was abandoned."))
            if let payload = try? AgentCoding.encode(failure) {
                context.writeAndFlush(wrapOutboundOut(AgentFrame(kind: .reply, payload: payload)), promise: nil)
            }
            task.cancel()
        }
    }

    private func arm(
        _ context: ChannelHandlerContext,
        milliseconds: Int64,
        _ fire: @escaping (ChannelHandlerContext) -> Void
    ) {
        timer?.cancel()
        timer = context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(milliseconds)) { fire(context) }
    }

    private func disarm() {
        timer?.cancel()
        timer = nil
    }
}

/// Runs a task's jobs on an event loop: the task of a connection runs on its channel's loop, so that a frame read
/// there resumes it, and its reply is written there, without waking another thread.
final class EventLoopTaskExecutor: TaskExecutor {
    let eventLoop: any EventLoop

    init(_ eventLoop: any EventLoop) { self.eventLoop = eventLoop }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}

/// The task that serves one connection, for its event loop to cancel when a request runs out of time.
final class ConnectionTask: Sendable {
    private let state = NIOLockedValueBox<(task: Task<Void, Never>?, cancelled: Bool)>((nil, false))

    /// Hands over the connection's task (cancelled at once if a cancellation came first).
    func run(_ task: Task<Void, Never>) {
        let cancelled = state.withLockedValue { state in
            state.task = task
            return state.cancelled
        }
        if cancelled { task.cancel() }
    }

    /// Cancels the connection's task.
    func cancel() {
        state.withLockedValue { state in
            state.cancelled = true
            return state.task
        }?.cancel()
    }
}

/// One accepted connection, as the child channel initializer leaves it.
enum AcceptedConnection: Sendable {
    /// A peer of the agent's own user, with its frames, its presence answers, its time limits and the handle of the
    /// task that will serve it.
    case served(
        NIOAsyncChannel<AgentFrame, AgentFrame>,
        answers: NIOLoopBound<PresenceAnswers>,
        deadlines: NIOLoopBound<AgentDeadlines>,
        task: ConnectionTask
    )
    /// A peer of another user (or whose credentials could not be read): refused and being closed.
    case refused
    /// A connection accepted after the agent stopped taking connections: closed.
    case late

    /// Sets up `channel`: the peer's uid is checked with `SO_PEERCRED` first; another user's process gets a
    /// `forbidden` reply and is disconnected. A served connection is held by `untaken` until the accept loop takes
    /// it. Runs on the channel's event loop.
    static func accept(
        _ channel: any Channel,
        ownUID: UInt32,
        limits: AgentLimits,
        untaken: UntakenConnections,
        logger: Logger
    ) -> EventLoopFuture<AcceptedConnection> {
        peerUID(channel).flatMapThrowing { uid -> AcceptedConnection in
            let sync = channel.pipeline.syncOperations
            try sync.addHandler(MessageToByteHandler(AgentFrameEncoder()))
            guard uid == ownUID else {
                let refusal = try AgentCoding.encode(
                    AgentReply.failure(AgentFailure(.forbidden, "This agent serves only its own user."))
                )
                channel.writeAndFlush(AgentFrame(kind: .reply, payload: refusal)).whenComplete { _ in
                    channel.close(promise: nil)
                }
                return .refused
            }
            let decoder = AgentFrameDecoder(
                maximumPayload: AgentFrame.maximumRequestPayload,
                frameTimeout: .milliseconds(limits.frameMilliseconds)
            )
            try sync.addHandler(ByteToMessageHandler(decoder))
            let answers = PresenceAnswers()
            try sync.addHandler(answers)
            let task = ConnectionTask()
            let deadlines = AgentDeadlines(limits: limits, task: task, logger: logger)
            try sync.addHandler(deadlines)
            guard let wrapped = try untaken.hold(channel) else {
                channel.close(promise: nil)
                return .late
            }
            return .served(
                wrapped,
                answers: NIOLoopBound(answers, eventLoop: channel.eventLoop),
                deadlines: NIOLoopBound(deadlines, eventLoop: channel.eventLoop),
                task: task
            )
        }.flatMapErrorThrowing { _ in
            channel.close(promise: nil)
            return .refused
        }
    }

    /// The uid of the process at the other end (the kernel's word, not the peer's); `nil` when it cannot be read.
    private static func peerUID(_ channel: any Channel) -> EventLoopFuture<UInt32?> {
        guard let provider = channel as? any SocketOptionProvider else {
            return channel.eventLoop.makeSucceededFuture(nil)
        }
        // struct ucred: pid_t pid; uid_t uid; gid_t gid.
        let credentials: EventLoopFuture<PeerCredentialBytes> = provider.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET),
            name: SocketOptionName(SO_PEERCRED)
        )
        return credentials.map { Optional($0.1) }.recover { _ in nil }
    }

    private typealias PeerCredentialBytes = (Int32, UInt32, UInt32)
}

/// The connections accepted and not yet taken by the agent's accept loop, from the moment the listening channel reads
/// one (``Arrivals``) until the loop takes it, or it closes.
///
/// NIO hands each accepted connection to the loop through the listening channel's buffer (swift-nio #2813). A loop
/// that is cancelled throws that buffer away, and a connection dropped there, its writer never finished, stops the
/// process ("Deinited NIOAsyncWriter without calling finish()"). A connection still in its initializer when the
/// listening channel closes is never handed over at all, and, never activated, stays open with its client waiting.
/// So each is held here, and when the loop ends, ``close()`` hands over the rest for the agent to close before it
/// returns.
final class UntakenConnections: Sendable {
    /// One connection held.
    enum Held: Sendable {
        /// In the child channel initializer (the peer's credentials are being read).
        case arriving(any Channel)
        /// Wrapped for the accept loop, not yet taken.
        case wrapped(NIOAsyncChannel<AgentFrame, AgentFrame>)
    }

    private let state = NIOLockedValueBox<(accepting: Bool, held: [ObjectIdentifier: Held])>((true, [:]))

    /// Holds `channel` from its arrival until it closes or is wrapped (nothing once ``close()`` was called: its
    /// initializer's ``hold(_:)`` then refuses it).
    func arrive(_ channel: any Channel) {
        let key = ObjectIdentifier(channel)
        let accepting = state.withLockedValue { state in
            if state.accepting { state.held[key] = .arriving(channel) }
            return state.accepting
        }
        guard accepting else { return }
        channel.closeFuture.whenComplete { [self] _ in
            state.withLockedValue { state in
                if case .arriving = state.held[key] { state.held[key] = nil }
            }
        }
    }

    /// The listening channel's first handler: it holds each accepted connection as it arrives, on the listening
    /// channel's event loop, before NIO hands it to its own event loop for the child channel initializer. Every
    /// connection accepted before the listening channel closes is therefore held by the time it has closed.
    final class Arrivals: ChannelInboundHandler, Sendable {
        typealias InboundIn = any Channel
        typealias InboundOut = any Channel

        let untaken: UntakenConnections

        init(_ untaken: UntakenConnections) { self.untaken = untaken }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            untaken.arrive(unwrapInboundIn(data))
            context.fireChannelRead(data)
        }
    }

    /// Wraps `channel` and holds it until ``take(_:)``; `nil` once ``close()`` was called (the connection is not
    /// wrapped, and the caller closes it). Runs on the channel's event loop.
    func hold(_ channel: any Channel) throws -> NIOAsyncChannel<AgentFrame, AgentFrame>? {
        try state.withLockedValue { state in
            // Under the lock, so that no connection is wrapped after `close()` took the rest.
            guard state.accepting else { return nil }
            let wrapped = try NIOAsyncChannel<AgentFrame, AgentFrame>(wrappingChannelSynchronously: channel)
            state.held[ObjectIdentifier(channel)] = .wrapped(wrapped)
            return wrapped
        }
    }

    /// The accept loop took `channel`: its task closes it.
    func take(_ channel: NIOAsyncChannel<AgentFrame, AgentFrame>) {
        _ = state.withLockedValue { $0.held.removeValue(forKey: ObjectIdentifier(channel.channel)) }
    }

    /// Stops holding connections and returns those never taken, for the caller to close.
    func close() -> [Held] {
        state.withLockedValue { state in
            state.accepting = false
            defer { state.held = [:] }
            return Array(state.held.values)
        }
    }
}
