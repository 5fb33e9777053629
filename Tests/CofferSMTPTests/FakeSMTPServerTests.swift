import CofferSMTP
import CofferTesting
import CofferTransport
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import Testing

/// An SMTP server that plays what a real one will not: a man in the middle around STARTTLS, malformed replies, a
/// silent server, a connection cut after the data. It answers each command from `replies` (by verb), takes DATA
/// until the final dot, and records every command line (AUTH's arguments included, so a test can look for them).
private final class ScriptedSMTPHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    struct Script: Sendable {
        var greeting: String? = "220 fake.coffer.test ESMTP\r\n"
        var replies: [String: String] = [:]
        /// The reply after the final dot; nil closes the connection instead.
        var afterData: String? = "250 2.0.0 queued\r\n"
        /// Bytes sent 50 ms after the reply to a verb, in a write of their own.
        var later: [String: String] = [:]
    }

    let script: Script
    let log = NIOLockedValueBox<(lines: [String], data: [UInt8], inData: Bool, buffer: [UInt8])>(([], [], false, []))

    init(_ script: Script) { self.script = script }

    func channelActive(context: ChannelHandlerContext) {
        if let greeting = script.greeting { send(greeting, context: context) }
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = Array(buffer: Self.unwrapInboundIn(data))
        var actions: [String?] = []
        log.withLockedValue { log in
            log.buffer += bytes
            while true {
                if log.inData {
                    let end: [UInt8] = [0x0D, 0x0A, 0x2E, 0x0D, 0x0A]
                    let all = [0x0D, 0x0A] + log.buffer
                    guard
                        let found = (0...max(0, all.count - end.count)).first(where: {
                            all.count >= end.count && Array(all[$0..<$0 + end.count]) == end
                        })
                    else { return }
                    let consumed = found + end.count - 2
                    log.data += log.buffer[..<found]
                    log.buffer.removeFirst(consumed)
                    log.inData = false
                    actions.append(script.afterData)
                    continue
                }
                guard let newline = log.buffer.firstIndex(of: 0x0A) else { return }
                let line = String(decoding: log.buffer[..<newline], as: UTF8.self).trimmingCharacters(in: .newlines)
                log.buffer.removeFirst(newline + 1)
                log.lines.append(line)
                let verb = line.split(separator: " ").first.map { $0.uppercased() } ?? ""
                let reply = script.replies[verb] ?? (verb == "DATA" ? "354 go ahead\r\n" : "250 2.0.0 ok\r\n")
                if verb == "DATA", reply.hasPrefix("354") { log.inData = true }
                actions.append(reply)
                if let later = script.later[verb] {
                    let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                    context.eventLoop.scheduleTask(in: .milliseconds(50)) {
                        let (handler, context) = loopBound.value
                        handler.send(later, context: context)
                    }
                }
            }
        }
        for action in actions {
            if let action { send(action, context: context) } else { context.close(promise: nil) }
        }
    }

    private func send(_ text: String, context: ChannelHandlerContext) {
        context.writeAndFlush(Self.wrapOutboundOut(context.channel.allocator.buffer(string: text)), promise: nil)
    }
}

@Suite struct FakeSMTPServerTests {
    /// Certificates for the TLS fake (certificate A for mail.coffer.test under the test CA), made once.
    static let certs: String = {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("coffer-smtp-fake-\(UUID().uuidString)")
        try? TestServers.makeCertificates(in: dir.path, name: "mail.coffer.test")
        return dir.path
    }()

