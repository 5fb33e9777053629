import CofferAgent
import CofferAgentProtocol
import CofferApp
import CofferKeymaker
import CofferTesting
import Foundation
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Testing

/// A raw client of the agent over NIO (no blocking call on the test's task pool, which also runs the agent): it
/// writes whatever bytes a test gives and collects the frames that come back.
struct RawAgentClient {
    let channel: NIOAsyncChannel<ByteBuffer, ByteBuffer>

    static func connect(_ socket: String) async throws -> RawAgentClient {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(unixDomainSocketPath: socket) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        return RawAgentClient(channel: channel)
    }

    /// Where reading stops.
    enum Stop {
        /// At the first reply.
        case reply
        /// At the first event or reply.
        case event
        /// When the agent closes the connection.
        case close

        func isMet(by frame: AgentFrame) -> Bool {
            switch self {
            case .reply: frame.kind == .reply || frame.kind == .summaries
            case .event: frame.kind == .reply || frame.kind == .summaries || frame.kind == .event
            case .close: false
            }
        }
    }

    /// What came back.
    struct Received {
        var frames: [AgentFrame] = []
        /// Whether the agent closed the connection (rather than the read stopping at a reply).
        var closed = false
        var replies: [AgentReply] {
            frames.filter { $0.kind == .reply }.compactMap {
                try? JSONDecoder().decode(AgentReply.self, from: Data($0.payload))
            }
        }
        var events: [AgentEvent] {
            frames.filter { $0.kind == .event }.compactMap {
                try? JSONDecoder().decode(AgentEvent.self, from: Data($0.payload))
            }
        }
    }

    /// Sends `bytes`, then reads frames until `stop` or the agent closes; `body` gets the connection after.
    func exchange<R: Sendable>(
        _ bytes: [UInt8],
        until stop: Stop = .reply,
        then body: (
            Received, NIOAsyncChannelOutboundWriter<ByteBuffer>,
            inout NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator
        ) async throws -> R
    ) async throws -> R {
        try await channel.executeThenClose { inbound, outbound in
            if !bytes.isEmpty { try await outbound.write(ByteBuffer(bytes: bytes)) }
            var iterator = inbound.makeAsyncIterator()
            let received = try await Self.read(&iterator, until: stop)
            return try await body(received, outbound, &iterator)
        }
    }

    static func read(
        _ iterator: inout NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator,
        until stop: Stop = .reply
    ) async throws -> Received {
        var decoder = FrameDecoder(maximumPayload: AgentFrame.maximumReplyPayload)
        var received = Received()
        while true {
            while let frame = try decoder.next() {
                received.frames.append(frame)
                if stop.isMet(by: frame) { return received }
            }
            let next: ByteBuffer?
            do {
                next = try await iterator.next()
            } catch let error as IOError where error.errnoCode == ECONNRESET {
                // The agent closed its end with bytes in flight (a shutdown under TSan's timing): closed all the same.
                next = nil
            }
            guard let chunk = next else {
                received.closed = true
                return received
            }
            decoder.feed(Array(chunk.readableBytesView))
        }
    }
}

/// The bytes of a request frame.
func requestFrame(_ request: AgentRequest) throws -> [UInt8] {
    AgentFrame(kind: .request, payload: Array(try JSONEncoder().encode(request))).encoded
}

func requestFrame(json: String) -> [UInt8] { AgentFrame(kind: .request, payload: Array(json.utf8)).encoded }

/// An agent served in-process on a temporary socket, over a ``TestApp`` whose secure element asks presence through
/// the client's connection (``PresenceRelay``).
struct RunningAgent {
    let app: TestApp
    let server: AgentServer
    let group: ServiceGroup
    let serving: Task<Void, any Error>
    var socket: String { server.socketPath }

