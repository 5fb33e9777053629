import CofferAgent
import CofferApp
import Logging
import ServiceLifecycle
import Testing

/// An account without a push session (every account until `coffer notify register`) leaves the agent's push stream
/// at rest. Before, the stream's loop found no session, forgot the account's (absent) tokens, which announced a
/// change, which started the loop again: a `coffer agent` spun on one core from its start and grew by about 150 MB a
/// second (each ended loop stayed in its task group), until the machine ran out of memory.
@Suite struct PushStreamIdleTests {
    @Test func forgettingTokensThatWereNeverOpenedAnnouncesNothing() async {
        let tokens = PushTokens()
        tokens.forget("alice")
        tokens.changes.changed("bob")
        #expect(await tokens.changes.next() == ["bob"])
    }

    @Test func theStreamOfAnAccountWithoutASessionLooksOnceAndRests() async throws {
        let app = TestApp()
        let keychain = PlaceRecordingKeychain(app.keychain)
        app.global.keychainFactory.register { keychain }
        let user = try await app.account("alice")
        try await user.keymaker.unlock(.none)
        let holder = PushStreamHolder(global: app.global, showNotifications: false)
        let group = ServiceGroup(services: [holder], logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
        let running = Task { try await group.run() }
        keychain.clear()
        // What an unlock that opened a token announces: the loop starts, finds no session and ends.
        try app.global.pushTokens.changes.changed("alice")
        // The loop's first look may come late on a loaded machine: waited for (up to a minute), not assumed.
        let deadline = ContinuousClock.now + .seconds(60)
        while keychain.places.isEmpty && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        let looked = !keychain.places.isEmpty
        // Then half a second is thousands of rounds of the old loop (each reads the session record); the count, not
        // the time, is what is checked.
        try await Task.sleep(for: .milliseconds(500))
        let reads = keychain.places.count
        await group.triggerGracefulShutdown()
        try await running.value
        #expect(looked, "the loop never looked for the session")
        #expect(reads <= 4, "the push stream read the keychain \(reads) times for an account without a session")
    }
}
