import Foundation
import NIOCore
import Testing

@testable import CofferTransport

/// The private Dovecot of Tests/servers/dovecot.py, serving certificate A on 127.0.0.1.
/// If Dovecot cannot start (not installed: run scripts/setup.sh) these tests FAIL with the reason; they never skip.
@Suite(.serialized) struct DovecotTests {
    let pki: TestPKI

    init() throws { pki = try TestPKI.get() }

    static var harness: String { TestPKI.repoRoot.appendingPathComponent("Tests/servers/dovecot.py").path }

    struct Server {
        var dir: String
        var imapsPort: Int
        var pid: Int32
    }

    func start() throws -> Server {
        let dir = "\(pki.dir)/dovecot-\(UUID().uuidString.prefix(8))"
        let result = try run([
            "/usr/bin/env", "python3", Self.harness, "start", "--dir", dir,
            "--cert", pki.path("a-chain.pem"), "--key", pki.path("a.key"),
            "--user-pass", "alice:alice-test-password",
        ])
        guard result.code == 0, let line = result.output.split(separator: "\n").last,
            let info = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
            let port = info["imaps_port"] as? Int, let pid = info["pid"] as? Int
        else {
            throw TestSetupError(reason: "the test Dovecot did not start (run scripts/setup.sh): \(result.output)")
        }
        return Server(dir: dir, imapsPort: port, pid: Int32(pid))
    }

    func stop(_ server: Server) {
        _ = try? run(["/usr/bin/env", "python3", Self.harness, "stop", "--dir", server.dir])
    }

    @Test func theHarnessDeliversOverLMTPAndImaplibFindsTheMessageOverIMAPS() throws {
        let dir = "\(pki.dir)/dovecot-selftest"
        let result = try run([
            "/usr/bin/env", "python3", Self.harness, "selftest", "--dir", dir,
            "--cert", pki.path("a-chain.pem"), "--key", pki.path("a.key"), "--ca", pki.path("ca.pem"),
        ])
        #expect(result.code == 0, "dovecot.py selftest failed: \(result.output)")
        #expect(result.output.contains(#""selftest": "ok""#))
    }

    @Test func dovecotRunsAsAnUnprivilegedUserOnLoopbackOnly() throws {
        let server = try start()
        defer { stop(server) }
        let status = try String(contentsOfFile: "/proc/\(server.pid)/status", encoding: .utf8)
        let uid = status.split(separator: "\n").first { $0.hasPrefix("Uid:") }?.split(separator: "\t").dropFirst().first
        if getuid() == 0 { #expect(uid != "0", "Dovecot must not run as root") }
        let config = try String(contentsOfFile: "\(server.dir)/dovecot.conf", encoding: .utf8)
        #expect(config.contains("listen = 127.0.0.1\n"))
    }

    @Test func pinnedTransportReadsDovecotsGreetingWithAAndIsRefusedWithB() async throws {
        let server = try start()
        defer { stop(server) }
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
