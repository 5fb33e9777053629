import CofferCrypto
import CofferKeychain
import CofferKeymaker
import CofferTesting
import Foundation
import GRDB

@testable import CofferStore

/// One test's world: a temporary root, an unlocked Keymaker over an in-memory keychain, and a store in
/// `<root>/store`.
struct StoreWorld {
    let root = TemporaryDirectory(prefix: "coffer-store-test")
    let clock = TestClock()
    let keymaker: Keymaker
    let store: MailStore

    init() async throws {
        keymaker = try await Fixtures.unlockedKeymaker(clock: clock)
        store = try MailStore(folder: "\(root.path)/store", keys: keymaker)
    }

    var databasePath: String { "\(root.path)/store/\(MailStore.databaseName)" }

    /// A raw connection to the database file, as an attacker with disk access has.
    func rawQueue() throws -> DatabaseQueue { try DatabaseQueue(path: databasePath) }
}

/// A small hand-written message.
func rawMessage(
    id: String,
    subject: String,
    body: String,
    from: String = "Bob <bob@example.org>",
    date: String = "Mon, 1 Jan 2024 10:00:00 +0000",
    extraHeaders: String = ""
) -> RawMessage {
    let text =
        "From: \(from)\r\nTo: Alice <alice@example.org>\r\nSubject: \(subject)\r\nDate: \(date)\r\n"
        + "Message-ID: <\(id)>\r\n\(extraHeaders)Content-Type: text/plain; charset=utf-8\r\n\r\n\(body)\r\n"
    return RawMessage(bytes: Array(text.utf8))
}

extension ImportOutcome {
    /// The id of an imported message.
    var id: Int64? {
        if case .imported(let id) = self { return id }
        return nil
    }
}

/// Collects what an async stream yields until nothing more arrives for a moment (bounded).
func drain<T: Sendable>(_ stream: AsyncStream<T>, expecting count: Int) async -> [T] {
    var found: [T] = []
    let task = Task {
        var collected: [T] = []
        for await item in stream {
            collected.append(item)
            if collected.count >= count { break }
        }
        return collected
    }
    let timeout = Task {
        try? await Task.sleep(nanoseconds: 2_000_000_000)
        task.cancel()
    }
    found = await task.value
    timeout.cancel()
    return found
}
