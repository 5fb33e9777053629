import CofferCrypto
import CofferNotify
import CofferPush
import CofferTesting
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore

/// Runs a program to its end without holding a thread of the cooperative pool (a live test server needs them, and a
/// machine with 2 cores has 2): its output goes to a file, read once it has exited. Returns its exit status and its
/// output and error output together.
func runProcess(
    _ executable: String,
    _ arguments: [String],
    in folder: URL? = nil
) async throws -> (
    status: Int32, output: String
) {
    let log = FileManager.default.temporaryDirectory.appendingPathComponent("coffer-process-\(UUID()).log")
    guard FileManager.default.createFile(atPath: log.path, contents: nil) else {
        throw TestSetupError(reason: "cannot make \(log.path)")
    }
    defer { try? FileManager.default.removeItem(at: log) }
    let output = try FileHandle(forWritingTo: log)
    defer { try? output.close() }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    if let folder { process.currentDirectoryURL = folder }
    process.standardOutput = output
    process.standardError = output
    let status: Int32 = try await withCheckedThrowingContinuation { continuation in
        process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
        do { try process.run() } catch { continuation.resume(throwing: error) }
    }
    return (status, (try? String(contentsOf: log, encoding: .utf8)) ?? "")
}

/// The master key the test storages seal push keys with.
let testMasterKey = SecretBytes(copying: Array(repeating: UInt8(0x5a), count: 32))

/// Accepts exactly one password per user, like a mail server would.
struct FakeAuthenticator: MailAuthenticator {
    let passwords: [String: String]

    func verify(user: String, password: String) async throws(NotifyError) {
        guard passwords[user] == password else { throw .wrongCredentials }
    }
}

/// A fresh service on a temporary SQLite file, with Alice and Bob as mail users.
struct Harness {
    static let eventSecret = Array("dovecot-event-secret-for-tests".utf8)
    let folder: URL
    let storage: SQLiteNotifyStorage
    let service: NotifyService

    init(
        registrationsPerMinute: Int = 100,
        authenticator: (any MailAuthenticator)? = nil,
        configure: (inout NotifyService.Settings) -> Void = { _ in }
    ) throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("coffer-notify-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        storage = try SQLiteNotifyStorage(
            path: folder.appendingPathComponent("notify.sqlite").path,
            masterKey: testMasterKey
        )
        var settings = NotifyService.Settings(eventSecret: Self.eventSecret)
        settings.registrationsPerMinute = registrationsPerMinute
        configure(&settings)
        var logger = Logger(label: "coffer-notify-tests")
        logger.logLevel = .warning
        service = NotifyService(
            storage: storage,
            authenticator: authenticator ?? FakeAuthenticator(passwords: ["alice": "alice-pw", "bob": "bob-pw"]),
            settings: settings,
            logger: logger
        )
    }

    var application: some ApplicationProtocol { Application(router: NotifyAPI.router(service: service)) }

    func remove() { try? FileManager.default.removeItem(at: folder) }

    /// Waits (up to 10 s) until `count` streams (long polls and WebSockets) wait on their session's signal, as the
    /// `notify_stream_waiters` gauge counts them; returns the last count seen.
    func waitForStreamWaiters(_ count: Double) async throws -> Double? {
        var waiting: Double?
        for _ in 0..<500 {
            let text = String(decoding: service.metrics.registry.emitToBuffer(), as: UTF8.self)
            waiting = text.split(separator: "\n").first { $0.hasPrefix("notify_stream_waiters ") }
                .flatMap { Double($0.split(separator: " ")[1]) }
            if waiting == count { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        return waiting
    }
}

/// A device: its push keys and, once registered, its token.
struct Device {
    let keys = WebPush.UserAgentKeys()

    /// Registers this device as Alice's phone straight through `service` (no HTTP), from `address`.
    func registerAlice(
        with service: NotifyService,
        from address: String = "192.0.2.1"
    ) async throws -> (session: NotifySession, token: SessionToken) {
        try await service.register(
            user: "alice",
            password: "alice-pw",
            deviceName: "phone",
            pushPublicKey: keys.subscription.publicKeyBytes,
            pushAuthSecret: keys.authSecret.withUnsafeBytes { Array($0) },
            client: ClientOrigin(address: address)
        )
    }

    func registration(user: String, password: String, name: String = "phone") -> RegisterRequest {
        RegisterRequest(
            user: user,
            password: password,
            deviceName: name,
            pushPublicKey: Base64URL.encode(keys.subscription.publicKeyBytes),
            pushAuthSecret: keys.authSecret.withUnsafeBytes { Base64URL.encode($0) }
        )
    }
}

func json(_ value: some Encodable) throws -> ByteBuffer {
    let encoder = JSONEncoder()
    encoder.dateEncodingStrategy = .iso8601
    return ByteBuffer(data: try encoder.encode(value))
}

func decode<T: Decodable>(_ type: T.Type, _ buffer: ByteBuffer) throws -> T {
    let decoder = JSONDecoder()
    decoder.dateDecodingStrategy = .iso8601
    return try decoder.decode(T.self, from: Data(buffer.readableBytesView))
}

func bearer(_ token: String) -> HTTPFields { [.authorization: "Bearer \(token)"] }

let jsonHeaders: HTTPFields = [.contentType: "application/json"]

func basic(_ user: String, _ password: [UInt8]) -> HTTPFields {
    [
        .authorization: "Basic " + Data(Array("\(user):".utf8) + password).base64EncodedString(),
        .contentType: "application/json",
    ]
}

extension TestClientProtocol {
    /// Registers and returns the token response (expects 201).
    func register(_ request: RegisterRequest) async throws -> TokenResponse {
        try await execute(uri: "/v1/sessions", method: .post, headers: jsonHeaders, body: json(request)) {
            response in
            guard response.status == .created else {
                throw TestFailure("registration answered \(response.status): \(String(buffer: response.body))")
            }
            return try decode(TokenResponse.self, response.body)
        }
    }
}

/// Accepts exactly one password per user and counts every check that reaches it.
final class CountingAuthenticator: MailAuthenticator, @unchecked Sendable {
    private let lock = NSLock()
    private var checks = 0
    let passwords: [String: String]

    init(passwords: [String: String]) { self.passwords = passwords }

    var count: Int { lock.withLock { checks } }

    func verify(user: String, password: String) async throws(NotifyError) {
        lock.withLock { checks += 1 }
        guard passwords[user] == password else { throw .wrongCredentials }
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
