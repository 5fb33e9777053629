import CofferTesting
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Issue 12's bench: time from handing a message to Dovecot's LMTP to the agent's "synced" log line (the message is
/// sealed in the store by then), unlocked and locked with FastSync. Off by default (it takes minutes); run with
/// `COFFER_PUSH_BENCH=200`. It prints p50 and p99 and asserts only that every delivery arrived.
@Suite(
    .serialized,
    .enabled(
        if: ProcessInfo.processInfo.environment["COFFER_PUSH_BENCH"] != nil,
        "a benchmark, not a check: it runs only when COFFER_PUSH_BENCH=N asks for N deliveries"
    )
)
struct PushBenchTests {
    static let count = Int(ProcessInfo.processInfo.environment["COFFER_PUSH_BENCH"] ?? "") ?? 20

    @Test func deliveryToSealedInTheStore() async throws {
        try await FastSyncCLITests().withStack { stack in
            let cli = stack.cli
            let agent = Process()
            agent.executableURL = URL(fileURLWithPath: CLIRunner.binary)
            agent.arguments = ["agent", "--home", cli.home.path]
            agent.environment = cli.environment
            agent.standardOutput = FileHandle.nullDevice
            let errors = Pipe()
            agent.standardError = errors
            let log = LogCollector()
            log.attach(errors)
            try agent.run()
            defer {
                kill(agent.processIdentifier, SIGTERM)
                agent.waitUntilExit()
            }
            var ready = false
            for _ in 0..<200 where !ready {
                ready = try await cli.runOffPool(["status"]).stdout.contains("mode: agent")
                if !ready { try await Task.sleep(for: .milliseconds(100)) }
            }
            #expect(try await cli.runOffPool(["unlock", "--pin-stdin"], input: "\(AgentPushTests.pin)\n").status == 0)
            let unlocked = try await measure(stack, log, line: "push: synced while unlocked")
            #expect(
                try await cli.runOffPool(
                    ["fastsync", "on", "--for", "1h", "--pin-stdin"],
                    input: "\(AgentPushTests.pin)\n"
                )
                .status == 0
            )
            #expect(try await cli.runOffPool(["lock"]).status == 0)
            let locked = try await measure(stack, log, line: "push: FastSync synced while locked")
            print(
                "push bench (\(Self.count) deliveries): unlocked \(summary(unlocked)); locked (FastSync) \(summary(locked))"
            )
        }
    }

    /// The times from the start of the LMTP hand-off (a Python process) to the log line, and of the hand-off alone.
    func measure(_ stack: FastSyncCLITests.Stack, _ log: LogCollector, line: String) async throws -> [Double] {
        var times: [Double] = []
        var handoff: [Double] = []
        defer { print("push bench: \(line): LMTP hand-off alone \(summary(handoff))") }
        for index in 0..<Self.count {
            let start = DispatchTime.now().uptimeNanoseconds
            try AgentPushTests().deliver(stack, subject: "Bench \(line.count) \(index)")
            handoff.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
            guard await log.wait(for: line, count: index + 1, seconds: 30) else {
                Issue.record("delivery \(index) did not arrive")
                return times
            }
            times.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
        }
        return times
    }

    func summary(_ times: [Double]) -> String {
        let sorted = times.sorted()
        guard !sorted.isEmpty else { return "no sample" }
        func at(_ p: Double) -> Double {
            sorted[min(sorted.count - 1, Int((p * Double(sorted.count)).rounded(.up)) - 1)]
        }
        return String(format: "p50 %.0f ms, p99 %.0f ms", at(0.5), at(0.99))
    }
}