    /// Runs `body` against a scripted server on 127.0.0.1 (over TLS with certificate A when `tls`), then returns
    /// the command lines and the data it received.
    static func withServer(
        _ script: ScriptedSMTPHandlerScript,
        tls: Bool,
        _ body: (ServerEndpoint) async throws -> Void
    ) async throws -> (lines: [String], data: [UInt8]) {
        let handler = ScriptedSMTPHandler(script.script)
        let context: NIOSSLContext? =
            tls
            ? try NIOSSLContext(
                configuration: .makeServerConfiguration(
                    certificateChain: try NIOSSLCertificate.fromPEMFile("\(certs)/a-chain.pem").map {
                        .certificate($0)
                    },
                    privateKey: .privateKey(try NIOSSLPrivateKey(file: "\(certs)/a.key", format: .pem))
                )
            ) : nil
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { child in
                child.eventLoop.makeCompletedFuture {
                    if let context {
                        try child.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                    }
                    try child.pipeline.syncOperations.addHandler(handler)
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        defer { server.close(promise: nil) }
        let pins = try ["a", "backup"].map {
            try String(contentsOfFile: "\(certs)/\($0).pin", encoding: .utf8).trimmingCharacters(
                in: .whitespacesAndNewlines
            )
        }
        let endpoint = ServerEndpoint(
            host: "mail.coffer.test",
            port: server.localAddress?.port ?? 0,
            security: tls ? .implicitTLS : .startTLS,
            pins: pins,
            caFile: "\(certs)/ca.pem",
            connectAddress: "127.0.0.1"
        )
        try await body(endpoint)
        try await Task.sleep(for: .milliseconds(100))
        return handler.log.withLockedValue { ($0.lines, $0.data) }
    }

    static let credentials = SMTPCredentials(user: "alice", password: "canary-secret-2211")

    @Test func bytesAfterTheReplyToStartTLSAreRefusedAsAnAttack() async throws {
        // A man in the middle appends its own EHLO answer (with AUTH, in plaintext) to the server's 220.
        let script = ScriptedSMTPHandlerScript(
            replies: [
                "EHLO": "250-fake.coffer.test\r\n250 STARTTLS\r\n",
                "STARTTLS": "220 2.0.0 Ready to start TLS\r\n250-fake.coffer.test\r\n250 AUTH PLAIN\r\n",
            ]
        )
        let seen = try await Self.withServer(script, tls: false) { endpoint in
            await #expect(throws: SMTPError.plaintextAfterStartTLS) {
                _ = try await SMTPClient.connect(to: endpoint, credentials: Self.credentials, timeouts: .tests)
            }
        }
        #expect(seen.lines == ["EHLO [127.0.0.1]", "STARTTLS"])
        #expect(SMTPError.plaintextAfterStartTLS.failureClass == .security)
    }

    @Test func bytesInjectedInALaterPacketAreNeverReadAsReplies() async throws {
        // The injection arrives 50 ms after the 220, in a segment of its own: either the handler still reads
        // plaintext and refuses it, or TLS is already in front and the handshake fails on it. Never a reply.
        let script = ScriptedSMTPHandlerScript(
            replies: ["EHLO": "250-fake.coffer.test\r\n250 STARTTLS\r\n", "STARTTLS": "220 2.0.0 Ready\r\n"],
            later: ["STARTTLS": "250-fake.coffer.test\r\n250 AUTH PLAIN\r\n"]
        )
        let seen = try await Self.withServer(script, tls: false) { endpoint in
            await #expect {
                _ = try await SMTPClient.connect(to: endpoint, credentials: Self.credentials, timeouts: .tests)
            } throws: { error in
                switch error as? SMTPError {
                case .plaintextAfterStartTLS?, .transport(.handshakeFailed)?: return true
                default: return false
                }
            }
        }
        // After STARTTLS the client sent only its TLS handshake (a record starting 0x16), no command in plaintext.
        #expect(Array(seen.lines.prefix(2)) == ["EHLO [127.0.0.1]", "STARTTLS"])
        let verbs = ["EHLO", "AUTH", "MAIL", "RCPT", "DATA", "QUIT"]
        #expect(!seen.lines.dropFirst(2).contains { line in verbs.contains { line.uppercased().hasPrefix($0) } })
    }

