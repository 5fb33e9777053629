import CofferIMAP
import CofferStore
import CofferTransport
import Foundation
import NIOCore

/// What one sync did.
public struct SyncSummary: Sendable, Equatable, Codable {
    /// Folders synced.
    public var folders = 0
    /// Messages fetched and stored (or located, when already stored).
    public var fetched = 0
    /// Messages deleted here because the server expunged them (or a folder was reset).
    public var deleted = 0
    /// Messages whose flags changed here from the server's.
    public var flagsPulled = 0
    /// Messages whose local flag changes were sent to the server.
    public var flagsPushed = 0
    /// Folders whose UIDVALIDITY changed, so they were forgotten and fetched again.
    public var resynced = 0

    /// Empty counters.
    public init() {}
}

/// Where a sync is: folder, and messages fetched of those to fetch in it.
public struct SyncProgress: Sendable, Equatable {
    /// The folder being synced.
    public var folder: String
    /// Messages fetched so far in it.
    public var done: Int
    /// Messages to fetch in it.
    public var total: Int
}

/// Syncs IMAP folders into the sealed store: incremental by UID, UIDVALIDITY resets, expunges, flags both ways.
///
/// Every batch of fetched messages is stored with its locations and the folder's highest UID in one transaction,
/// so a process killed at any point leaves whole messages only, and the next sync continues after the last batch.
public struct Syncer: Sendable {
    /// The store synced into.
    public let store: MailStore
    /// Messages per UID FETCH and per store transaction.
    public var batchSize: Int
    /// The IMAP parser's limits (tests make them small).
    public var limits: IMAPResponseParser.Limits
    /// The TCP and handshake limit.
    public var timeout: TimeAmount

    /// A syncer for `store`.
    public init(
        store: MailStore,
        batchSize: Int = 50,
        limits: IMAPResponseParser.Limits = .init(),
        timeout: TimeAmount = .seconds(20)
    ) {
        self.store = store
        self.batchSize = max(1, batchSize)
        self.limits = limits
        self.timeout = timeout
    }

    /// The pinned TLS configuration of an account: its CA bundle (or the system store) and, with pins, a pin
    /// policy for its host, enforced with no way around it.
    public func configuration(for server: ServerAccount) throws(SyncError) -> IMAPConfiguration {
        var policy: PinPolicy?
        if !server.pins.isEmpty {
            var pins: [SPKIPin] = []
            for text in server.pins {
                guard let pin = SPKIPin(base64: text) else {
                    throw .invalidAccount("a pin is not the base64 of a SHA-256 hash")
                }
                pins.append(pin)
            }
            do {
                policy = try PinPolicy(hosts: [HostPinPolicy(host: server.host, pins: pins)])
            } catch let error as TransportError {
                throw .invalidAccount(error.description)
            } catch {
                throw .invalidAccount("the pin policy is invalid")
            }
        }
        return IMAPConfiguration(
            tls: PinnedTLSConfiguration(
                serverName: server.host,
                port: server.port,
                connectAddress: server.connectAddress,
                trustRoots: server.caFile.map { .caBundle(path: $0) } ?? .system,
                pinPolicy: policy,
                timeout: timeout
            ),
            security: server.startTLS ? .startTLS : .implicitTLS,
            limits: limits
        )
    }

    /// Connects and logs in: the check `coffer account add` makes before it stores anything.
    public func connect(_ server: ServerAccount) async throws(SyncError) -> IMAPClient {
        let configuration = try configuration(for: server)
        let client: IMAPClient
        do {
            client = try await IMAPClient.connect(configuration)
        } catch {
            throw .imap(error)
        }
        do {
            try await client.login(user: server.username, password: server.password)
        } catch {
            await client.logout()
            throw .imap(error)
        }
        return client
    }

    /// Syncs `folders` (INBOX when empty) of the account `accountID`.
    ///
    /// - Throws: ``SyncError/locked`` before any connection when the Keymaker is locked; a typed error for every
    ///   network, server or store failure. What was stored before the failure stays, and the next sync resumes.
    public func sync(
        accountID: Int64,
        folders: [String] = [],
        progress: @Sendable (SyncProgress) -> Void = { _ in }
    ) async throws(SyncError) -> SyncSummary {
        let server = try await account(accountID)
        let client = try await connect(server)
        var summary = SyncSummary()
        do {
            _ = try await client.enable(["CONDSTORE"])
            for folder in folders.isEmpty ? ["INBOX"] : folders {
                try await syncFolder(folder, accountID: accountID, client: client, summary: &summary, progress)
                summary.folders += 1
            }
        } catch let error as SyncError {
            await client.logout()
            throw error
        } catch let error as IMAPError {
            await client.logout()
            throw .imap(error)
        } catch let error as StoreError {
            await client.logout()
            throw SyncError.wrap(error)
        } catch {
            await client.logout()
            throw .imap(.cancelled)
        }
        await client.logout()
        return summary
    }

