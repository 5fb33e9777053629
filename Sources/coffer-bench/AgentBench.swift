import CofferAgent
import CofferAgentProtocol
import CofferApp
import CofferStore
import CofferTesting
import Foundation
import Logging

/// `status` and `list` through a running `coffer agent` (a new connection per request, as each CLI command makes)
/// beside the same calls in-process, 1,000 of each.
enum AgentBench {
    static let requests = 1_000

    static func run() async throws {
        try await withAgent { dispatcher, socket in try await table(dispatcher: dispatcher, socket: socket) }
    }

    /// `list 50` through the agent on a new connection against the same request in process, `requests` times
    /// each: in-process p99 / agent p99 (higher is better; the aim is ≥ 1 / 1.2), for `coffer-bench --check`.
    static func listRatio(requests: Int) async throws -> Double {
        try await withAgent { dispatcher, socket in
            let list = AgentRequest.list(account: "bench", label: nil, limit: 50, offset: 0)
            let (local, remote) = try await inProcessAndAgent(list, requests, dispatcher: dispatcher, socket: socket)
            return local.p99 / remote.p99
        }
    }

    /// `request` `count` times in process, then `count` times through the agent on a new connection each.
    private static func inProcessAndAgent(
        _ request: AgentRequest,
        _ count: Int,
        dispatcher: AgentDispatcher,
        socket: String
    ) async throws -> (local: (p50: Double, p99: Double), remote: (p50: Double, p99: Double)) {
        let local = try await measure(count) {
            _ = try await dispatcher.perform(request, secret: nil, conversation: SilentConversation())
        }
        let remote = try await measure(count) {
            guard let client = try AgentClient.connect(socketPath: socket) else { throw AppError.agentClosed }
            defer { client.close() }
            _ = try await client.call(request)
        }
        return (local, remote)
    }

    /// Runs `body` with an unlocked account `bench` of 500 messages, served by a `coffer agent` of its own, and the
    /// dispatcher the one-shot commands use in process.
    private static func withAgent<T>(
        _ body: (AgentDispatcher, String) async throws -> T
    ) async throws -> T {
        let folder = TemporaryDirectory(prefix: "coffer-bench-agent")
        let root = folder.path
        let paths = AppPaths(data: "\(root)/data", keychain: "\(root)/keychain", state: "\(root)/state")
        let logger = Logger(label: "coffer.bench") { _ in SwiftLogNoOpLogHandler() }
        let global = GlobalContainer(paths: paths, logger: logger)
        let user = try global.keymakerRegistry.user("bench")
        try await user.keymaker.createMainKey()
        try await user.keymaker.setAutolock(.never)
        _ = try await user.mailStore.importMessages((0..<500).map { RawMessage(bytes: Array(message($0).utf8)) })

        // The agent runs as users run it: `coffer agent` in its own process, so that the bench's blocking client
        // and the agent do not share one process's two cooperative threads.
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_RUNTIME_DIR"] = nil
        environment["COFFER_HOME"] = nil
        let agent = try Background(
            [ImportMemoryBench.siblingBinary("coffer"), "agent", "--home", root],
            environment: environment,
            watch: .standardError
        )
        defer { agent.stop() }
        let socket = "\(paths.state)/agent/\(paths.agentSocketName)"
        var client: AgentClient?
        for _ in 0..<300 where client == nil {
            client = try? AgentClient.connect(socketPath: socket)
            if client == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        guard let first = client else { throw BenchError("coffer agent did not start: \(agent.log.text)") }
        _ = try await first.hello()
        _ = try await first.call(.unlock(account: "bench", method: ProofMethod.none))
        first.close()
        // In-process is what one-shot commands run: the same dispatcher, without the socket.
        return try await body(AgentDispatcher(dependencies: global, socketPath: socket), socket)
    }

    private static func table(dispatcher: AgentDispatcher, socket: String) async throws {
        let status = AgentRequest.status(account: "bench")
        let list = AgentRequest.list(account: "bench", label: nil, limit: 50, offset: 0)

        var table = Table(
            "Agent: \(requests) requests each, 500 messages (µs; agent = new connection per request, as the CLI; "
                + "load \(NotmuchBench.loadAverage()))",
            ["request", "in-process p50", "in-process p99", "agent p50", "agent p99", "agent / in-process (p50)"]
        )
        for (name, request) in [("status", status), ("list 50", list)] {
            let (local, remote) = try await inProcessAndAgent(request, requests, dispatcher: dispatcher, socket: socket)
            table.add([
                name, format(local.p50, 1), format(local.p99, 1), format(remote.p50, 1), format(remote.p99, 1),
                format(remote.p50 / local.p50, 1),
            ])
        }
        // One kept connection shows what the protocol itself costs, without connect and peer check.
        let kept = try await {
            guard let client = try AgentClient.connect(socketPath: socket) else { throw AppError.agentClosed }
            defer { client.close() }
            return try await measure(requests) { _ = try await client.call(status) }
        }()
        table.add(["status, one kept connection", "", "", format(kept.p50, 1), format(kept.p99, 1), ""])
        // hello touches no account: what a round trip through the socket, NIO and the agent's tasks costs alone.
        let floor = try await {
            guard let client = try AgentClient.connect(socketPath: socket) else { throw AppError.agentClosed }
            defer { client.close() }
            return try await measure(requests) { _ = try await client.hello() }
        }()
        table.add(["hello, one kept connection", "", "", format(floor.p50, 1), format(floor.p99, 1), ""])
        table.print()
    }

    private static func measure(
        _ count: Int,
        _ body: () async throws -> Void
    ) async throws -> (p50: Double, p99: Double) {
        for _ in 0..<20 { try await body() }
        var times: [Double] = []
        times.reserveCapacity(count)
        for _ in 0..<count {
            let start = Timer.now()
            try await body()
            times.append(Double(Timer.now() - start) / 1_000)
        }
        return percentiles(times)
    }

    private static func message(_ index: Int) -> String {
        """
        From: Sender \(index % 40) <sender\(index % 40)@example.org>\r
        To: me@example.com\r
        Subject: Report number \(index) for the weekly meeting\r
        Date: Mon, 1 Jan 2024 \(10 + index % 10):\(10 + index % 50):00 +0000\r
        Message-ID: <bench-\(index)@example.org>\r
        \r
        Body of message \(index): figures, notes and a few words to index.\r

        """
    }
}
