import CofferAgent
import CofferAgentProtocol
import CofferApp
import CofferAttachments
import CofferCrypto
import CofferKeymaker
import CofferNotifyClient
import CofferStore
import CofferSync
import Testing

/// One "locked": every module's way of saying the key is not in memory is recognised in one place
/// (``AppError/isLocked(_:)``), leaves the dispatcher as ``AppError/locked(account:)``, and goes over the socket as the
/// `locked` code with one sentence.
@Suite struct LockedTests {
    static let spellings: [any Error & Sendable] = [
        KeymakerError.locked, StoreError.locked, StoreError.keymaker(.locked), AttachmentError.locked,
        AttachmentError.keymaker(.locked), SyncError.locked, SyncError.store(.locked),
        SyncError.store(.keymaker(.locked)), CofferCryptoError.keyWiped, StoreError.crypto(.keyWiped),
        AgentFailure(.locked, "Coffer is locked."), AppError.locked(account: nil), NotifyClientError.keymaker(.locked),
    ]

    @Test(arguments: 0..<spellings.count) func everySpellingBecomesOneLockedReply(index: Int) {
        let error = Self.spellings[index]
        #expect(AppError.isLocked(error), "\(error)")
        let failure = AgentDispatcher.failure(for: error, account: "erin")
        #expect(failure == AgentFailure(.locked, "Coffer is locked for erin: the key is not in memory."))
    }

    @Test func otherErrorsKeepTheirOwnSentence() {
        let others: [any Error] = [
            KeymakerError.notSetUp, StoreError.messageNotFound(7), SyncError.noAccount,
            StoreError.keymaker(.wrongPIN(attemptsLeft: 3)), AgentFailure(.badRequest, "No."),
        ]
        for error in others {
            #expect(!AppError.isLocked(error), "\(error)")
            #expect(AgentDispatcher.failure(for: error, account: "erin").code != .locked, "\(error)")
        }
    }

    /// The one-shot CLI calls `perform` in its own process: the store's `locked` reaches it as the one app error.
    @Test func theInProcessDispatcherThrowsTheOneLocked() async throws {
        let app = TestApp()
        _ = try await app.account("erin")
        let dispatcher = AgentDispatcher(dependencies: app.global, socketPath: "/nowhere")
        for request: AgentRequest in [
            .list(account: "erin", label: nil, limit: 50, offset: 0), .serverShow(account: "erin"),
            .sync(account: "erin", server: nil, folders: [], batch: nil),
        ] {
            await #expect(throws: AppError.locked(account: "erin"), "\(request)") {
                try await dispatcher.perform(request, secret: nil, conversation: SilentConversation())
            }
        }
    }
}