    /// Waits until `folder` of the account changes on the server (IDLE, RFC 2177) or `timeout` passes, on a
    /// connection of its own. Returns at once when the folder already holds mail above the highest UID stored (mail
    /// that arrived between the last sync and this wait is not missed).
    ///
    /// - Returns: Whether the server reported a change.
    public func waitForChange(accountID: Int64, folder: String, timeout: Duration) async throws(SyncError) -> Bool {
        let server = try await account(accountID)
        let known: SyncFolder?
        do { known = try await store.syncFolder(accountID: accountID, name: folder) } catch {
            throw SyncError.wrap(error)
        }
        let client = try await connect(server)
        do {
            let selected = try await client.select(folder, readOnly: true)
            if let next = selected.uidNext, let known, selected.uidValidity == known.uidValidity,
                next > known.highestUID &+ 1
            {
                await client.logout()
                return true
            }
            let changes = try await client.idle(timeout: timeout)
            await client.logout()
            return !changes.isEmpty
        } catch {
            await client.logout()
            throw .imap(error)
        }
    }

    /// The stored record of the account `id`.
    func account(_ id: Int64) async throws(SyncError) -> ServerAccount {
        do {
            guard let found = try await store.serverAccounts().first(where: { $0.id == id }) else {
                throw SyncError.noAccount
            }
            return found.server
        } catch let error as SyncError {
            throw error
        } catch let error as StoreError {
            throw SyncError.wrap(error)
        } catch {
            throw .noAccount
        }
    }

    private func syncFolder(
        _ name: String,
        accountID: Int64,
        client: IMAPClient,
        summary: inout SyncSummary,
        _ progress: @Sendable (SyncProgress) -> Void
    ) async throws {
        let selected = try await client.select(name)
        guard let validity = selected.uidValidity else { throw SyncError.noUIDValidity }
        var state = try await store.syncFolder(accountID: accountID, name: name)
        if let known = state, known.uidValidity != validity {
            summary.deleted += try await store.forgetSyncFolder(known.id)
            summary.resynced += 1
            state = nil
        }
        let folder: SyncFolder
        if let state {
            folder = state
        } else {
            folder = try await store.addSyncFolder(accountID: accountID, name: name, uidValidity: validity)
        }

        // Expunges: every UID the server still has against the ones stored.
        let serverUIDs = selected.exists == 0 ? [] : try await client.uidSearch(["ALL"])
        let present = Set(serverUIDs)
        let known = try await store.syncLocations(folderID: folder.id)
        let gone = known.map(\.uid).filter { !present.contains($0) }
        summary.deleted += try await store.deleteLocations(folderID: folder.id, uids: gone)

        // Flags from the server, unless CONDSTORE says nothing changed since the last complete sync.
        let remaining = known.filter { present.contains($0.uid) }
        let modSeq = selected.highestModSeq ?? 0
        if !remaining.isEmpty, modSeq == 0 || modSeq != folder.highestModSeq {
            let fetched = try await client.uidFetch("1:\(folder.highestUID)", body: false)
            var flags: [UInt32: MessageFlags] = [:]
            for message in fetched { flags[message.uid] = Self.flags(message.flags) }
            summary.flagsPulled += try await store.applyServerFlags(folderID: folder.id, flags)
        }

        // New messages, oldest first, in batches stored with their locations.
        let new = serverUIDs.filter { $0 > folder.highestUID }.sorted()
        var done = 0
        progress(SyncProgress(folder: name, done: 0, total: new.count))
        for start in stride(from: 0, to: new.count, by: batchSize) {
            let batch = new[start..<min(start + batchSize, new.count)]
            let messages = try await client.uidFetch(batch.map(String.init).joined(separator: ","), body: true)
            let wanted = Set(batch)
            let mails = messages.filter { wanted.contains($0.uid) }.map { message in
                FetchedMail(uid: message.uid, bytes: message.body ?? [], flags: Self.flags(message.flags), label: name)
            }
            for outcome in try await store.storeFetched(mails, folderID: folder.id) {
                if case .malformed = outcome { continue }
                summary.fetched += 1
            }
            done += batch.count
            progress(SyncProgress(folder: name, done: done, total: new.count))
        }

        // Local flag changes (a message read here) to the server.
        if !selected.readOnly {
            for location in try await store.syncLocations(folderID: folder.id)
            where location.localFlags != location.serverFlags {
                let added = location.localFlags.subtracting(location.serverFlags)
                let removed = location.serverFlags.subtracting(location.localFlags)
                if !added.isEmpty { try await client.uidStore(String(location.uid), .add, flags: Self.names(added)) }
                if !removed.isEmpty {
                    try await client.uidStore(String(location.uid), .remove, flags: Self.names(removed))
                }
                try await store.setServerFlags(folderID: folder.id, uid: location.uid, location.localFlags)
                summary.flagsPushed += 1
            }
        }
        try await store.setHighestModSeq(folderID: folder.id, modSeq)
    }

    static let flagNames: [(String, MessageFlags)] = [
        ("\\Seen", .seen), ("\\Answered", .answered), ("\\Flagged", .flagged), ("\\Draft", .draft),
    ]

    /// The synced flags among IMAP flag names (case-insensitive).
    static func flags(_ names: [String]) -> MessageFlags {
        var flags: MessageFlags = []
        for name in names {
            for (known, flag) in flagNames where known.caseInsensitiveCompare(name) == .orderedSame {
                flags.insert(flag)
            }
        }
        return flags
    }

    /// IMAP flag names of `flags`.
    static func names(_ flags: MessageFlags) -> [String] {
        flagNames.filter { flags.contains($0.1) }.map(\.0)
    }
}
