import CofferTesting
import Foundation
import Testing

@testable import CofferStore

/// `Status:` and `X-Status:` are flags only in an mbox file, where the mail program that wrote it keeps them; in a
/// message from anywhere else they are text a sender chose (issue 25, item 4).
struct StatusHeaderTests {
    static let text =
        "From: Mallory <m@example.org>\r\nTo: alice@example.org\r\nSubject: status words\r\n"
        + "Message-ID: <status@example.org>\r\nStatus: RO\r\nX-Status: AF\r\n\r\nBody.\r\n"

    @Test func onlyAnMboxFileTakesFlagsFromStatusHeaders() async throws {
        let world = try await StoreWorld()
        let files = TemporaryDirectory(prefix: "coffer-status")
        let mbox = "\(files.path)/saved.mbox"
        try Data(("From m@example.org Mon Jan  1 10:00:00 2024\n" + Self.text).utf8).write(
            to: URL(fileURLWithPath: mbox)
        )
        _ = try await world.store.importSource(at: mbox, label: "Saved")
        let fromMbox = try #require(try await world.store.list(label: "Saved").first)
        #expect(fromMbox.flags.isSuperset(of: [.seen, .answered, .flagged]))

        let other = try await StoreWorld()
        let eml = "\(files.path)/one.eml"
        try Data(Self.text.utf8).write(to: URL(fileURLWithPath: eml))
        _ = try await other.store.importSource(at: eml)
        let fromFile = try #require(try await other.store.list().first)
        #expect(fromFile.flags.intersection(MailStore.syncedFlags).isEmpty)
        let direct = try await other.store.importMessage(
            RawMessage(bytes: Array(Self.text.replacingOccurrences(of: "<status@", with: "<direct@").utf8))
        )
        let imported = try #require(direct.id)
        #expect(try await other.store.message(imported).summary.flags.intersection(MailStore.syncedFlags).isEmpty)
    }
}
