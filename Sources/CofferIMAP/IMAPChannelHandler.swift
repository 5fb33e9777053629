import NIOCore

/// Runs the response parser on the event loop and queues its events for the client.
final class IMAPChannelHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private var parser: IMAPResponseParser
    private let queue: IMAPEventQueue
    private var failed = false

    init(limits: IMAPResponseParser.Limits, queue: IMAPEventQueue) {
        self.parser = IMAPResponseParser(limits: limits)
        self.queue = queue
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !failed else { return }
        let buffer = Self.unwrapInboundIn(data)
        buffer.withUnsafeReadableBytes { parser.feed($0) }
        do {
            while let event = try parser.next() { queue.push(.event(event)) }
        } catch {
            failed = true
            queue.push(.failed(error))
            context.close(promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        queue.push(.failed(.connectionClosed))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        queue.push(.failed(.transport("The connection to the IMAP server failed (\(type(of: error))).")))
        context.close(promise: nil)
    }
}
