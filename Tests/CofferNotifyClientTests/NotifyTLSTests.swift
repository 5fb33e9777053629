import CofferNotifyClient
import CofferTesting
import CofferTransport
import Foundation
import Testing

/// `coffer-notify serve --tls-cert --tls-key`: HTTPS that the device's pinned client trusts, refused before any HTTP
/// by a client pinned to other keys; and without TLS, no listening beyond loopback.
@Suite struct NotifyTLSTests {
    static let name = "notify.coffer.test"

    static var binary: String {
        URL(fileURLWithPath: CLIRunner.binary).deletingLastPathComponent().appendingPathComponent("coffer-notify").path
    }

    func pin(_ folder: String, _ name: String) throws -> String {
        try String(contentsOfFile: "\(folder)/\(name).pin", encoding: .utf8).trimmingCharacters(
            in: .whitespacesAndNewlines
        )
    }

    @Test func servedOverTLSThePinnedClientGetsAnswersAndOtherPinsAreRefused() async throws {
        let folder = TemporaryDirectory(prefix: "coffer-notify-tls")
        try TestServers.makeCertificates(in: folder.path, name: Self.name)
        let output = "\(folder.path)/out.txt"
        _ = FileManager.default.createFile(atPath: output, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.binary)
        process.arguments = [
            "serve", "--port", "0", "--data-dir", "\(folder.path)/data",
            "--tls-cert", "\(folder.path)/a-chain.pem", "--tls-key", "\(folder.path)/a.key",
        ]
        process.environment = ["HOME": folder.path, "PATH": "/usr/bin:/bin"]
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        var port: Int?
        for _ in 0..<600 where port == nil {
            let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
            if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("coffer-notify listening on") }) {
                port = line.split(separator: ":").last.flatMap { Int($0) }
            }
            if port == nil { try await Task.sleep(for: .milliseconds(100)) }
        }
        let listening = try #require(port, "coffer-notify did not start")
        let url = "https://\(Self.name):\(listening)"
        let bogus = "cnt1_" + String(repeating: "A", count: 43)

        // The error of a stream request with a bogus token, pinned to `key` and a backup.
        func refusal(pinnedTo key: String) async throws -> NotifyClientError? {
            let server = try NotifyServer(
                url: url,
                pins: [try pin(folder.path, key), try pin(folder.path, "backup")],
                caFile: "\(folder.path)/ca.pem",
                connectAddress: "127.0.0.1"
            )
            do {
                _ = try await NotifyClient(server: server).stream(token: bogus)
                return nil
            } catch {
                return error
            }
        }
        // Pinned to the served key: the TLS session stands, and the service answers 401.
        let trusted = try await refusal(pinnedTo: "a")
        guard case .sessionRevoked? = trusted else {
            Issue.record("expected the service's 401 over TLS, got \(String(describing: trusted))")
            return
        }
        // Pinned to other keys: refused at the handshake, before a request is sent.
        let other = try await refusal(pinnedTo: "b")
        guard case .transport(.pinMismatch)? = other else {
            Issue.record("expected a pin mismatch, got \(String(describing: other))")
            return
        }
    }

    @Test(arguments: [["--host", "0.0.0.0"], ["--tls-cert", "/nonexistent.pem"]])
    func plainHTTPBeyondLoopbackOrHalfATLSPairIsRefusedAtStart(_ arguments: [String]) throws {
        let folder = TemporaryDirectory(prefix: "coffer-notify-refused")
        let (code, output) = try runCommand(
            [Self.binary, "serve", "--port", "0", "--data-dir", "\(folder.path)/data"] + arguments
        )
        #expect(code != 0)
        #expect(output.contains("loopback") || output.contains("go together"), "\(output)")
        #expect(!FileManager.default.fileExists(atPath: "\(folder.path)/data/master.key"), "nothing was set up")
    }
}
