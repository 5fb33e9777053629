import CofferNotify
import Foundation
import Hummingbird
import HummingbirdTesting
import Testing

/// schemathesis against a live service over docs/notify-openapi.yaml: no 5xx, every answer matches the document,
/// protected routes refuse without a token. scripts/test.sh runs it with `COFFER_SCHEMATHESIS=.venv/bin/schemathesis`;
/// without that variable it does not run.
@Suite struct OpenAPITests {
    static let schemathesis = ProcessInfo.processInfo.environment["COFFER_SCHEMATHESIS"]
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// Runs schemathesis with `arguments` after the schema and URL; returns its exit status and output.
    func run(port: Int, _ arguments: [String]) async throws -> (Int32, String) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("schemathesis-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        return try await runProcess(
            try #require(Self.schemathesis),
            [
                "run", Self.root.appendingPathComponent("docs/notify-openapi.yaml").path, "--url",
                "http://127.0.0.1:\(port)", "--checks",
                "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,"
                    + "ignored_auth",
                "--max-examples", "25", "--seed", "1", "--workers", "1", "--suppress-health-check", "all",
                "--mode", "all", "--no-color",
            ] + arguments,
            in: folder
        )
    }

    @Test(.enabled(if: schemathesis != nil, "set COFFER_SCHEMATHESIS to the venv's schemathesis"))
    func theAPIMatchesItsDocumentAndNeverAnswers5xx() async throws {
        let harness = try Harness(registrationsPerMinute: 100_000)
        defer { harness.remove() }
        try await harness.application.test(.live) { client in
            let port = try #require(client.port)
            let token = try await client.register(Device().registration(user: "alice", password: "alice-pw")).token
            let secret = String(decoding: Harness.eventSecret, as: UTF8.self)
            // A queued push, so that long polls answer at once instead of waiting up to 30 s.
            _ = try await harness.service.handle(
                DovecotEvent(user: "alice", folder: "INBOX", uid: 1, from: "a@example.org", subject: "s")
            )
            // Bearer routes with a live token (refresh last, as it ends the token); events with the secret.
            let runs: [[String]] = [
                [
                    "-H", "Authorization: Bearer \(token)", "--exclude-operation-id", "refresh",
                    "--exclude-operation-id",
                    "dovecotEvent", "--exclude-operation-id", "dovecotEventPost", "--exclude-operation-id", "revoke",
                ],
                ["--auth", "dovecot:\(secret)", "--include-path", "/v1/events/dovecot"],
                ["-H", "Authorization: Bearer \(token)", "--include-operation-id", "revoke"],
                ["-H", "Authorization: Bearer \(token)", "--include-operation-id", "refresh"],
            ]
            for arguments in runs {
                let (status, text) = try await run(port: port, arguments)
                #expect(status == 0, "schemathesis \(arguments.suffix(1)):\n\(text)")
            }
        }
    }
}
