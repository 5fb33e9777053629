import CofferTesting
import CofferTransport
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

@testable import CofferIMAP

/// A plaintext IMAP server that plays a server (or a man in the middle) around STARTTLS: it greets with
/// `capabilities`, answers CAPABILITY, answers STARTTLS with OK followed by `afterGoAhead`, and logs every command.
/// After the go-ahead it answers whatever comes (the client's TLS handshake) with a plaintext line, so that a client
/// that went on to TLS fails its handshake at once instead of at its time limit.
private final class PlaintextServerHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    let capabilities: String
    let afterGoAhead: String
    let commands: NIOLockedValueBox<[String]>
    let wentAhead = NIOLockedValueBox(false)

    init(capabilities: String, afterGoAhead: String) {
        self.capabilities = capabilities
        self.afterGoAhead = afterGoAhead
        self.commands = NIOLockedValueBox([])
    }

    func channelActive(context: ChannelHandlerContext) {
        send("* OK [CAPABILITY \(capabilities)] plaintext server\r\n", context: context)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // The client writes each command in one write; on loopback each arrives as one read.
        if wentAhead.withLockedValue({ $0 }) {
            send("* OK still plaintext\r\n", context: context)
            return
        }
        let text = String(buffer: Self.unwrapInboundIn(data))
        for line in text.split(separator: "\r\n") {
            let words = line.split(separator: " ")
            guard words.count >= 2 else { continue }
            let tag = words[0]
            let command = words[1].uppercased()
            commands.withLockedValue { $0.append(command) }
            switch command {
            case "CAPABILITY": send("* CAPABILITY \(capabilities)\r\n\(tag) OK done\r\n", context: context)
            case "STARTTLS":
                wentAhead.withLockedValue { $0 = true }
                send("\(tag) OK Begin TLS negotiation now\r\n\(afterGoAhead)", context: context)
            default: send("\(tag) BAD not here\r\n", context: context)
            }
        }
    }

    private func send(_ text: String, context: ChannelHandlerContext) {
        context.writeAndFlush(Self.wrapOutboundOut(context.channel.allocator.buffer(string: text)), promise: nil)
    }
}

@Suite(.serialized) struct StartTLSTests {
    /// Runs `body` against a plaintext server on 127.0.0.1 and returns the commands the server received.
    static func withPlaintextServer(
        capabilities: String,
        afterGoAhead: String = "",
        _ body: (IMAPConfiguration) async throws -> Void
    ) async throws -> [String] {
        let handler = PlaintextServerHandler(capabilities: capabilities, afterGoAhead: afterGoAhead)
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { child in
                child.eventLoop.makeCompletedFuture { try child.pipeline.syncOperations.addHandler(handler) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        defer { server.close(promise: nil) }
        let configuration = IMAPConfiguration(
            tls: PinnedTLSConfiguration(
                serverName: LiveDovecot.name,
                port: server.localAddress?.port ?? 0,
                connectAddress: "127.0.0.1",
                timeout: .seconds(60)
            ),
            security: .startTLS
        )
        try await body(configuration)
        return handler.commands.withLockedValue { $0 }
    }

    @Test func aServerWithoutStartTLSIsRefusedBeforeAnyCommand() async throws {
        let commands = try await Self.withPlaintextServer(capabilities: "IMAP4rev1 AUTH=PLAIN") { configuration in
            await #expect(throws: IMAPError.missingCapability("STARTTLS")) {
                _ = try await IMAPClient.connect(configuration)
            }
        }
        // No fallback: nothing was sent in plaintext, least of all a LOGIN.
        #expect(commands.isEmpty)
    }

    @Test func plaintextAfterTheGoAheadIsRefused() async throws {
        // A man in the middle appends its own capabilities (without LOGINDISABLED) to the server's go-ahead.
        let commands = try await Self.withPlaintextServer(
            capabilities: "IMAP4rev1 STARTTLS LOGINDISABLED",
            afterGoAhead: "* CAPABILITY IMAP4rev1 AUTH=PLAIN\r\n"
        ) { configuration in
            await #expect(throws: IMAPError.plaintextAfterStartTLS) { _ = try await IMAPClient.connect(configuration) }
        }
        #expect(commands == ["STARTTLS"])
    }

    @Test func aGoAheadWithoutTLSAfterItFailsTheHandshake() async throws {
        // The server says OK and then keeps talking plaintext once the client's TLS has started.
        _ = try await Self.withPlaintextServer(capabilities: "IMAP4rev1 STARTTLS") { configuration in
            await #expect {
                _ = try await IMAPClient.connect(configuration)
            } throws: { error in
                guard case .transport = error as? IMAPError else { return false }
                return true
            }
        }
    }

    @Test func dovecotOverStartTLSIsPinnedAndForgetsWhatItSaidInPlaintext() async throws {
        let server = try await LiveDovecot.start()
        defer { server.stop() }
        try await server.deliver(TestMail.plain)
        let client = try await IMAPClient.connect(try server.configuration(security: .startTLS))
        guard case .matched = await client.pinEvaluation else {
            Issue.record("expected a matched pin, got \(await client.pinEvaluation)")
            return
        }
        // Before TLS Dovecot offers STARTTLS and refuses LOGIN (ssl = required); after it, neither.
        let capabilities = await client.capabilities
        #expect(!capabilities.contains("STARTTLS"))
        #expect(!capabilities.contains("LOGINDISABLED"))
        try await client.login(user: LiveDovecot.user, password: LiveDovecot.password)
        #expect(try await client.select("INBOX").exists == 1)
        await client.logout()
    }

    @Test func dovecotOverStartTLSWithOtherPinsIsRefused() async throws {
        let server = try await LiveDovecot.start()
        defer { server.stop() }
        // Certificate B's key and the backup: a valid chain from the same CA, but not A's key.
        let configuration = try server.configuration(security: .startTLS, pinned: ["b", "backup"])
        await #expect {
            _ = try await IMAPClient.connect(configuration)
        } throws: { error in
            guard case .transport(let sentence) = error as? IMAPError else { return false }
            return sentence.contains(LiveDovecot.name)
        }
    }
}
