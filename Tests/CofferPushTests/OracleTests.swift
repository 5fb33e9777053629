import Crypto
import Foundation
import Testing

@testable import CofferPush

/// Interop with Python's http_ece, cryptography and py_vapid (oracle.py), run with the repository's .venv python.
///
/// The venv and its packages come from scripts/setup.sh; when they are missing this test fails and says so.
@Suite("Interop with Python http_ece and py_vapid")
struct OracleTests {
    static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    static let python = folder.deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent(".venv/bin/python")

    struct Job: Codable {
        var ua_private: String
        var auth: String
        var swift_bodies: [String]
        var swift_ua_public: String
        var swift_auth: String
        var python_plaintexts: [String]
        var ece: ECEJob
        var now: Int
        var audience: String
        var vapid_header: String
    }

    struct ECEJob: Codable {
        var key: String
        var keyid: String
        var rs: Int
        var swift_bodies: [String]
        var plaintexts: [String]
    }

    struct Answer: Codable {
        var decrypted: [String]
        var python_bodies: [String]
        var ece_decrypted: [String]
        var ece_bodies: [String]
        var vapid_claims: [String: VAPIDValue]
        var python_vapid_header: String
    }

    enum VAPIDValue: Codable, Equatable {
        case text(String)
        case number(Int)
        init(from decoder: Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let number = try? container.decode(Int.self) {
                self = .number(number)
            } else {
                self = .text(try container.decode(String.self))
            }
        }
        func encode(to encoder: Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .text(let text): try container.encode(text)
            case .number(let number): try container.encode(number)
            }
        }
    }

    static let sizes = [0, 1, 15, 16, 17, 100, 1000, 3000, 3993]

    static func payload(_ length: Int, seed: UInt8) -> [UInt8] {
        (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ Int(seed)) }
    }

    @Test("Swift seals, Python opens; Python seals, Swift opens; VAPID both ways")
    func interop() throws {
        let pythonPath = Self.python.path
        try #require(
            FileManager.default.isExecutableFile(atPath: pythonPath),
            "no \(pythonPath): run scripts/setup.sh, which makes the .venv with http_ece, cryptography and py_vapid"
        )

        let receiver = WebPush.UserAgentKeys()  // Python decrypts to this one, so it gets the private key.
        let swiftReceiver = WebPush.UserAgentKeys()  // Python encrypts to this one; Swift opens.
        let plaintexts = Self.sizes.map { Self.payload($0, seed: 3) }
        var bodies: [[UInt8]] = []
        for (index, plaintext) in plaintexts.enumerated() {
            // Alternate standard padding and none, so Python sees both a 4096-octet body and a tight one.
            bodies.append(
                try WebPush.seal(
                    plaintext,
                    to: receiver.subscription,
                    padding: index.isMultiple(of: 2) ? .standard : .none
                )
            )
        }
        let eceKey = SymmetricKey(size: .bits128)
        let ecePlaintexts = [0, 5, 40, 200].map { Self.payload($0, seed: 9) }
        let eceBodies = try ecePlaintexts.enumerated().map { index, plaintext in
            try ContentCoding.seal(plaintext, key: eceKey, recordSize: 25, keyID: Array("a1".utf8), padding: index * 3)
        }
        let signer = try VAPID.Signer(privateKey: P256.Signing.PrivateKey(), subject: "https://coffer.example/contact")
        let now = Int(Date().timeIntervalSince1970)
        let audience = "http://127.0.0.1:8443"
        let job = Job(
            ua_private: Base64URL.encode(receiver.privateKey.rawRepresentation),
            auth: receiver.authSecret.withUnsafeBytes { Base64URL.encode($0) },
            swift_bodies: bodies.map { Base64URL.encode($0) },
            swift_ua_public: Base64URL.encode(swiftReceiver.subscription.publicKeyBytes),
            swift_auth: swiftReceiver.authSecret.withUnsafeBytes { Base64URL.encode($0) },
            python_plaintexts: Self.sizes.map { Base64URL.encode(Self.payload($0, seed: 5)) },
            ece: ECEJob(
                key: eceKey.withUnsafeBytes { Base64URL.encode($0) },
                keyid: "a1",
                rs: 25,
                swift_bodies: eceBodies.map { Base64URL.encode($0) },
                plaintexts: ecePlaintexts.map { Base64URL.encode($0) }
            ),
            now: now,
            audience: audience,
            vapid_header: try signer.authorization(
                audience: audience,
                now: Date(timeIntervalSince1970: TimeInterval(now)),
                lifetime: 3600
            )
        )

        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("coffer-push-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let input = folder.appendingPathComponent("job.json")
        let output = folder.appendingPathComponent("answer.json")
        try JSONEncoder().encode(job).write(to: input)

        let process = Process()
        process.executableURL = Self.python
        process.arguments = [Self.folder.appendingPathComponent("oracle.py").path, input.path, output.path]
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let errorText = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        try #require(
            process.terminationStatus == 0,
            "oracle.py failed (if a module is missing, run scripts/setup.sh): \(errorText)"
        )
        let answer = try JSONDecoder().decode(Answer.self, from: Data(contentsOf: output))

        // Python opened every Swift body to the same plaintext.
        #expect(answer.decrypted.map { Base64URL.decode($0) ?? [0xFF] } == plaintexts)
        // Swift opens every Python body.
        let pythonPlaintexts = job.python_plaintexts.map { Base64URL.decode($0)! }
        #expect(answer.python_bodies.count == pythonPlaintexts.count)
        for (body, plaintext) in zip(answer.python_bodies, pythonPlaintexts) {
            guard !plaintext.isEmpty else {
                // http_ece encodes an empty message as a header with no record at all; RFC 8188 needs a last record
                // (0x02), and a body without one cannot be told from a truncated body, so Swift refuses it.
                #expect(throws: CofferPushError.truncated) { try swiftReceiver.open(Base64URL.decode(body)!) }
                continue
            }
            #expect(try swiftReceiver.open(try #require(Base64URL.decode(body))) == plaintext)
            // And the other Swift keys cannot.
            #expect(throws: CofferPushError.authenticationFailed) { try receiver.open(Base64URL.decode(body)!) }
        }
        // Plain RFC 8188 with small records, both ways.
        #expect(answer.ece_decrypted.map { Base64URL.decode($0) ?? [0xFF] } == ecePlaintexts)
        #expect(answer.ece_bodies.count == ecePlaintexts.count)
        for (body, plaintext) in zip(answer.ece_bodies, ecePlaintexts) {
            let bytes = try #require(Base64URL.decode(body))
            if plaintext.isEmpty {
                // As above: http_ece's empty body has no record, which Swift refuses as truncated.
                #expect(throws: CofferPushError.truncated) { try ContentCoding.open(bytes, key: eceKey) }
            } else {
                #expect(try ContentCoding.open(bytes, key: eceKey) == plaintext)
            }
        }
        // VAPID: Python verified Swift's token; Swift verifies py_vapid's.
        #expect(answer.vapid_claims["aud"] == .text(audience))
        #expect(answer.vapid_claims["exp"] == .number(now + 3600))
        let verified = try VAPID.verify(
            authorization: answer.python_vapid_header,
            audience: audience,
            now: Date(timeIntervalSince1970: TimeInterval(now))
        )
        #expect(verified.claims.subject == "mailto:oracle@example.org")
        #expect(throws: CofferPushError.wrongAudience) {
            try VAPID.verify(
                authorization: answer.python_vapid_header,
                audience: "https://elsewhere.example",
                now: Date(timeIntervalSince1970: TimeInterval(now))
            )
        }
    }
}
