import CofferTesting
import Foundation
import NIOCore
import Testing

@testable import CofferTransport

/// The private Dovecot of Tests/servers/dovecot.py, serving certificate A on 127.0.0.1.
/// If Dovecot cannot start (not installed: run scripts/setup.sh) these tests FAIL with the reason; they never skip.
@Suite(.serialized) struct DovecotTests {
    let pki: TestPKI

    init() throws { pki = try TestPKI.get() }

    func start() async throws -> TestServers.Dovecot {
        try await TestServers.Dovecot.start(
            dir: "\(pki.dir)/dovecot-\(UUID().uuidString.prefix(8))",
            certificate: pki.path("a-chain.pem"),
            key: pki.path("a.key"),
            users: ["alice:alice-test-password"]
        )
    }

    @Test func theHarnessDeliversOverLMTPAndImaplibFindsTheMessageOverIMAPS() throws {
        let dir = "\(pki.dir)/dovecot-selftest"
        let result = try runCommand([
            "/usr/bin/env", "python3", TestServers.repoRoot.appendingPathComponent("Tests/servers/dovecot.py").path,
            "selftest", "--dir", dir,
            "--cert", pki.path("a-chain.pem"), "--key", pki.path("a.key"), "--ca", pki.path("ca.pem"),
        ])
        #expect(result.code == 0, "dovecot.py selftest failed: \(result.output)")
        #expect(result.output.contains(#""selftest": "ok""#))
    }

    @Test func dovecotRunsAsAnUnprivilegedUserOnLoopbackOnly() async throws {
        let server = try await start()
        defer { server.stop() }
        let status = try String(contentsOfFile: "/proc/\(server.pid)/status", encoding: .utf8)
        let uid = status.split(separator: "\n").first { $0.hasPrefix("Uid:") }?.split(separator: "\t").dropFirst().first
        if getuid() == 0 { #expect(uid != "0", "Dovecot must not run as root") }
        let config = try String(contentsOfFile: "\(server.dir)/dovecot.conf", encoding: .utf8)
        #expect(config.contains("listen = 127.0.0.1\n"))
    }

    @Test func pinnedTransportReadsDovecotsGreetingWithAAndIsRefusedWithB() async throws {
        let server = try await start()
        defer { server.stop() }
        let connection = try await PinnedTLS.connect(pki.configuration(port: server.imapsPort, policy: pki.policy("a")))
        let greeting = try await readGreeting(connection)
        #expect(greeting.hasPrefix("* OK"), "unexpected greeting \(greeting)")

        let onlyB = pki.configuration(port: server.imapsPort, policy: try pki.policy("b"))
        do {
            let refused = try await PinnedTLS.connect(onlyB)
            _ = try? await readGreeting(refused)
            Issue.record("Dovecot's certificate A was accepted with only B pinned")
        } catch {
            guard case .pinMismatch(let host, _, let seen) = error else {
                Issue.record("expected pinMismatch, got \(error)")
                return
            }
            #expect(host == TestPKI.name)
            #expect(seen.first == (try pki.pin("a")).base64)
        }
    }
}

/// A test run or bench that is killed cannot stop its servers: the harness's watcher does. Run on its own by
/// `scripts/test.sh` (with the relay's, `SubmissionServerOwnerTests`): the network suites start about thirty servers at
/// once, and two more starts in that burst made other tests' connections time out.
@Suite struct DovecotServerOwnerTests {
    let pki: TestPKI

    init() throws { pki = try TestPKI.get() }

    /// A stand-in owner (a `sleep`) is killed; the server's master must end.
    @Test func theServerStopsOnceTheProcessThatStartedItHasEnded() async throws {
        let owner = try TestServers.standInOwner()
        let (dir, certificate, key) = (
            "\(pki.dir)/dovecot-\(UUID().uuidString.prefix(8))", pki.path("a-chain.pem"), pki.path("a.key")
        )
        let server = try await TestServers.Dovecot.start(
            dir: dir,
            certificate: certificate,
            key: key,
            users: ["alice:alice-test-password"],
            owner: owner
        )
        defer { server.stop() }
        #expect(!TestServers.hasEnded(server.pid), "Dovecot did not run")
        await TestServers.end(owner: owner, thenAwait: [server.pid])
        #expect(TestServers.hasEnded(server.pid), "Dovecot still runs after its owner ended")
    }
}
