import CofferApp
import CofferKeychain
import CofferKeymaker
import CofferTesting
import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import Testing

/// The agent's request time limit: a request that outlives it gets a `timeout` reply, the account stays locked, and
/// the agent serves the next client. The presence question tells the client how long the agent waits.
@Suite struct AgentTimeoutTests {
    @Test func anUnansweredPresenceQuestionTimesOutAndTheAgentServesOn() async throws {
        let app = TestApp()
        let device = Fixtures.device()
        let root = app.folder.path
        // The agent's secure element asks whoever the request's connection is, as in `coffer agent`.
        app.global.secureElementFactory.register {
            try SoftwareSecureElement(folder: "\(root)/state/secure-element", device: device, presence: PresenceRelay())
        }
        let user = try app.global.keymakerRegistry.user("alice")
        try await user.keymaker.createMainKey()
        try await user.keymaker.activateSecureElement()
        try await user.keymaker.lock()

        var limits = AgentLimits()
        limits.unlockMilliseconds = 1_000
        let socket = "\(root)/agent.sock"
        let server = AgentServer(dependencies: app.global, socketPath: socket, limits: limits)
        let group = ServiceGroup(services: [server], logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
        let serving = Task { try await group.run() }
        defer { serving.cancel() }
        await server.waitUntilListening()

        let client = try #require(try AgentClient.connect(socketPath: socket))
        var request = AgentRequest(.unlock, account: "alice")
        request.method = "secure-element"
        let events = Events()
        do {
            // The client shows the question but nobody answers it.
            _ = try await client.call(request) { event in
                events.append(event)
                return nil
            }
            Issue.record("an unanswered presence question unlocked the account")
        } catch {
            guard case AppError.remote(let code, _) = error else {
                Issue.record("expected a timeout reply, got \(error)")
                return
            }
            #expect(code == .timeout)
        }
        client.close()
        let asked = events.all
        #expect(asked.map(\.event) == ["presence"])
        #expect(asked.first?.seconds == 1, "the question says how long the agent waits")
        #expect(try await user.keymaker.isLocked)

        // The agent lives on: another client is served.
        let next = try #require(try AgentClient.connect(socketPath: socket))
        let hello = try await next.call(AgentRequest(.hello))
        #expect(hello.ok)
        let status = try await next.call(AgentRequest(.status, account: "alice"))
        #expect(status.accounts?.first?.unlocked == false)
        next.close()
        await group.triggerGracefulShutdown()
        try await serving.value
    }
}

/// Events a client saw, collected across its callback.
final class Events: Sendable {
    private let events = Mutex<[AgentEvent]>([])
    func append(_ event: AgentEvent) { events.withLock { $0.append(event) } }
    var all: [AgentEvent] { events.withLock { $0 } }
}
