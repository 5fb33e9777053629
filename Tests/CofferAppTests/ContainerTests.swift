import CofferAgent
import CofferAgentProtocol
import CofferApp
import CofferKeymaker
import CofferStore
import CofferSync
import CofferTesting
import NIOConcurrencyHelpers
import Testing

@Suite struct ContainerTests {
    @Test func theUnimplementedKeychainReportsWhenTouched() {
        let recorder = TouchRecorder()
        _ = try? UnimplementedKeychain(report: recorder.report).read(.init(service: "s", account: "a"))
        #expect(recorder.recorded == ["UnimplementedKeychain.read was called: this path must not touch the keychain"])
    }

    @Test func theUnimplementedPresenceReportsWhenTouched() async {
        let recorder = TouchRecorder()
        _ = await RecordingUnimplementedPresence(report: recorder.report).confirmPresence(reason: "test")
        #expect(recorder.recorded.count == 1)
        #expect(recorder.recorded.first?.hasPrefix("UnimplementedPresence.confirmPresence was called") == true)
    }

    @Test func theUnimplementedClockReportsWhenTouched() {
        let recorder = TouchRecorder()
        _ = UnimplementedClock(report: recorder.report).now()
        #expect(recorder.recorded == ["UnimplementedClock.now was called: this path must not read the clock"])
    }

    @Test func lockingTouchesNeitherKeychainNorClockNorPresence() async throws {
        let app = TestApp()
        let keychain = GuardedKeychain(app.keychain)
        let clock = GuardedClock(app.clock)
        app.global.keychainFactory.register { keychain }
        app.global.clockFactory.register { clock }
        let device = Fixtures.device()
        let root = app.folder.path
        app.global.secureElementFactory.register {
            try SoftwareSecureElement(
                folder: "\(root)/se",
                device: device,
                presence: RecordingUnimplementedPresence()
            )
        }
        let user = try await app.account("alice")
        try await user.keymaker.unlock(.none)
        #expect(try await !user.keymaker.isLocked)
        _ = try await user.keymaker.mainKey(for: .userRequest)
        // The unlock started the autolock timer; let it reach its sleep on the test clock before the clock is closed.
        while app.clock.sleeperCount == 0 { await Task.yield() }

        // Only now may nothing be touched: the lock itself must do without keychain, clock and presence.
        keychain.forbid()
        clock.forbid()
        try await SessionHandler(dependencies: user).lock()
        #expect(try await user.keymaker.isLocked)
        await #expect(throws: KeymakerError.locked) { _ = try await user.keymaker.mainKey(for: .userRequest) }
    }

    @Test func aPINUnlockNeverAsksForPresence() async throws {
        let app = TestApp()
        let user = try await app.account("alice")
        try await user.keymaker.unlock(.none)
        try await user.keymaker.activatePIN(Fixtures.pin("246813"), authorizedBy: .none)
        try await user.keymaker.activateSecureElement(authorizedBy: .pin(Fixtures.pin("246813")))
        try await user.keymaker.lock()
        let already = try await SessionHandler(dependencies: user)
            .unlock(method: .pin, pin: Fixtures.pin("246813"), conversation: UnimplementedConversation())
        #expect(!already)
        #expect(try await !user.keymaker.isLocked)
        #expect(app.presence.askCount == 0)
    }

