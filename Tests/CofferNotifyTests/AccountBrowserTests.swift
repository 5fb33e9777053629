import CofferNotify
import Foundation
import Hummingbird
import HummingbirdTesting
import Testing

/// The /account page in headless Chromium (Tests/browser/account_page.py, Playwright). scripts/test.sh runs it with
/// `COFFER_ACCOUNT_BROWSER_PYTHON=.venv/bin/python`; without that variable (no Playwright) it does not run.
@Suite struct AccountBrowserTests {
    static let python = ProcessInfo.processInfo.environment["COFFER_ACCOUNT_BROWSER_PYTHON"]

    @Test(.enabled(if: python != nil, "set COFFER_ACCOUNT_BROWSER_PYTHON to the venv's python"))
    func signInSeeAndRevokeInChromiumWithNothingRunning() async throws {
        let harness = try Harness()
        defer { harness.remove() }
        let hostile = #"<script>alert(1)</script><img src=x onerror=alert(2)>"#
        try await harness.application.test(.live) { client in
            let port = try #require(client.port)
            let phone = try await client.register(Device().registration(user: "alice", password: "alice-pw"))
            let other = try await client.register(
                Device().registration(user: "alice", password: "alice-pw", name: hostile)
            )
            let bobs = try await client.register(Device().registration(user: "bob", password: "bob-pw"))
            let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent()
            let process = Process()
            process.executableURL = URL(fileURLWithPath: try #require(Self.python))
            process.arguments = [
                root.appendingPathComponent("Tests/browser/account_page.py").path, "--url", "http://127.0.0.1:\(port)",
                "--user", "alice", "--password", "alice-pw", "--hostile", hostile,
            ]
            let output = Pipe()
            process.standardOutput = output
            process.standardError = output
            let status: Int32 = try await withCheckedThrowingContinuation { continuation in
                process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
                do { try process.run() } catch { continuation.resume(throwing: error) }
            }
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            #expect(status == 0, "\(text)")
            #expect(text.contains("account page: passed"), "\(text)")
            #expect(try await harness.storage.session(id: phone.sessionID)?.revoked == true)
            #expect(try await harness.storage.session(id: other.sessionID)?.revoked == false)
            #expect(try await harness.storage.session(id: bobs.sessionID)?.revoked == false)
        }
    }
}
