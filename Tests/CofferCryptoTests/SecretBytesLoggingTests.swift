import Logging
import NIOConcurrencyHelpers
import Testing

@testable import CofferCrypto

/// A log handler that keeps what it receives.
struct RecordingLogHandler: LogHandler {
    struct Entry: Sendable {
        var level: Logger.Level
        var message: String
        var metadata: [String: String]
    }

    final class Box: Sendable { let entries = NIOLockedValueBox<[Entry]>([]) }

    let box = Box()
    var recorded: [Entry] { box.entries.withLockedValue { $0 } }
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let flat = (event.metadata ?? [:]).mapValues { "\($0)" }
        box.entries.withLockedValue {
            $0.append(Entry(level: event.level, message: "\(event.message)", metadata: flat))
        }
    }
}

@Suite struct SecretBytesLoggingTests {
    @Test func aMemoryLockFailureIsAWarningThroughTheGivenLogger() {
        let handler = RecordingLogHandler()
        let logger = Logger(label: "test") { _ in handler }
        SecretBytes.reportMemoryLockFailure(errno: 12, to: logger)
        let entries = handler.recorded
        #expect(entries.count == 1)
        #expect(entries.first?.level == .warning)
        #expect(entries.first?.metadata["errno"] == "12")
        #expect(entries.first?.message.contains("could not lock key memory") == true)
    }
}
