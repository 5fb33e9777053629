import CofferCrypto
import CofferKeychain
import CofferKeymaker
import CofferPush
import CofferStore
import CofferSync

/// The FastSync background sync: with a MainKey unwrapped in memory by a KEK from a push, sync one folder into the
/// sealed store, close it, and wipe the key. The account's own Keymaker is never touched, so the user-facing state
/// stays locked: the key lives only in a throwaway Keymaker over an in-memory keychain, destroyed at the end.
public enum BackgroundSync {
    /// FastSync for one push: `nil` when the push carries no key or this device keeps no FastSync record for the
    /// account; otherwise the record is checked against the wall clock and the session, the MainKey unwrapped in
    /// memory, and the push's folder synced (``run(mainKey:account:device:storeFolder:folder:serverAccountID:)``).
    /// The push handler and the agent's stream both come here.
    public static func run(
        push: PushMessage,
        keychain: any Keychain,
        account: String,
        sessionID: String,
        device: DeviceIdentity,
        storeFolder: String
    ) async throws -> SyncSummary? {
        guard let key = push.fastSync, let record = try FastSync.load(keychain: keychain, account: account) else {
            return nil
        }
        let mainKey = try FastSync.unwrap(record: record, kek: key.kek, kekExpires: key.expires, sessionID: sessionID)
        return try await run(
            mainKey: mainKey,
            account: account,
            device: device,
            storeFolder: storeFolder,
            folder: push.folder ?? "INBOX"
        )
    }

    /// Syncs `folder` of the store's server account `serverAccountID` (or its only one).
    ///
    /// - Parameters:
    ///   - mainKey: the MainKey's octets; wiped before this returns, whatever happens.
    ///   - storeFolder: the account's store folder (`AppPaths.store(account)`).
    /// - Returns: the sync's summary.
    public static func run(
        mainKey: SecretBytes,
        account: String,
        device: DeviceIdentity,
        storeFolder: String,
        folder: String,
        serverAccountID: Int64? = nil
    ) async throws -> SyncSummary {
        let keymaker = Keymaker(account: account, keychain: InMemoryKeychain(), device: device)
        defer { mainKey.wipe() }
        try await keymaker.createMainKey(injected: mainKey)
        do {
            let store = try MailStore(folder: storeFolder, keymaker: keymaker)
            do {
                let accounts = try await store.serverAccounts()
                let id: Int64
                if let serverAccountID {
                    id = serverAccountID
                } else {
                    guard let only = accounts.first?.id else { throw SyncError.noAccount }
                    id = only
                }
                let summary = try await Syncer(store: store).sync(accountID: id, folders: [folder])
                try store.close()
                await wipe(keymaker)
                return summary
            } catch {
                try? store.close()
                throw error
            }
        } catch {
            await wipe(keymaker)
            throw error
        }
    }

    private static func wipe(_ keymaker: Keymaker) async {
        await keymaker.lock(reason: .user)
        try? await keymaker.destroy(reason: .logout)
    }
}
