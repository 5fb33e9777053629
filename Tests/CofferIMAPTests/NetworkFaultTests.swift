import CofferTesting
import CofferTransport
import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import Testing

@testable import CofferIMAP

/// An in-process TLS server with certificate A that greets, then answers the first command with `reply` and
/// (when `close`) closes the connection.
private final class FaultyServerHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    let reply: String
    let close: Bool

    init(reply: String, close: Bool) {
        self.reply = reply
        self.close = close
    }

    func channelActive(context: ChannelHandlerContext) {
        let greeting = context.channel.allocator.buffer(string: "* OK [CAPABILITY IMAP4rev1] fault server\r\n")
        context.writeAndFlush(Self.wrapOutboundOut(greeting), promise: nil)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = context.channel.allocator.buffer(string: reply)
        let close = self.close
        let channel = context.channel
        context.writeAndFlush(Self.wrapOutboundOut(buffer)).whenComplete { _ in
            if close { channel.close(promise: nil) }
        }
    }
}

@Suite(.serialized) struct NetworkFaultTests {
    static func withServer(
        reply: String,
        close: Bool,
        _ body: (IMAPConfiguration) async throws -> Void
    ) async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent(
            "coffer-imap-fault-\(UUID().uuidString)"
        )
        try TestServers.makeCertificates(in: dir.path, name: LiveDovecot.name)
        let chain = try NIOSSLCertificate.fromPEMFile("\(dir.path)/a-chain.pem")
        let key = try NIOSSLPrivateKey(file: "\(dir.path)/a.key", format: .pem)
        let context = try NIOSSLContext(
            configuration: .makeServerConfiguration(
                certificateChain: chain.map { .certificate($0) },
                privateKey: .privateKey(key)
            )
        )
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { child in
                child.eventLoop.makeCompletedFuture {
                    try child.pipeline.syncOperations.addHandlers(
                        NIOSSLServerHandler(context: context),
                        FaultyServerHandler(reply: reply, close: close)
                    )
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        defer { server.close(promise: nil) }
        let configuration = IMAPConfiguration(
            tls: PinnedTLSConfiguration(
                serverName: LiveDovecot.name,
                port: server.localAddress?.port ?? 0,
                connectAddress: "127.0.0.1",
                trustRoots: .caBundle(path: "\(dir.path)/ca.pem"),
                // A guard against a hang, not the subject: the in-process server shares this process's two cores
                // with the suites beside it (a fresh-clone run once saw the 10 s it had pass before the accept).
                timeout: .seconds(60)
            ),
            limits: .init(maxLiteralSize: 1 << 20, streamBodyThreshold: 64)
        )
        try await body(configuration)
    }

    @Test func theServerClosingMidLiteralIsConnectionClosed() async throws {
        try await Self.withServer(reply: "* 1 FETCH (UID 1 BODY[] {100}\r\nFrom: a\r\n", close: true) { configuration in
            let client = try await IMAPClient.connect(configuration)
            await #expect(throws: IMAPError.connectionClosed) { _ = try await client.uidFetch("1") }
        }
    }

    @Test func garbageIsASyntaxErrorAndTheConnectionIsDropped() async throws {
        try await Self.withServer(reply: "* 1 FETCH (UID banana)\r\n", close: false) { configuration in
            let client = try await IMAPClient.connect(configuration)
            await #expect {
                _ = try await client.uidFetch("1")
            } throws: { error in
                if case .syntax = error as? IMAPError { return true }
                return false
            }
            await #expect(throws: IMAPError.connectionClosed) { _ = try await client.noop() }
        }
    }

    @Test func anOversizedLiteralIsRefusedBeforeItIsRead() async throws {
        try await Self.withServer(reply: "* 1 FETCH (UID 1 BODY[] {999999999}\r\n", close: false) { configuration in
            let client = try await IMAPClient.connect(configuration)
            await #expect(throws: IMAPError.literalTooLarge(size: 999_999_999, limit: 1 << 20)) {
                _ = try await client.uidFetch("1")
            }
        }
    }
}
