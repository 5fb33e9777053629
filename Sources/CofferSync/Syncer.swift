import CofferBlocking
import CofferCrypto
import CofferIMAP
import CofferStore
import CofferTransport
import Foundation
import NIOCore

/// What a sync does, step by step, for a caller that counts (tests, a bench); carries no name, text or flag.
public enum SyncEvent: Sendable, Equatable {
    /// An IMAP command was sent (its name only, such as `UID STORE`).
    case command(String)
    /// The stored locations of a folder were read.
    case locationsRead
    /// A folder was brought up to date with QRESYNC (RFC 7162): changes and expunges since the last mod-sequence.
    case resynchronized
    /// A folder was brought up to date by comparing every UID on the server with the ones stored.
    case comparedUIDs
}

/// Syncs IMAP folders into the sealed store: incremental by UID, UIDVALIDITY resets, expunges, flags both ways.
///
/// Every batch of fetched messages is stored with its locations and the folder's highest UID in one transaction,
/// so a process killed at any point leaves whole messages only, and the next sync continues after the last batch.
/// A batch holds at most ``batchSize`` messages and ``batchBytes`` bytes of them (a larger message goes alone). The
/// batches flow through three stages at once: the server sends one while the one before it is parsed and sealed and
/// the one before that is written, so the server's work, the sealing and the database's use all of the machine's
/// cores; at most three batches are in memory.
public struct Syncer: Sendable {
    /// The store synced into.
    public let store: MailStore
    /// Messages per UID FETCH and per store transaction unless told otherwise. At 50, a 10,000-message sync took
    /// 1.7–2.2× mbsync's wall time (each batch pays a fetch round trip and a transaction). With three batches in
    /// flight (fetched, prepared, written), 250 is as fast as 500 and peaks at 81 MiB resident instead of 92–97 MiB
    /// (`coffer-bench sync`, 2026-11-27).
    public static let defaultBatchSize = 250
    /// Messages per UID FETCH and per store transaction.
    public var batchSize: Int
    /// The most message bytes (RFC822.SIZE) per UID FETCH and per store transaction; a larger message goes alone.
    public var batchBytes: UInt64 = 16 << 20
    /// The IMAP parser's limits (tests make them small).
    package var limits: IMAPResponseParser.Limits
    /// The TCP and handshake limit.
    public var timeout: TimeAmount
    /// How long the server may stay silent while an answer is due before the sync fails with a typed error.
    public var responseTimeout: Duration = .seconds(120)
    /// Capabilities to ignore although the server offers them (`QRESYNC`, `CONDSTORE`): forces the UID diff (tests).
    package var ignoredCapabilities: Set<String>
    /// Told of every step (see ``SyncEvent``; tests).
    package var observer: (@Sendable (SyncEvent) -> Void)?

    /// A syncer for `store`: `batchSize` messages per UID FETCH and per store transaction, `timeout` for TCP and the
    /// TLS handshake.
    public init(store: MailStore, batchSize: Int = defaultBatchSize, timeout: TimeAmount = .seconds(20)) {
        self.init(store: store, batchSize: batchSize, limits: .init(), timeout: timeout)
    }

    /// A syncer with the test hooks: smaller parser limits, capabilities ignored, an observer of every step.
    package init(
        store: MailStore,
        batchSize: Int = defaultBatchSize,
        limits: IMAPResponseParser.Limits = .init(),
        timeout: TimeAmount = .seconds(20),
        ignoredCapabilities: Set<String> = [],
        observer: (@Sendable (SyncEvent) -> Void)? = nil
    ) {
        self.store = store
        self.batchSize = max(1, batchSize)
        self.limits = limits
        self.timeout = timeout
        self.ignoredCapabilities = ignoredCapabilities
        self.observer = observer
    }

