import CofferAgentProtocol
import CofferTesting
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The agent's request time limit, against a real `coffer agent`: a request that outlives it gets a `timeout` reply,
/// the account stays locked, and the agent serves the next client. The presence question says how long it waits.
@Suite(.serialized) struct AgentTimeoutTests {
    @Test func anUnansweredPresenceQuestionTimesOutAndTheAgentServesOn() async throws {
        let (cli, runtime) = AgentProcess.runner()
        _ = try await cli.run(["init", "--account", "carol"])
        #expect(try await cli.run(["protect", "secure-element"]).status == 0)
        let agent = try await AgentProcess(cli, runtime: runtime, arguments: ["--unlock-timeout", "2"])
        let request = AgentRequest.unlock(account: "carol", method: .secureElement)
        // A client that shows the question to nobody and never answers.
        let (events, reply) = try await Self.exchange(agent.socketPath, request)
        #expect(events.count == 1)
        guard case .presence(_, let seconds)? = events.first else {
            Issue.record("the agent asked no presence question: \(events)")
            return
        }
        #expect(seconds == 2, "the question says how long the agent waits")
        #expect(reply?.failure?.code == .timeout, "\(String(describing: reply))")
        let status = try await cli.run(["status"])
        #expect(status.stdout.contains("mode: agent"), "the agent serves on: \(status.stderr)")
        #expect(status.stdout.contains("state: locked"))
        #expect(agent.stop() == 0)
    }

    /// Sends `request` on a thread of its own (blocking socket calls stay off the test's task pool) and collects the
    /// events until the reply, answering none of them.
    static func exchange(_ socket: String, _ request: AgentRequest) async throws -> ([AgentEvent], AgentReply?) {
        let payload = Array(try JSONEncoder().encode(request))
        return try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                do {
                    guard let fd = try AgentSocket.connect(socket) else { throw AppError.agentClosed }
                    defer { close(fd) }
                    var timeout = timeval(tv_sec: 60, tv_usec: 0)
                    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                    let bytes = AgentFrame(kind: .request, payload: payload).encoded
                    _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    var decoder = FrameDecoder(maximumPayload: AgentFrame.maximumReplyPayload)
                    var events: [AgentEvent] = []
                    var chunk = [UInt8](repeating: 0, count: 4096)
                    while true {
                        while let frame = try decoder.next() {
                            let data = Data(frame.payload)
                            if frame.kind == .event {
                                events.append(try JSONDecoder().decode(AgentEvent.self, from: data))
                            }
                            if frame.kind == .reply {
                                continuation.resume(
                                    returning: (events, try JSONDecoder().decode(AgentReply.self, from: data))
                                )
                                return
                            }
                        }
                        let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                        guard count > 0 else {
                            continuation.resume(returning: (events, nil))
                            return
                        }
                        decoder.feed(chunk[0..<count])
                    }
                } catch {
                    continuation.resume(throwing: error)
                }
            }
            thread.start()
        }
    }
}
