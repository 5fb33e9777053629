import CofferTesting
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import Testing
import X509

@testable import CofferTransport

/// The certificates of Tests/servers/make_certs.sh, made once per test process in a temp folder.
struct TestPKI: Sendable {
    static let name = "mail.coffer.test"
    static let shared: Result<TestPKI, TestSetupError> = Result { try TestPKI.make() }.mapError {
        $0 as? TestSetupError ?? TestSetupError(reason: "\($0)")
    }

    let dir: String

    static func make() throws -> TestPKI {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("coffer-transport-\(UUID().uuidString)")
        // Dovecot runs as an unprivileged user: it must be able to enter the folder.
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: dir.path)
        try TestServers.makeCertificates(in: dir.appendingPathComponent("certs").path, name: name)
        return TestPKI(dir: dir.path)
    }

    static func get() throws -> TestPKI { try shared.get() }

    func path(_ file: String) -> String { "\(dir)/certs/\(file)" }

    func pin(_ key: String) throws -> SPKIPin {
        let text = try String(contentsOfFile: path("\(key).pin"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        guard let pin = SPKIPin(base64: text) else { throw TestSetupError(reason: "bad pin file \(key).pin") }
        return pin
    }

    func certificate(_ name: String) throws -> Certificate {
        try Certificate(pemEncoded: String(contentsOfFile: path("\(name).pem"), encoding: .utf8))
    }

    /// A policy for the test name pinning `key` plus the backup key.
    func policy(_ key: String, expires: Date? = nil, subdomains: Bool = false) throws -> PinPolicy {
        try PinPolicy(hosts: [
            HostPinPolicy(
                host: Self.name,
                pins: [pin(key), pin("backup")],
                includeSubdomains: subdomains,
                expirationDate: expires
            )
        ])
    }

    func configuration(
        port: Int,
        policy: PinPolicy?,
        serverName: String = TestPKI.name,
        reporter: (any PinFailureReporter)? = nil,
        now: @escaping @Sendable () -> Date = { Date() }
    ) -> PinnedTLSConfiguration {
        PinnedTLSConfiguration(
            serverName: serverName,
            port: port,
            connectAddress: "127.0.0.1",
            trustRoots: .caBundle(path: path("ca.pem")),
            pinPolicy: policy,
            timeout: .seconds(60),
            reporter: reporter,
            now: now
        )
    }
}

/// An in-process TLS server on 127.0.0.1 that greets like IMAP (`* OK`), serving a given chain.
struct TestTLSServer: Sendable {
    let channel: any Channel
    var port: Int { channel.localAddress?.port ?? 0 }

    static func start(chain: String, key: String) async throws -> TestTLSServer {
        let certificates = try NIOSSLCertificate.fromPEMFile(chain)
        let privateKey = try NIOSSLPrivateKey(file: key, format: .pem)
        let configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: certificates.map { .certificate($0) },
            privateKey: .privateKey(privateKey)
        )
        let context = try NIOSSLContext(configuration: configuration)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { child in
                child.eventLoop.makeCompletedFuture {
                    try child.pipeline.syncOperations.addHandlers(NIOSSLServerHandler(context: context), Greeter())
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return TestTLSServer(channel: channel)
    }

    /// A server that accepts TCP and then never answers (for the timeout).
    static func silent() async throws -> TestTLSServer {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(host: "127.0.0.1", port: 0).get()
        return TestTLSServer(channel: channel)
    }

    /// A server that greets in clear text instead of TLS (IMAP on the wrong port, or garbage).
    static func plaintext() async throws -> TestTLSServer {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { child in
                child.eventLoop.makeCompletedFuture { try child.pipeline.syncOperations.addHandler(Greeter()) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return TestTLSServer(channel: channel)
    }

    /// A plain-TCP server that sends `answer` as soon as the first bytes of a request arrive and then closes its
    /// side for writing, reading nothing more: a server that refuses a request before it has read all of it.
    static func answeringAtFirstBytes(_ answer: String) async throws -> TestTLSServer {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { child in
                child.eventLoop.makeCompletedFuture {
                    try child.pipeline.syncOperations.addHandler(Answerer(answer: answer))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return TestTLSServer(channel: channel)
    }

    func stop() async { try? await channel.close() }
}

private final class Greeter: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    func channelActive(context: ChannelHandlerContext) {
        let greeting = context.channel.allocator.buffer(string: "* OK coffer test server ready\r\n")
        context.writeAndFlush(Self.wrapOutboundOut(greeting), promise: nil)
        context.fireChannelActive()
    }
}

/// Reads up to the first CRLF from a pinned connection, then closes it.
func readGreeting(_ connection: PinnedConnection<NIOAsyncChannel<ByteBuffer, ByteBuffer>>) async throws -> String {
    try await connection.output.executeThenClose { inbound, _ in
        var text = ""
        for try await buffer in inbound {
            text += String(buffer: buffer)
            if text.contains("\r\n") { break }
        }
        return text
    }
}

/// Collects reports, for the tests.
final class RecordingReporter: PinFailureReporter, Sendable {
    private let box = NIOLockedValueBox<[PinFailureReport]>([])
    var reports: [PinFailureReport] { box.withLockedValue { $0 } }
    func pinFailure(_ report: PinFailureReport) { box.withLockedValue { $0.append(report) } }
}

private final class Answerer: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    let answer: String
    var answered = false

    init(answer: String) { self.answer = answer }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !answered else { return }
        answered = true
        // Stop reading: the rest of the request stays unread, as with a server that refused it.
        try? context.channel.syncOptions?.setOption(.autoRead, value: false)
        context.writeAndFlush(Self.wrapOutboundOut(context.channel.allocator.buffer(string: answer)), promise: nil)
        context.close(mode: .output, promise: nil)
    }
}