    /// The IMAP configuration of an account: its endpoint's pinned TLS configuration (``ServerEndpoint``) and, with
    /// a report URL, the uploader its pin failures go to.
    func configuration(
        for server: ServerAccount
    ) throws(SyncError) -> (configuration: IMAPConfiguration, reports: PinReportUploader?) {
        let tls: (configuration: PinnedTLSConfiguration, reports: PinReportUploader?)
        do {
            tls = try server.endpoint.tlsConfiguration(timeout: timeout)
        } catch {
            throw .invalidAccount(error.description)
        }
        let configuration = IMAPConfiguration(
            tls: tls.configuration,
            security: server.endpoint.security == .startTLS ? .startTLS : .implicitTLS,
            limits: limits,
            ignoredCapabilities: ignoredCapabilities,
            responseTimeout: responseTimeout,
            onCommand: commandHook
        )
        return (configuration, tls.reports)
    }

    private var commandHook: (@Sendable (String) -> Void)? {
        guard let observer else { return nil }
        return { name in observer(.command(name)) }
    }

    /// Connects and logs in: the check `coffer account add` makes before it stores anything.
    public func connect(_ server: ServerAccount) async throws(SyncError) -> IMAPClient {
        let (configuration, reports) = try configuration(for: server)
        let client: IMAPClient
        do {
            client = try await IMAPClient.connect(configuration)
            // A report of expired pins goes out before the sync goes on (the process may be short-lived).
            await reports?.finish()
        } catch {
            await reports?.finish()
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

    /// Logs in to `server` and out again, the check `coffer account add` makes before it stores anything.
    ///
    /// - Returns: What the pin check found, as a phrase (`pin … matched`, `not pinned`, or that expired pins were
    ///   reported and not enforced).
    public func checkLogin(_ server: ServerAccount) async throws(SyncError) -> String {
        // Locked: refused before the server is contacted (reading the account records needs the key).
        do { _ = try await store.serverAccounts() } catch { throw SyncError.wrap(error) }
        let client = try await connect(server)
        let evaluation = await client.pinEvaluation
        await client.logout()
        switch evaluation {
        case .matched(_, let pin): return "pin \(pin.base64) matched"
        case .expired:
            return server.endpoint.pinReportURL == nil
                ? "the pins have expired and did not match: not enforced"
                : "the pins have expired and did not match: reported, not enforced"
        case .notPinned, .refused: return "not pinned"
        }
    }

    /// Syncs `folders` of the account `accountID`: when empty, every subscribed folder and INBOX.
    ///
    /// - Throws: ``SyncError/locked`` before any connection when the Keymaker is locked; a typed error for every
    ///   network, server or store failure. What was stored before the failure stays, and the next sync resumes.
    public func sync(
        accountID: Int64,
        folders: [String] = [],
        progress: @Sendable (SyncProgress) -> Void = { _ in }
    ) async throws(SyncError) -> SyncSummary {
        let server = try await account(accountID)
        var client = try await connect(server)
        var summary = SyncSummary()
        do {
            _ = try await client.enable(["QRESYNC", "CONDSTORE"])
            let targets =
                folders.isEmpty
                ? try await Self.subscribedFolders(client)
                : folders.map { (name: $0, wire: MailboxName.encode($0)) }
            var firstFailure: (any Error)?
            for (index, folder) in targets.enumerated() {
                do {
                    try await syncFolder(folder, accountID: accountID, client: client, summary: &summary, progress)
                    summary.folders += 1
                } catch IMAPError.commandFailed("SELECT", "NO", let code, let text) {
                    // Deleted on the server (its subscription may outlive it): nothing of it stays here. A folder
                    // that still exists, or one never synced, is a failure.
                    let refusal = IMAPError.commandFailed(command: "SELECT", status: "NO", code: code, text: text)
                    let known = try await store.syncFolder(accountID: accountID, name: folder.name)
                    guard let known, try await Self.isGone(folder.wire, client: client) else {
                        firstFailure = firstFailure ?? refusal
                        summary.failures.append(SyncFolderFailure(folder: folder.name, reason: "\(refusal)"))
                        continue
                    }
                    summary.deleted += try await store.forgetSyncFolder(known.id)
                    summary.forgotten += 1
                } catch let error where Self.isFolderFailure(error) {
                    // This folder is reported; the others are synced all the same, over a new connection when
                    // the failure took this one down.
                    firstFailure = firstFailure ?? error
                    summary.failures.append(SyncFolderFailure(folder: folder.name, reason: "\(error)"))
                    if index + 1 < targets.count, !(await client.isConnected) {
                        client = try await connect(server)
                        _ = try await client.enable(["QRESYNC", "CONDSTORE"])
                    }
                }
            }
            // Not one folder synced: the sync failed, with the first folder's error.
            if summary.folders == 0, let firstFailure { throw firstFailure }
            // A whole-account sync follows the server's folders as they are now: a folder followed before and no
            // longer listed (deleted, renamed, unsubscribed) is forgotten, after the others were synced, so that a
            // message that moved with a rename keeps its row and only loses the old folder's label.
            if folders.isEmpty {
                let current = Set(targets.map(\.name))
                for stale in try await store.syncFolders(accountID: accountID) where !current.contains(stale.name) {
                    summary.deleted += try await store.forgetSyncFolder(stale.id)
                    summary.forgotten += 1
                }
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

    /// Whether the folder `wire` is gone from the server: LIST does not name it (or names it `\NonExistent`). Asked
    /// after a SELECT was refused, since servers word that refusal differently (`NO [NONEXISTENT]`, or a bare NO).
    static func isGone(_ wire: String, client: IMAPClient) async throws -> Bool {
        let listed = try await client.list(reference: "", pattern: wire)
        return !listed.contains { listing in
            listing.name == wire
                && !listing.attributes.contains { $0.caseInsensitiveCompare("\\NonExistent") == .orderedSame }
        }
    }

    /// Whether `error` stops one folder only: a server's refusal or answer the client could not take (the next
    /// folder may be fine, over a new connection if need be). A locked or failing store, a pin failure or a
    /// cancellation stops the whole sync.
    static func isFolderFailure(_ error: any Error) -> Bool {
        let imap: IMAPError
        switch error {
        case let error as IMAPError: imap = error
        case SyncError.imap(let error): imap = error
        case SyncError.noUIDValidity, SyncError.folderKeptChanging: return true
        default: return false
        }
        switch imap {
        case .lineTooLong, .literalTooLarge, .responseTooLarge, .syntax, .nestingTooDeep, .commandFailed,
            .unexpectedResponse, .unencodable, .missingCapability:
            return true
        case .connectionClosed, .plaintextAfterStartTLS, .cancelled, .stalled, .transport, .appendWithdrawn:
            return false
        }
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
            let selected = try await client.select(MailboxName.encode(folder), readOnly: true)
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

    /// INBOX and every subscribed folder that can be selected, each with its name for people (modified UTF-7
    /// decoded; kept as sent when it does not decode) and as the server spells it.
    static func subscribedFolders(_ client: IMAPClient) async throws(IMAPError) -> [(name: String, wire: String)] {
        var result: [(name: String, wire: String)] = [(name: "INBOX", wire: "INBOX")]
        var seen: Set<String> = ["INBOX"]
        for listing in try await client.subscribed() {
            let attributes = Set(listing.attributes.map { $0.lowercased() })
            guard !attributes.contains("\\noselect"), !attributes.contains("\\nonexistent") else { continue }
            let wire = listing.name
            guard wire.uppercased() != "INBOX", seen.insert(wire).inserted else { continue }
            result.append((name: MailboxName.decode(wire) ?? wire, wire: wire))
        }
        return result
    }

    private func syncFolder(
        _ target: (name: String, wire: String),
        accountID: Int64,
        client: IMAPClient,
        summary: inout SyncSummary,
        _ progress: @Sendable (SyncProgress) -> Void
    ) async throws {
        let name = target.name
        var state = try await store.syncFolder(accountID: accountID, name: name)
        let resume = state.flatMap {
            $0.highestModSeq > 0 ? (uidValidity: $0.uidValidity, modSeq: $0.highestModSeq) : nil
        }
        let selected = try await client.select(target.wire, qresync: resume)
        guard let validity = selected.uidValidity else { throw SyncError.noUIDValidity }
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
        // The stored locations, read once: what is expunged, whose flags change, and what to push all come from it.
        var locations = try await store.syncLocations(folderID: folder.id)
        observer?(.locationsRead)
        let modSeq = selected.highestModSeq ?? 0

        let gone: [UInt32]
        var serverFlags: [UInt32: MessageFlags] = [:]
        let new: [UInt32]
        if selected.resynchronized, state != nil {
            // QRESYNC: the server said what vanished and what changed since the stored mod-sequence.
            observer?(.resynchronized)
            gone = locations.map(\.uid).filter { uid in selected.vanished.contains { $0.contains(uid) } }
            for message in selected.changed { serverFlags[message.uid] = Self.flags(message.flags) }
            let next = selected.uidNext ?? UInt32.max
            if selected.exists > 0, folder.highestUID < UInt32.max, next > folder.highestUID &+ 1 {
                // The new messages are the last ones by sequence number: at most UIDNEXT - 1 - highest of them.
                let atMost = UInt32(clamping: UInt64(next) - UInt64(folder.highestUID) - 1)
                let first = selected.exists > atMost ? selected.exists - atMost + 1 : 1
                new = try await listUIDs(client, above: folder.highestUID, from: first)
            } else {
                new = []
            }
        } else {
            // Every UID the server still has against the ones stored.
            observer?(.comparedUIDs)
            let serverUIDs = try await listUIDs(client, above: 0, from: 1)
            let present = Set(serverUIDs)
            gone = locations.map(\.uid).filter { !present.contains($0) }
            // Flags, unless CONDSTORE says nothing changed since the last complete sync; only the changed ones
            // when it can say which. Asked for in sets of stored UIDs, so no answer grows with the folder.
            let remaining = locations.map(\.uid).filter { present.contains($0) }
            if !remaining.isEmpty, modSeq == 0 || modSeq != folder.highestModSeq {
                let since = modSeq > 0 && folder.highestModSeq > 0 ? folder.highestModSeq : nil
                // At most 4,096 messages per command, however few ranges they make.
                for start in stride(from: 0, to: remaining.count, by: 4096) {
                    let slice = remaining[start..<min(start + 4096, remaining.count)]
                    for set in UIDSet.strings(slice, maxRanges: Self.rangesPerCommand) {
                        for message in try await client.uidFetch(set, body: false, changedSince: since) {
                            serverFlags[message.uid] = Self.flags(message.flags)
                        }
                    }
                }
            }
            new = serverUIDs.filter { $0 > folder.highestUID }
        }
        summary.deleted += try await store.deleteLocations(folderID: folder.id, uids: gone)
        let goneSet = Set(gone)
        locations.removeAll { goneSet.contains($0.uid) }
        let stored = Set(locations.map(\.uid))
        serverFlags = serverFlags.filter { uid, _ in stored.contains(uid) }
        summary.flagsPulled += try await store.applyServerFlags(folderID: folder.id, serverFlags)
        // The same merge the store made, so the locations in memory stay what the store holds.
        for index in locations.indices {
            guard let now = serverFlags[locations[index].uid] else { continue }
            let location = locations[index]
            locations[index].localFlags = MessageFlags(
                rawValue: MailStore.mergedFlags(
                    local: location.localFlags.rawValue,
                    server: location.serverFlags.rawValue,
                    serverNow: now.rawValue
                )
            )
            locations[index].serverFlags = now
        }

        // New messages, oldest first, in batches stored with their locations; the next batch is fetched while one
        // is stored. One command at a time on the connection: a fetch in flight is awaited before any other.
        var done = 0
        progress(SyncProgress(folder: name, done: 0, total: new.count))
        // Sizes are asked for a slice of the new UIDs at a time (no answer grows with the folder), just before the
        // batches that need them; a batch's fetch is sent only when no other command is in flight.
        var planner = BatchPlanner(uids: new, maxCount: batchSize, maxBytes: batchBytes)
        let fetch = { @Sendable (batch: [UInt32]) in
            Task { try await client.uidFetch(UIDSet.strings(batch).joined(separator: ","), body: true) }
        }
        var next = try await planner.next(client).map(fetch)
        // Three stages at once, a batch in each: the server sends one, the next is prepared (parsed and sealed, in
        // a child task on the blocking pool) while the one before it is written. Batches are written in order.
        var written: (batch: PreparedFetch, uids: Int)?
        func write(_ pending: (batch: PreparedFetch, uids: Int)?) async throws {
            guard let pending else { return }
            for outcome in try await store.storePrepared(pending.batch, folderID: folder.id) {
                summary.fetched += 1
                if case .damaged = outcome { summary.damaged += 1 }
            }
            done += pending.uids
            progress(SyncProgress(folder: name, done: done, total: new.count))
        }
        do {
            while let current = next {
                let messages = try await current.value
                let batch = planner.last
                next = try await planner.next(client).map(fetch)
                let wanted = Set(batch)
                let mails = messages.filter { wanted.contains($0.uid) }.map { message in
                    FetchedMail(
                        uid: message.uid,
                        bytes: message.body ?? [],
                        flags: Self.flags(message.flags),
                        label: name
                    )
                }
                // Parsing and sealing is CPU work: on the blocking pool, never the cooperative pool, where it would
                // starve other tasks (TLS handshakes timed out beside a large sync in the test process).
                async let prepared = withTaskExecutorPreference(BlockingPool.taskExecutor) {
                    try await store.prepareFetchedMail(mails)
                }
                try await write(written)
                written = (try await prepared, batch.count)
            }
            try await write(written)
        } catch {
            _ = try? await next?.value
            throw error
        }

        // Local flag changes (a message read here) to the server: one UID STORE per set of flags added or removed,
        // over every message that needs it. (Messages fetched just now carry the server's flags already.)
        if !selected.readOnly {
            let pending = locations.filter { $0.localFlags != $0.serverFlags }
            var adds: [Int64: [UInt32]] = [:]
            var removes: [Int64: [UInt32]] = [:]
            for location in pending {
                let added = location.localFlags.subtracting(location.serverFlags)
                let removed = location.serverFlags.subtracting(location.localFlags)
                if !added.isEmpty { adds[added.rawValue, default: []].append(location.uid) }
                if !removed.isEmpty { removes[removed.rawValue, default: []].append(location.uid) }
            }
            for (mode, groups) in [(StoreMode.add, adds), (.remove, removes)] {
                for (flags, uids) in groups.sorted(by: { $0.key < $1.key }) {
                    for set in UIDSet.strings(uids) {
                        try await client.uidStore(set, mode, flags: Self.names(MessageFlags(rawValue: flags)))
                    }
                }
            }
            var pushed: [UInt32: MessageFlags] = [:]
            for location in pending { pushed[location.uid] = location.localFlags }
            try await store.setServerFlags(folderID: folder.id, pushed)
            summary.flagsPushed += pending.count
        }
        try await store.setHighestModSeq(folderID: folder.id, modSeq)
    }

    /// The most ranges in one command's set of UIDs (a few KB of command line; servers refuse lines of 64 KB).
    static let rangesPerCommand = 400

    /// How many sequence numbers one `UID SEARCH` covers: as many as keep its one-line answer under the parser's
    /// line limit when every UID is a 10-digit number of its own (11 bytes each), at most 4,096.
    var searchWindow: UInt32 {
        UInt32(max(1, min(4096, (limits.maxLineLength - 256) / 11)))
    }

    /// Every UID above `floor` in the selected folder, ascending, from the message at sequence number `first` on.
    ///
    /// Asked for in windows of ``searchWindow`` sequence numbers (`UID SEARCH RETURN (ALL) s:e UID floor+1:*` with
    /// ESEARCH, else a plain `UID SEARCH`), so no answer grows with the folder. An expunge reported during a
    /// window may shift the sequence numbers under the walk: that window is asked again from as many numbers
    /// lower, and the UID condition keeps what was already found from coming twice.
    func listUIDs(_ client: IMAPClient, above floor: UInt32, from first: UInt32) async throws -> [UInt32] {
        let window = searchWindow
        var found: [UInt32] = []
        var highest = floor
        var start = max(1, first)
        var repeats = 0
        while highest < UInt32.max {
            let exists = await client.selected?.exists ?? 0
            guard start <= exists else { break }
            let end = UInt32(min(UInt64(exists), UInt64(start) + UInt64(window) - 1))
            var criteria = ["\(start):\(end)"]
            if highest > 0 { criteria += ["UID", "\(highest + 1):*"] }
            let expunged = await client.expungedCount
            let uids = try await client.uidSearchRanges(criteria).flatMap { Array($0) }.filter { $0 > highest }
                .sorted()
            found += uids
            highest = uids.last ?? highest
            let shifted = await client.expungedCount - expunged
            if shifted > 0 {
                repeats += 1
                guard repeats <= 64 else { throw SyncError.folderKeptChanging }
                start = UInt32(max(1, Int(start) - shifted))
                continue
            }
            repeats = 0
            start = end + 1
        }
        return found
    }

    /// `uids` in order, cut into batches of at most `maxCount` messages whose known sizes add up to at most
    /// `maxBytes`; a message larger than `maxBytes` is a batch of its own. An unknown size counts as 0, and a size
    /// (the server's word) counts as at most `maxBytes`, so no sum overflows.
    static func batches(
        _ uids: [UInt32],
        sizes: [UInt32: UInt64],
        maxCount: Int,
        maxBytes: UInt64
    ) -> [[UInt32]] {
        var batches: [[UInt32]] = []
        var current: [UInt32] = []
        var bytes: UInt64 = 0
        for uid in uids {
            let size = min(sizes[uid] ?? 0, maxBytes)
            if !current.isEmpty, current.count >= maxCount || bytes + size > maxBytes {
                batches.append(current)
                current = []
                bytes = 0
            }
            current.append(uid)
            bytes += size
        }
        if !current.isEmpty { batches.append(current) }
        return batches
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

/// Cuts the new UIDs of a folder into fetch batches (at most `maxCount` messages and `maxBytes` of them), asking
/// the server for the sizes of the next slice of UIDs only when a batch needs them.
struct BatchPlanner {
    let uids: [UInt32]
    let maxCount: Int
    let maxBytes: UInt64
    /// UIDs per size request.
    var slice = 1000
    private var position = 0
    private var sizes: [UInt32: UInt64] = [:]
    private var sizedUpTo = 0
    /// The batch handed out last.
    private(set) var last: [UInt32] = []

    init(uids: [UInt32], maxCount: Int, maxBytes: UInt64) {
        self.uids = uids
        self.maxCount = max(1, maxCount)
        self.maxBytes = maxBytes
    }

    /// The next batch, nil when every UID has been handed out. Sends a size request when the sizes known run out;
    /// call it only while no other command is in flight on `client`.
    mutating func next(_ client: IMAPClient) async throws -> [UInt32]? {
        guard position < uids.count else {
            last = []
            return nil
        }
        let wanted = min(uids.count, position + maxCount)
        if sizedUpTo < wanted {
            let from = uids[position]
            sizes = sizes.filter { uid, _ in uid >= from }
            let upTo = min(uids.count, max(wanted, sizedUpTo + slice))
            let asked = Array(uids[sizedUpTo..<upTo])
            for set in UIDSet.strings(asked, maxRanges: Syncer.rangesPerCommand) {
                for message in try await client.uidFetch(set, body: false) { sizes[message.uid] = message.size }
            }
            sizedUpTo = upTo
        }
        let batch =
            Syncer.batches(Array(uids[position..<wanted]), sizes: sizes, maxCount: maxCount, maxBytes: maxBytes)
            .first ?? []
        position += batch.count
        last = batch
        return batch
    }
}