    init(limits: AgentLimits = AgentLimits()) async throws {
        let app = TestApp()
        self.app = app
        let device = try app.global.deviceIdentity
        let root = app.folder.path
        app.global.secureElementFactory.register {
            try SoftwareSecureElement(folder: "\(root)/relay-se", device: device, presence: PresenceRelay())
        }
        server = AgentServer(dependencies: app.global, socketPath: "\(root)/run/agent.sock", limits: limits)
        group = ServiceGroup(services: [server], logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
        let group = self.group
        serving = Task { try await group.run() }
        await server.waitUntilListening()
    }

    /// A locked account whose unlock needs presence.
    func presenceAccount(_ name: String) async throws -> UserContainer {
        let user = try await app.account(name)
        try await user.keymaker.unlock(.none)
        try await user.keymaker.activateSecureElement(authorizedBy: .none)
        try await user.keymaker.lock()
        return user
    }

    /// SIGTERM's path: graceful shutdown, then `run()` returns.
    func stop() async throws {
        await group.triggerGracefulShutdown()
        try await serving.value
    }

    /// Whether a fresh client is still served (`status` answers).
    func serves() async throws -> Bool {
        let client = try await RawAgentClient.connect(socket)
        return try await client.exchange(try requestFrame(.status(account: nil))) { received, _, _ in
            received.replies.first.map { $0.failure == nil } == true
        }
    }
}

func secureElementUnlock(_ account: String) throws -> [UInt8] {
    let request = AgentRequest.unlock(account: account, method: .secureElement)
    return try requestFrame(request)
}

@Suite struct AgentServerTests {
    @Test(arguments: [true, false])
    func twoClientsAtOnceOneWaitingForPresence(confirmed: Bool) async throws {
        let agent = try await RunningAgent()
        let user = try await agent.presenceAccount("carol")
        let first = try await RawAgentClient.connect(agent.socket)
        // The first client's unlock waits on its presence question...
        let reply = try await first.exchange(try secureElementUnlock("carol"), until: .event) {
            question,
            outbound,
            iterator in
            #expect(question.events.map(\.name) == ["presence"])
            // ...while a second client is served.
            #expect(try await agent.serves())
            #expect(try await user.keymaker.isLocked)
            let answer = AgentFrame(
                kind: .answer,
                payload: Array(try JSONEncoder().encode(AgentAnswer(confirmed: confirmed)))
            )
            try await outbound.write(ByteBuffer(bytes: answer.encoded))
            return try await RawAgentClient.read(&iterator).replies.first
        }
        #expect(reply.map { $0.failure == nil } == confirmed)
        #expect(try await user.keymaker.isLocked == !confirmed)
        try await agent.stop()
    }

    @Test func aClientThatLeavesMidRequestEndsItsPresenceWait() async throws {
        // A long time limit: only the client's leaving can end the wait.
        var limits = AgentLimits()
        limits.unlockMilliseconds = 600_000
        let agent = try await RunningAgent(limits: limits)
        let user = try await agent.presenceAccount("dan")
        let client = try await RawAgentClient.connect(agent.socket)
        let asked = try await client.exchange(try secureElementUnlock("dan"), until: .event) {
            received,
            _,
            _ in received.events.map(\.name)
        }
        #expect(asked == ["presence"])
        // The client is gone with the question open: the agent serves the next one and the account stays locked,
        // and shutdown does not wait on the abandoned request.
        #expect(try await agent.serves())
        #expect(try await user.keymaker.isLocked)
        try await agent.stop()
        #expect(try await user.keymaker.isLocked)
    }

    @Test func aRequestPastItsLimitGetsTheTimeoutReplyAndItsConnectionCloses() async throws {
        var limits = AgentLimits()
        limits.unlockMilliseconds = 300
        let agent = try await RunningAgent(limits: limits)
        let user = try await agent.presenceAccount("erin")
        let client = try await RawAgentClient.connect(agent.socket)
        // Nobody answers the presence question: the limit (the unlock's, not the default 30 s) ends the request.
        let received = try await client.exchange(try secureElementUnlock("erin"), until: .close) { received, _, _ in
            received
        }
        // The question is asked unless the limit ran out first (this process's task pool can stall that long while
        // other suites wait on processes); the limit is the unlock's either way, not the default 30 s.
        #expect(received.events.allSatisfy { $0.name == "presence" })
        #expect(
            received.replies.map(\.failure) == [AgentFailure(.timeout, "The request took too long and was abandoned.")]
        )
        #expect(received.closed)
        #expect(try await user.keymaker.isLocked)
        #expect(try await agent.serves())
        try await agent.stop()
    }

    @Test func twoRequestsInOneWriteGetTwoRepliesInOrderThenTheIdleLimitCloses() async throws {
        var limits = AgentLimits()
        limits.idleMilliseconds = 300
        let agent = try await RunningAgent(limits: limits)
        let hello = try requestFrame(.hello(version: Int(AgentFrame.version)))
        let unknown = try requestFrame(.status(account: "nobody"))
        // The second request waits in line; after its reply the wait for a third starts, and runs out. A blocking
        // socket connects and sends in one stretch: this process's task pool can stall past the 300 ms limit while
        // other suites wait on processes, and a client that stalls before its first frame is closed as idle.
        let received = try Self.blockingExchange(agent.socket, hello + unknown)
        let replies = received.replies
        #expect(replies.count == 2)
        guard case .hello? = replies.first else {
            Issue.record("the first reply is not hello's: \(replies)")
            return
        }
        #expect(replies.last?.failure != nil)
        #expect(received.closed)
        try await agent.stop()
    }