    @Test func aServerWithoutStartTLSGetsNothingButEHLO() async throws {
        let script = ScriptedSMTPHandlerScript(replies: ["EHLO": "250-fake.coffer.test\r\n250 AUTH PLAIN LOGIN\r\n"])
        let seen = try await Self.withServer(script, tls: false) { endpoint in
            await #expect(throws: SMTPError.startTLSNotOffered) {
                _ = try await SMTPClient.connect(to: endpoint, credentials: Self.credentials, timeouts: .tests)
            }
        }
        #expect(seen.lines == ["EHLO [127.0.0.1]"])
    }

    @Test func aRefusedStartTLSIsASecurityFailure() async throws {
        let script = ScriptedSMTPHandlerScript(
            replies: ["EHLO": "250-fake\r\n250 STARTTLS\r\n", "STARTTLS": "454 4.7.0 TLS not available\r\n"]
        )
        let seen = try await Self.withServer(script, tls: false) { endpoint in
            await #expect {
                _ = try await SMTPClient.connect(to: endpoint, credentials: Self.credentials, timeouts: .tests)
            } throws: { error in
                guard let error = error as? SMTPError, case .startTLSRefused(let reply) = error else { return false }
                return reply.code == 454 && error.failureClass == .security
            }
        }
        #expect(seen.lines == ["EHLO [127.0.0.1]", "STARTTLS"])
    }

    @Test(arguments: [
        ("220 bare line feed\n", "malformed"),
        ("220-first\r\n221 second\r\n", "malformed"),
        ("22O letter O\r\n", "malformed"),
        ("220 " + String(repeating: "x", count: 5000) + "\r\n", "long"),
        (String(repeating: "220-line\r\n", count: 200) + "220 end\r\n", "lines"),
        ("554 5.3.2 no service here\r\n", "permanent"),
        ("421 4.3.2 busy, try later\r\n", "transient"),
    ])
    func aBadGreetingIsATypedError(_ greeting: String, _ kind: String) async throws {
        let seen = try await Self.withServer(ScriptedSMTPHandlerScript(greeting: greeting), tls: false) { endpoint in
            do throws(SMTPError) {
                _ = try await SMTPClient.connect(to: endpoint, credentials: Self.credentials, timeouts: .tests)
                Issue.record("the greeting was accepted")
            } catch {
                switch (kind, error) {
                case ("malformed", .malformedReply), ("long", .replyLineTooLong), ("lines", .tooManyReplyLines):
                    #expect(error.failureClass == .transient)
                case ("permanent", .greetingRefused(let reply)):
                    #expect(reply.code == 554 && error.failureClass == .permanent)
                case ("transient", .greetingRefused(let reply)):
                    #expect(reply.code == 421 && error.failureClass == .transient)
                default:
                    Issue.record("\(kind): unexpected \(error)")
                }
            }
        }
        #expect(seen.lines.isEmpty)
    }

    @Test func aSilentServerTimesOutInThePipeline() async throws {
        let seen = try await Self.withServer(ScriptedSMTPHandlerScript(greeting: nil), tls: true) { endpoint in
            await #expect(throws: SMTPError.timedOut(seconds: 1)) {
                _ = try await SMTPClient.connect(
                    to: endpoint,
                    credentials: Self.credentials,
                    timeouts: SMTPTimeouts(connect: .seconds(60), idle: .seconds(1))
                )
            }
        }
        #expect(seen.lines.isEmpty)
    }

    @Test func authLoginIsUsedWhenTheServerOffersOnlyThatAndTheSessionCompletes() async throws {
        let script = ScriptedSMTPHandlerScript(
            replies: [
                "EHLO": "250-fake.coffer.test\r\n250-SIZE 1000000\r\n250 AUTH LOGIN\r\n",
                "AUTH": "334 VXNlcm5hbWU6\r\n",
                Data("alice".utf8).base64EncodedString().uppercased(): "334 UGFzc3dvcmQ6\r\n",
                Data("canary-secret-2211".utf8).base64EncodedString().uppercased(): "235 2.7.0 accepted\r\n",
            ]
        )
        let message = Array("Subject: hi\r\n\r\n.dot\r\nbody\r\n".utf8)
        let seen = try await Self.withServer(script, tls: true) { endpoint in
            let client = try await SMTPClient.connect(to: endpoint, credentials: Self.credentials, timeouts: .tests)
            let receipt = try await client.send(
                from: "alice@coffer.test",
                to: ["bob@coffer.test"],
                declaredSize: message.count,
                body: ChunkedBody(bytes: message)
            )
            #expect(receipt.reply.code == 250)
            await client.quit()
        }
        #expect(
            seen.lines == [
                "EHLO [127.0.0.1]", "AUTH LOGIN", Data("alice".utf8).base64EncodedString(),
                Data("canary-secret-2211".utf8).base64EncodedString(),
                "MAIL FROM:<alice@coffer.test> SIZE=\(message.count)", "RCPT TO:<bob@coffer.test>", "DATA", "QUIT",
            ]
        )
        #expect(seen.data == Array("Subject: hi\r\n\r\n..dot\r\nbody\r\n".utf8))
    }

    @Test func aReplyNoCommandAskedForIsRefusedBeforeTheNextCommand() async throws {
        // The server answers AUTH twice: the second 250 would otherwise be read as the answer to MAIL FROM.
        let script = ScriptedSMTPHandlerScript(
            replies: ["EHLO": "250-fake\r\n250 AUTH PLAIN\r\n", "AUTH": "235 2.7.0 ok\r\n250 2.1.0 unasked\r\n"]
        )
        let seen = try await Self.withServer(script, tls: true) { endpoint in
            let client = try await SMTPClient.connect(to: endpoint, credentials: Self.credentials, timeouts: .tests)
            await #expect {
                _ = try await client.send(
                    from: "alice@coffer.test",
                    to: ["bob@coffer.test"],
                    body: ChunkedBody(bytes: Array("Subject: x\r\n\r\ny\r\n".utf8))
                )
            } throws: { error in
                guard case .malformedReply = error as? SMTPError else { return false }
                return true
            }
        }
        #expect(seen.lines.count == 2)
        #expect(seen.lines.first == "EHLO [127.0.0.1]")
    }

    @Test func aConnectionCutAfterTheFinalDotMayHaveDelivered() async throws {
        let script = ScriptedSMTPHandlerScript(
            replies: ["EHLO": "250-fake\r\n250 AUTH PLAIN\r\n", "AUTH": "235 2.7.0 ok\r\n"],
            afterData: nil
        )
        _ = try await Self.withServer(script, tls: true) { endpoint in
            let client = try await SMTPClient.connect(to: endpoint, credentials: Self.credentials, timeouts: .tests)
            await #expect(throws: SMTPError.replyLostAfterData) {
                _ = try await client.send(
                    from: "alice@coffer.test",
                    to: ["bob@coffer.test"],
                    body: ChunkedBody(bytes: Array("Subject: x\r\n\r\ny\r\n".utf8))
                )
            }
            #expect(await !client.isConnected)
        }
    }

    @Test func aBodyThatFailsMidwayIsNeverTerminated() async throws {
        struct Broken: Error {}
        let script = ScriptedSMTPHandlerScript(replies: [
            "EHLO": "250-fake\r\n250 AUTH PLAIN\r\n", "AUTH": "235 ok\r\n",
        ])
        let seen = try await Self.withServer(script, tls: true) { endpoint in
            let client = try await SMTPClient.connect(to: endpoint, credentials: Self.credentials, timeouts: .tests)
            let body = AsyncThrowingStream<[UInt8], any Error> { continuation in
                continuation.yield(Array("Subject: half\r\n\r\nfirst part\r\n".utf8))
                continuation.finish(throwing: Broken())
            }
            await #expect {
                _ = try await client.send(from: "alice@coffer.test", to: ["bob@coffer.test"], body: body)
            } throws: { error in
                guard case .messageUnreadable = error as? SMTPError else { return false }
                return true
            }
            #expect(await !client.isConnected)
        }
        // The server never saw the end of the data, so it delivers nothing.
        #expect(seen.lines.last == "DATA")
        #expect(seen.data.isEmpty)
    }

    @Test func credentialsNeverReachAServerBeforeItsCertificateIsVerified() async throws {
        // The TLS fake presents certificate A; pin only B's key and the backup, so the handshake fails.
        let script = ScriptedSMTPHandlerScript(replies: ["EHLO": "250-fake\r\n250 AUTH PLAIN\r\n"])
        let seen = try await Self.withServer(script, tls: true) { endpoint in
            var pinnedElsewhere = endpoint
            pinnedElsewhere.pins = try ["b", "backup"].map {
                try String(contentsOfFile: "\(Self.certs)/\($0).pin", encoding: .utf8)
                    .trimmingCharacters(in: .whitespacesAndNewlines)
            }
            await #expect {
                _ = try await SMTPClient.connect(to: pinnedElsewhere, credentials: Self.credentials, timeouts: .tests)
            } throws: { error in
                guard let error = error as? SMTPError, case .transport(.pinMismatch) = error else { return false }
                return error.failureClass == .security && !"\(error)".contains("canary-secret")
            }
        }
        #expect(seen.lines.isEmpty)
    }
}

/// The scripted server's script, with defaults for the usual answers.
struct ScriptedSMTPHandlerScript: Sendable {
    fileprivate var script: ScriptedSMTPHandler.Script

    init(
        greeting: String? = "220 fake.coffer.test ESMTP\r\n",
        replies: [String: String] = [:],
        afterData: String? = "250 2.0.0 queued\r\n",
        later: [String: String] = [:]
    ) {
        script = ScriptedSMTPHandler.Script(greeting: greeting, replies: replies, afterData: afterData, later: later)
    }
}
