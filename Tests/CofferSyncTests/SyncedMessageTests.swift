import CofferIMAP
import CofferStore
import CofferTesting
import Foundation
import Testing

@testable import CofferSync

/// What a synced message is: its flags, its identity, and what happens to one Coffer cannot parse (issue 25).
@Suite(.serialized) struct SyncedMessageTests {
    func world(_ server: SyncDovecot, batch: Int = 10) async throws -> (SyncWorld, Syncer, Int64) {
        let world = try await SyncWorld()
        let syncer = Syncer(store: world.store, batchSize: batch, timeout: .seconds(60))
        let account = try await world.store.addServerAccount(try server.account())
        return (world, syncer, account)
    }

    func locations(_ world: SyncWorld, _ account: Int64, _ folder: String = "INBOX") async throws -> [SyncLocation] {
        let state = try #require(try await world.store.syncFolder(accountID: account, name: folder))
        return try await world.store.syncLocations(folderID: state.id)
    }

    /// A sender writes `Status: RO` and `X-Status: AFT` into an unread message: its flags here stay the server's
    /// (none), and the next sync pushes nothing, so the message stays unread on the server for every client.
    @Test func statusHeadersInAMessageNeverSetFlagsOfSyncedMail() async throws {
        let server = try SyncDovecot.start()
        defer { server.stop() }
        let forged = Array(
            ("From: Mallory <m@coffer.test>\r\nTo: alice@coffer.test\r\nSubject: already read statusforged\r\n"
                + "Message-ID: <forged@coffer.test>\r\nStatus: RO\r\nX-Status: AFT\r\n\r\nLooks read.\r\n").utf8
        )
        try server.deliver(forged)
        let (world, syncer, account) = try await world(server)

        #expect(try await syncer.sync(accountID: account).fetched == 1)
        let location = try #require(try await locations(world, account).first)
        #expect(location.localFlags == [])
        let summary = try #require(try await world.store.search("statusforged").first)
        #expect(!summary.flags.contains(.seen) && !summary.flags.contains(.flagged))

        let again = try await syncer.sync(accountID: account)
        #expect(again.flagsPushed == 0)
        #expect(try server.messages().first?.flags == [])
    }
}
