import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// Runs the response parser on the event loop and queues its events for the client.
///
/// For STARTTLS it keeps the line between plaintext and TLS: once armed (``armForStartTLS()``), the tagged answer
/// to STARTTLS is the last plaintext it reads. Any byte after that answer, in the same read or a later one, fails
/// the connection with ``IMAPError/plaintextAfterStartTLS`` until ``resumeOverTLS()`` runs, which the client calls
/// on the event loop in the same step that puts the TLS handler in front of this one.
final class IMAPChannelHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private enum StartTLS {
        /// Plaintext before any STARTTLS, or TLS after it.
        case off
        /// STARTTLS was sent: its tagged answer is the last plaintext.
        case armed
        /// The answer came: no more plaintext.
        case answered
    }

    private var parser: IMAPResponseParser
    private let queue: IMAPEventQueue
    private var failed = false
    private var startTLS = StartTLS.off

    init(limits: IMAPResponseParser.Limits, queue: IMAPEventQueue) {
        self.parser = IMAPResponseParser(limits: limits)
        self.queue = queue
    }

    /// Makes the next tagged response the last plaintext this handler accepts.
    func armForStartTLS() { startTLS = .armed }

    /// Accepts bytes again, now from the TLS handler in front.
    ///
    /// - Throws: ``IMAPError/plaintextAfterStartTLS`` if plaintext came after the answer (the connection is then
    ///   closing), or if STARTTLS was not answered.
    func resumeOverTLS() throws(IMAPError) {
        guard !failed, startTLS == .answered else { throw .plaintextAfterStartTLS }
        startTLS = .off
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !failed else { return }
        guard startTLS != .answered else { return fail(.plaintextAfterStartTLS, context: context) }
        let buffer = Self.unwrapInboundIn(data)
        buffer.withUnsafeReadableBytes { parser.feed($0) }
        do {
            while let event = try parser.next() {
                queue.push(.event(event))
                if startTLS == .armed, case .response(.tagged) = event {
                    startTLS = .answered
                    if parser.bufferedByteCount > 0 { fail(.plaintextAfterStartTLS, context: context) }
                    return
                }
            }
        } catch {
            fail(error, context: context)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        queue.push(.failed(.connectionClosed))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        queue.push(.failed(.transport(Self.sentence(for: error))))
        context.close(promise: nil)
    }

    /// What a failure of the connection itself means, as a sentence: the system's words for a socket error, what a
    /// TLS stream cut without its closing message means, else the error's type (never its text, which may quote
    /// what the server sent).
    static func sentence(for error: any Error) -> String {
        if let error = error as? IOError {
            let reason = String(cString: strerror(error.errnoCode))
            return "The connection to the IMAP server failed: \(reason.prefix(1).lowercased() + reason.dropFirst())."
        }
        // NIOSSL's `uncleanShutdown`: the TCP connection ended inside TLS, without the server's close_notify.
        if "\(type(of: error))" == "NIOSSLError", "\(error)" == "uncleanShutdown" {
            return "The IMAP server dropped the connection (it ended without closing TLS: the server stopped or "
                + "restarted, or something between cut the connection)."
        }
        return "The connection to the IMAP server failed (\(type(of: error)))."
    }

    private func fail(_ error: IMAPError, context: ChannelHandlerContext) {
        failed = true
        queue.push(.failed(error))
        context.close(promise: nil)
    }
}