    /// Connects, sends `bytes` and reads frames until the agent closes (at most 10 s), all on this thread.
    static func blockingExchange(_ socket: String, _ bytes: [UInt8]) throws -> RawAgentClient.Received {
        guard let fd = try AgentSocket.connect(socket) else { throw AppError.agentClosed }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let sent = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        #expect(sent == bytes.count)
        var decoder = FrameDecoder(maximumPayload: AgentFrame.maximumReplyPayload)
        var received = RawAgentClient.Received()
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            while let frame = try decoder.next() { received.frames.append(frame) }
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard count > 0 else {
                received.closed = count == 0
                return received
            }
            decoder.feed(chunk[0..<count])
        }
    }

    @Test func anOversizedFrameGetsATypedErrorAndTheAgentLivesOn() async throws {
        let agent = try await RunningAgent()
        let limit = AgentFrame.maximumRequestPayload
        // The header announces one byte over the limit; no payload needs to follow for the refusal.
        let length = withUnsafeBytes(of: UInt32(limit + 1).bigEndian, Array.init)
        let header: [UInt8] = [0x43, 0x46, AgentFrame.version, 1] + length
        let client = try await RawAgentClient.connect(agent.socket)
        let received = try await client.exchange(header, until: .close) { received, _, _ in received }
        #expect(received.closed, "the connection is closed after the refusal")
        let failure = try #require(received.replies.first?.failure)
        #expect(failure.code == .badFrame)
        #expect(failure.message == FrameError.tooLarge(announced: limit + 1, maximum: limit).description)
        // A frame of exactly the limit is read (and refused only as an unreadable request).
        let full = AgentFrame(kind: .request, payload: [UInt8](repeating: 0x20, count: limit)).encoded
        let second = try await RawAgentClient.connect(agent.socket)
        let answer = try await second.exchange(full) { received, _, _ in received.replies.first?.failure?.code }
        #expect(answer == .badRequest)
        #expect(try await agent.serves())
        try await agent.stop()
    }

    @Test func aClientThatSendsNothingIsClosedAtTheIdleLimit() async throws {
        var limits = AgentLimits()
        limits.idleMilliseconds = 200
        let agent = try await RunningAgent(limits: limits)
        let client = try await RawAgentClient.connect(agent.socket)
        let received = try await client.exchange([], until: .close) { received, _, _ in received }
        #expect(received.closed)
        #expect(received.frames.isEmpty)
        // The agent still serves others. The CLI's client connects and sends in one stretch, with no suspension
        // between: a client that stalls past the 200 ms limit before its first frame is closed as idle, and this
        // process's task pool can stall that long while other suites wait on processes.
        let other = try #require(try AgentClient.connect(socketPath: agent.socket))
        defer { other.close() }
        guard case .status = try await other.call(.status(account: nil)) else {
            Issue.record("status got another reply")
            return
        }
        try await agent.stop()
    }

    @Test func aHalfSentFrameIsRefusedAtItsDeadline() async throws {
        var limits = AgentLimits()
        limits.frameMilliseconds = 200
        let agent = try await RunningAgent(limits: limits)
        let client = try await RawAgentClient.connect(agent.socket)
        let frame = try requestFrame(.status(account: nil))
        let received = try await client.exchange(Array(frame.prefix(10)), until: .close) { received, _, _ in
            received
        }
        #expect(received.closed)
        #expect(received.replies.first?.failure == AgentFailure(.badFrame, FrameError.incomplete.description))
        try await agent.stop()
    }

    @Test func helloWithAnotherVersionGetsTheVersionSentence() async throws {
        let agent = try await RunningAgent()
        let client = try await RawAgentClient.connect(agent.socket)
        // Another version in the hello request...
        let reply = try await client.exchange(requestFrame(json: #"{"hello":{"version":9}}"#)) { received, _, _ in
            received.replies.first
        }
        #expect(reply?.failure?.code == .unsupportedVersion)
        #expect(reply?.failure?.message.contains("The agent speaks version 7, this client speaks 9") == true)
        // ...or in the frame header: the same sentence, and the connection is closed.
        var bytes = requestFrame(json: #"{"hello":{"version":6}}"#)
        bytes[2] = 6
        let other = try await RawAgentClient.connect(agent.socket)
        let refused = try await other.exchange(bytes, until: .close) { received, _, _ in received }
        #expect(refused.closed)
        #expect(refused.replies.first?.failure?.code == .unsupportedVersion)
        #expect(
            refused.replies.first?.failure?.message.contains("The agent speaks version 7, this client speaks 6") == true
        )
        // A version 1 client's frame (its JSON was a bag of optionals) gets the sentence too.
        var old = requestFrame(json: #"{"op":"hello","version":1}"#)
        old[2] = 1
        let older = try await RawAgentClient.connect(agent.socket)
        let oldRefused = try await older.exchange(old, until: .close) { received, _, _ in received }
        #expect(
            oldRefused.replies.first?.failure?.message.contains("The agent speaks version 7, this client speaks 1")
                == true
        )
        // The same version passes.
        let same = try await RawAgentClient.connect(agent.socket)
        let hello = try await same.exchange(requestFrame(json: #"{"hello":{"version":7}}"#)) { received, _, _ in
            received.replies.first
        }
        guard case .hello(_, _, let version)? = hello else {
            Issue.record("no hello reply: \(String(describing: hello))")
            return
        }
        #expect(version == 7)
        try await agent.stop()
    }

    /// An agent of another version, faked: it answers whatever arrives with `bytes`.
    final class FakeAgent: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        let bytes: [UInt8]
        init(_ bytes: [UInt8]) { self.bytes = bytes }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: bytes)), promise: nil)
        }
    }

    @Test(arguments: [false, true])
    func theClientTurnsAnotherVersionIntoItsTypedError(inTheFrame: Bool) async throws {
        let folder = TemporaryDirectory(prefix: "coffer-fake-agent")
        let socket = "\(folder.path)/agent.sock"
        var answer = AgentFrame(kind: .reply, payload: Array(#"{"hello":{"pid":1,"socket":"s","version":8}}"#.utf8))
            .encoded
        if inTheFrame { answer[2] = 8 }
        let reply = answer
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(FakeAgent(reply))
                }
            }
            .bind(unixDomainSocketPath: socket).get()
        // The client's calls block; the fake agent runs on NIO's event loop, not on the task pool.
        let client = try #require(try AgentClient.connect(socketPath: socket))
        await #expect(throws: AppError.versionMismatch(agent: 8, client: 7)) { try await client.hello() }
        client.close()
        try await server.close()
        #expect(
            AppError.versionMismatch(agent: 5, client: 3).description
                .hasPrefix("The agent speaks version 5, this client speaks 3")
        )
    }

    @Test func shutdownEndsIdleConnectionsAndZeroesTheKeys() async throws {
        let agent = try await RunningAgent()
        let user = try await agent.app.account("erin")
        try await user.keymaker.unlock(.none)
        // A client that connected and says nothing holds no one up.
        let idle = try await RawAgentClient.connect(agent.socket)
        try await agent.stop()
        #expect(try await user.keymaker.isLocked)
        #expect(!FileManager.default.fileExists(atPath: agent.socket))
        let leftover = try await idle.exchange([]) { received, _, _ in received }
        #expect(leftover.closed && leftover.frames.isEmpty)
    }

    /// How a test ends the agent.
    enum Ending: Sendable, CaseIterable {
        /// SIGTERM's path: graceful shutdown.
        case gracefulShutdown
        /// Its task cancelled.
        case cancellation
    }

    /// Ending the agent while clients are connecting: every connection, even one the accept loop never took, is
    /// closed by the time `run()` returns. NIO hands each accepted connection to the loop through a buffer (swift-nio
    /// #2813). Before, a cancelled loop threw that buffer away, and a connection still being set up when the
    /// listening socket closed was dropped: either stopped the process ("Deinited NIOAsyncWriter without calling
    /// finish()"), or, when the dropped connection was never activated, left it open with its client waiting forever
    /// (the ThreadSanitizer stage's hang in `shutdownEndsIdleConnectionsAndZeroesTheKeys`).
    @Test(arguments: Ending.allCases)
    func endingTheAgentWhileClientsConnectClosesEveryConnection(_ ending: Ending) async throws {
        for _ in 0..<20 {
            let agent = try await RunningAgent()
            var clients: [Int32] = []
            // A plain `connect`, which the kernel completes against the listen backlog before the agent accepts.
            for _ in 0..<16 {
                clients.append(try #require(try AgentSocket.connect(agent.socket)))
            }
            switch ending {
            case .gracefulShutdown: try await agent.stop()
            case .cancellation:
                agent.serving.cancel()
                _ = await agent.serving.result
            }
            // The agent's end of each connection reads as closed at once.
            for client in clients {
                var byte: UInt8 = 0
                let count = recv(client, &byte, 1, Int32(MSG_DONTWAIT))
                let code = errno
                let ended = count == 0 || (count < 0 && code == ECONNRESET)
                #expect(ended, "a connection is still open after the agent stopped (recv \(count), errno \(code))")
                close(client)
            }
        }
    }
}

extension AgentEvent {
    /// The event's kind, for comparing sequences.
    var name: String {
        switch self {
        case .presence: "presence"
        case .progress: "progress"
        case .syncProgress: "sync-progress"
        case .chunk: "chunk"
        }
    }
}
