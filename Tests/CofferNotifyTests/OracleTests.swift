import CofferNotify
import CofferPush
import CofferTesting
import Foundation
import Testing

/// The pushes coffer-notify queues, opened by Python's http_ece (the repository's .venv, from scripts/setup.sh).
@Suite struct NotifyOracleTests {
    static let python = TestServers.repoRoot.appendingPathComponent(".venv/bin/python").path
    static let script = """
        import base64, json, sys, http_ece
        from cryptography.hazmat.primitives.asymmetric import ec
        d = lambda t: base64.urlsafe_b64decode(t + "=" * (-len(t) % 4))
        job = json.load(open(sys.argv[1]))
        ua = ec.derive_private_key(int.from_bytes(d(job["ua_private"]), "big"), ec.SECP256R1())
        for body in job["bodies"]:
            text = http_ece.decrypt(d(body), private_key=ua, auth_secret=d(job["auth"]), version="aes128gcm")
            print(base64.urlsafe_b64encode(text).rstrip(b"=").decode())
        """

    @Test func httpECEOpensEveryQueuedPushToThePaddedJSON() async throws {
        try #require(
            FileManager.default.isExecutableFile(atPath: Self.python),
            "no \(Self.python): run scripts/setup.sh, which makes the .venv with http_ece"
        )
        let harness = try Harness()
        defer { harness.remove() }
        let device = Device()
        let subjects = ["", "Short", String(repeating: "Ünïcödé ✉️ ", count: 400)]
        let session = try await device.registerAlice(with: harness.service, from: "127.0.0.1").session
        var expected: [[UInt8]] = []
        for (index, subject) in subjects.enumerated() {
            let event = DovecotEvent(
                user: "alice",
                folder: "INBOX",
                uid: UInt32(index + 1),
                from: "Sender <s@example.org>",
                subject: subject
            )
            #expect(try await harness.service.handle(event) == 1)
            expected.append(PushMessage(event: event).encoded())
        }
        let pending = try await harness.storage.pending(sessionID: session.id, now: Date(), limit: 10)
        #expect(pending.count == subjects.count)
        #expect(pending.allSatisfy { $0.body.count == 4096 })
        let job: [String: Any] = [
            "ua_private": Base64URL.encode(device.keys.privateKey.rawRepresentation),
            "auth": device.keys.authSecret.withUnsafeBytes { Base64URL.encode($0) },
            "bodies": pending.map { Base64URL.encode($0.body) },
        ]
        let input = harness.folder.appendingPathComponent("job.json")
        try JSONSerialization.data(withJSONObject: job).write(to: input)
        let result = try runCommand([Self.python, "-c", Self.script, input.path])
        #expect(result.code == 0, "\(result.output)")
        let opened = result.output.split(separator: "\n").compactMap { Base64URL.decode($0) }
        // Queued in the same second, the order may differ: compare as sets of byte strings.
        #expect(
            opened.map { Data($0) }.sorted { $0.lexicographicallyPrecedes($1) }
                == expected.map { Data($0) }.sorted { $0.lexicographicallyPrecedes($1) }
        )
    }
}