    @Test(arguments: [true, false])
    func aSecureElementUnlockAsksTheClientThroughTheConversation(confirmed: Bool) async throws {
        let app = TestApp()
        let device = try app.global.deviceIdentity
        let root = app.folder.path
        // The live relay: presence is asked of whoever the request's task names, here the conversation.
        app.global.secureElementFactory.register {
            try SoftwareSecureElement(folder: "\(root)/relay-se", device: device, presence: PresenceRelay())
        }
        let user = try await app.account("bob")
        try await user.keymaker.unlock(.none)
        try await user.keymaker.activateSecureElement(authorizedBy: .none)
        try await user.keymaker.lock()
        let conversation = AnsweringConversation(answer: confirmed)
        let handler = SessionHandler(dependencies: user)
        if confirmed {
            _ = try await handler.unlock(method: .secureElement, pin: nil, conversation: conversation)
        } else {
            await #expect(throws: KeymakerError.presenceNotConfirmed) {
                try await handler.unlock(method: .secureElement, pin: nil, conversation: conversation)
            }
        }
        #expect(try await user.keymaker.isLocked == !confirmed)
        #expect(conversation.asked.withLockedValue { $0 } == 1)
    }

    @Test func statusOfALockedAccountReportsNoDeadlineAndAsksNothing() async throws {
        let app = TestApp()
        _ = try await app.account("dave")
        let statuses = try await StatusHandler(dependencies: app.global).status(account: nil)
        #expect(
            statuses == [
                AccountStatus(account: "dave", protection: ["none"], protectionDescriptions: ["none"], unlocked: false)
            ]
        )
        #expect(app.presence.askCount == 0)
    }

    @Test func lockedMailRequestsAnswerLocked() async throws {
        let app = TestApp()
        _ = try await app.account("erin")
        let dispatcher = AgentDispatcher(dependencies: app.global, socketPath: "/nowhere")
        let reply = await dispatcher.handle(.list(account: "erin", label: nil, limit: 50, offset: 0))
        #expect(reply.failure?.code == .locked)
    }

    @Test func backgroundLocksOnlyUnderTheBackgroundPolicy() async throws {
        let app = TestApp()
        let kept = try await app.account("frank")
        let dropped = try await app.account("gina")
        for user in [kept, dropped] { try await user.keymaker.unlock(.none) }
        try await dropped.keymaker.setAutolock(.onBackground)
        let dispatcher = AgentDispatcher(dependencies: app.global, socketPath: "/nowhere")
        #expect(await dispatcher.handle(.background).failure == nil)
        #expect(try await !kept.keymaker.isLocked)
        #expect(try await dropped.keymaker.isLocked)
    }

    @Test func shutdownLocksEveryKeymaker() async throws {
        let app = TestApp()
        let user = try await app.account("hana")
        try await user.keymaker.unlock(.none)
        let keymaker = try user.keymaker
        try await app.global.keymakerRegistry.shutdown()
        #expect(await keymaker.isLocked)
    }

    @Test func theAutolockFiresOnTheClockInsideTheAgentsKeymaker() async throws {
        let app = TestApp()
        let user = try await app.account("ivan")
        try await user.keymaker.unlock(.none)
        try await user.keymaker.setAutolock(.after(seconds: 2))
        let status = try await StatusHandler(dependencies: app.global).status(account: "ivan")
        #expect(status.first?.secondsUntilAutolock == 2)
        while app.clock.sleeperCount == 0 { await Task.yield() }
        app.clock.advance(seconds: 3)
        for _ in 0..<10_000 where try await !user.keymaker.isLocked { await Task.yield() }
        #expect(try await user.keymaker.isLocked)
    }
}

/// A conversation that fails the test if the handler talks to the client.
private struct UnimplementedConversation: AgentConversation {
    func confirmPresence(reason: String) async -> Bool {
        Issue.record("the handler asked for presence on a path that must not")
        return false
    }
    func progress(_ progress: ImportProgress) { Issue.record("the handler reported progress unexpectedly") }
    func syncProgress(_ progress: SyncProgress) { Issue.record("the handler reported progress unexpectedly") }
    func chunk(_ bytes: ArraySlice<UInt8>) async throws { Issue.record("the handler sent a chunk unexpectedly") }
    func ownPreview(_ folder: String) { Issue.record("the handler made a preview unexpectedly") }
    func endPreview() {}
}

private final class AnsweringConversation: AgentConversation {
    let answer: Bool
    let asked = NIOLockedValueBox(0)
    init(answer: Bool) { self.answer = answer }
    func confirmPresence(reason: String) async -> Bool {
        asked.withLockedValue { $0 += 1 }
        return answer
    }
    func progress(_ progress: ImportProgress) {}
    func syncProgress(_ progress: SyncProgress) {}
    func chunk(_ bytes: ArraySlice<UInt8>) async throws {}
    func ownPreview(_ folder: String) {}
    func endPreview() {}
}
