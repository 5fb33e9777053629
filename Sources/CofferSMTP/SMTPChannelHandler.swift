import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// Runs the reply parser on the event loop, queues replies for the client, turns the pipeline's idle event into
/// ``SMTPError/timedOut(seconds:)``, and tells the client when the channel can take more data (backpressure).
///
/// For STARTTLS it keeps the line between plaintext and TLS: once armed (``armForStartTLS()``), the reply to
/// STARTTLS is the last plaintext it reads. Any byte after that reply, in the same read or a later one, fails the
/// connection with ``SMTPError/plaintextAfterStartTLS`` until ``resumeOverTLS()`` runs, which the client calls on
/// the event loop in the same step that puts the TLS handler in front of this one.
final class SMTPChannelHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private enum StartTLS {
        /// Plaintext before any STARTTLS, or TLS after it.
        case off
        /// STARTTLS was sent: its reply is the last plaintext.
        case armed
        /// The reply came: no more plaintext.
        case answered
    }

    private var parser: SMTPReplyParser
    private let queue: SMTPReplyQueue
    private let idleSeconds: Int
    private var failed = false
    private var startTLS = StartTLS.off
    private var writableWaiters: [EventLoopPromise<Void>] = []
    private var context: ChannelHandlerContext?

    init(limits: SMTPReplyParser.Limits, queue: SMTPReplyQueue, idleSeconds: Int) {
        self.parser = SMTPReplyParser(limits: limits)
        self.queue = queue
        self.idleSeconds = idleSeconds
    }

    /// Makes the next reply the last plaintext this handler accepts.
    func armForStartTLS() { startTLS = .armed }

    /// Accepts bytes again, now from the TLS handler in front.
    ///
    /// - Throws: ``SMTPError/plaintextAfterStartTLS`` if plaintext came after the reply (the connection is then
    ///   closing), or if STARTTLS was not answered.
    func resumeOverTLS() throws(SMTPError) {
        guard !failed, startTLS == .answered else { throw .plaintextAfterStartTLS }
        startTLS = .off
    }

    /// Succeeds when the channel is writable (at once if it is), fails when the connection ends first.
    func whenWritable(eventLoop: any EventLoop) -> EventLoopFuture<Void> {
        guard let context else { return eventLoop.makeFailedFuture(queue.failure ?? .connectionClosed) }
        if failed || !context.channel.isActive {
            return context.eventLoop.makeFailedFuture(queue.failure ?? .connectionClosed)
        }
        if context.channel.isWritable { return context.eventLoop.makeSucceededVoidFuture() }
        let promise = context.eventLoop.makePromise(of: Void.self)
        writableWaiters.append(promise)
        return promise.futureResult
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        failWaiters(.connectionClosed)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !failed else { return }
        guard startTLS != .answered else { return fail(.plaintextAfterStartTLS, context: context) }
        let buffer = Self.unwrapInboundIn(data)
        buffer.withUnsafeReadableBytes { parser.feed($0) }
        do {
            while let reply = try parser.next() {
                queue.push(reply)
                if startTLS == .armed {
                    startTLS = .answered
                    if parser.bufferedByteCount > 0 { fail(.plaintextAfterStartTLS, context: context) }
                    return
                }
            }
        } catch {
            fail(error, context: context)
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            let waiters = writableWaiters
            writableWaiters = []
            for waiter in waiters { waiter.succeed() }
        }
        context.fireChannelWritabilityChanged()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is IdleStateHandler.IdleStateEvent {
            fail(.timedOut(seconds: idleSeconds), context: context)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        queue.fail(.connectionClosed)
        failWaiters(queue.failure ?? .connectionClosed)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail(.connectionFailed(reason: Self.sentence(for: error)), context: context)
    }

    /// What a failure of the connection itself means: the system's words for a socket error, what a TLS stream cut
    /// without its closing message means, else the error's type (never its text, which may quote the server).
    static func sentence(for error: any Error) -> String {
        if let error = error as? IOError {
            let reason = String(cString: strerror(error.errnoCode))
            return reason.prefix(1).lowercased() + reason.dropFirst()
        }
        if "\(type(of: error))" == "NIOSSLError", "\(error)" == "uncleanShutdown" {
            return "the server dropped the connection without closing TLS"
        }
        return "an error of type \(type(of: error))"
    }

    private func fail(_ error: SMTPError, context: ChannelHandlerContext) {
        failed = true
        queue.fail(error)
        failWaiters(error)
        context.close(promise: nil)
    }

    private func failWaiters(_ error: SMTPError) {
        let waiters = writableWaiters
        writableWaiters = []
        for waiter in waiters { waiter.fail(error) }
    }
}
