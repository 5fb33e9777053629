import CofferApp
import CofferCrypto
import CofferTesting
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite(.serialized) struct AgentMemoryTests {
    /// A message with unique canaries in its subject and body.
    static func canaryMessage(subject: String, body: String) -> String {
        """
        From: Ann <ann@example.com>\r
        To: bob@example.com\r
        Subject: Memo \(subject)\r
        Date: Tue, 2 Jan 2024 09:00:00 +0000\r
        Message-ID: <\(subject)@memory.example>\r
        Content-Type: text/plain; charset=utf-8\r
        \r
        Please read: \(body) and nothing else.\r

        """
    }

    @Test func noCleartextMailStaysInTheAgentAfterLock() async throws {
        var (cli, runtime) = AgentProcess.runner()
        // Positive control: a marker the agent holds for its whole life (in its environment, on its stack).
        let control = "CtrlMem\(UInt32.random(in: 100_000...999_999))Kw"
        cli.extraEnvironment["COFFER_TEST_MEMORY_CONTROL"] = control
        #expect(try await cli.run(["init", "--account", "alice"]).status == 0)
        let agent = try await AgentProcess(cli, runtime: runtime)
        let pid = agent.process.processIdentifier
        try #require(ProcessMemory.readable(pid: pid), "this run cannot read the agent's memory (needs CAP_SYS_PTRACE)")
        // The agent restarted itself with glibc's per-thread cache off, whose chunks skip the overwrite on free.
        let environ = try Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/environ"))
        let cacheOff = environ.split(separator: 0).contains {
            String(decoding: $0, as: UTF8.self).hasPrefix("GLIBC_TUNABLES=")
                && String(decoding: $0, as: UTF8.self).contains(FreedMemory.noThreadCache)
        }
        #expect(cacheOff, "the agent runs with glibc's per-thread cache on")
        #expect(try await cli.run(["unlock"]).status == 0)
        // Unique per run, so nothing else in the test's memory or the binary can hold them.
        let subject = "SubjMem\(UInt32.random(in: 100_000...999_999))Qz"
        let body = "BodyMem\(UInt32.random(in: 100_000...999_999))Vx"
        let eml = "\(cli.home.path)/memory.eml"
        try Self.canaryMessage(subject: subject, body: body).write(toFile: eml, atomically: true, encoding: .utf8)
        #expect(try await cli.run(["import", eml]).status == 0)
        try FileManager.default.removeItem(atPath: eml)
        for _ in 0..<3 {
            #expect(try await cli.run(["list"]).stdout.contains(subject))
            #expect(try await cli.run(["search", body]).stdout.contains(subject))
            #expect(try await cli.run(["show", "1"]).stdout.contains(body))
        }
        let needles = [Array(subject.utf8), Array(body.utf8)]
        let unlocked = ProcessMemory.count(pid: pid, needles: needles)
        #expect(ProcessMemory.count(pid: pid, needles: [Array(control.utf8)]) != [0], "the scan cannot see the agent")

        #expect(try await cli.run(["lock"]).status == 0)
        // The lock event reaches the registry's watcher asynchronously.
        var locked = ProcessMemory.count(pid: pid, needles: needles)
        _ = await eventually(seconds: 5) {
            locked = ProcessMemory.count(pid: pid, needles: needles)
            return locked == [0, 0]
        }
        print("agent memory canaries: unlocked \(unlocked), after lock \(locked)")
        #expect(locked == [0, 0], "copies of the subject and body word after lock: \(locked)")
        agent.stop()
    }
}
