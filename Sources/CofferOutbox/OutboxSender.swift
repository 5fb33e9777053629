import CofferBlocking
import CofferCrypto
import CofferIMAP
import CofferMIME
import CofferSMTP
import CofferStore
import CofferSync
import CofferTransport
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// Sends an account's queued messages over SMTP submission and stores each one's copy in the Sent folder.
///
/// One drain sends every message that is due, one at a time over one pinned connection to the account's submission
/// server (``SubmissionServer``). Each message's Sent copy goes up beside its SMTP transaction, over one IMAP
/// connection opened beside the SMTP one: an `APPEND` (with `\Seen`) to the Sent folder (RFC 6154 `\Sent`, else a
/// folder named Sent, else one it creates) whose command is held open after its literal, while the store reads the
/// same file for the import. The copy is kept (the import committed, then the `APPEND` ended) only once the
/// submission server has accepted the message; otherwise the `APPEND` is withdrawn, which makes the IMAP server
/// discard it, and the import's files are deleted. A message whose copy could not go up beside it (no IMAP
/// connection, the account locked meanwhile) stays sent in the outbox, and its copy is appended and imported at the
/// end of the drain, or at the next one. Each message's bytes are streamed from its sealed file: nothing holds a
/// 25 MB message whole.
///
/// Key use (docs/ARCHITECTURE.md, "Key use"): the store's key is needed to claim a message and to open its file;
/// the open file holds only its own key, so a send that started finishes after the account locks (the claim and the
/// result need no key). The Sent copy needs the key again to be committed: if the account locked meanwhile, the
/// `APPEND` is withdrawn and the copy waits for the next drain. Delivery is at least once
/// (``MailStore/claimNextDue(accountID:now:)``).
public struct OutboxSender: Sendable {
    /// The store the outbox lives in.
    public let store: MailStore
    /// The SMTP connect and idle limits.
    public var timeouts: SMTPTimeouts
    /// When a temporary failure is tried again.
    public var backoff: OutboxBackoff
    /// The clock.
    public var now: @Sendable () -> Date

    /// A sender for `store`.
    public init(
        store: MailStore,
        timeouts: SMTPTimeouts = .init(),
        backoff: OutboxBackoff = .init(),
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.store = store
        self.timeouts = timeouts
        self.backoff = backoff
        self.now = now
    }

    /// Sends every message of account `accountID` that is due, with their Sent copies, then stores the Sent copies
    /// of the messages sent before whose copy is not stored yet.
    ///
    /// - Throws: ``StoreError`` when the store cannot be read (``StoreError/locked`` when the account is locked
    ///   before anything was claimed: what is queued waits for the next unlock). Failures of a message are not
    ///   thrown: they are recorded on the message and counted in the report.
    public func drain(accountID: Int64) async throws(StoreError) -> OutboxReport {
        let server = try await serverAccount(accountID)
        var connections = OutboxConnections()
        var report = OutboxReport()
        do throws(StoreError) {
            try await sendDue(server: server, accountID: accountID, connections: &connections, &report)
        } catch {
            await connections.close()
            throw error
        }
        await connections.close()
        await storeSentCopies(server: server, accountID: accountID, &report)
        return report
    }

    /// Queues `message` and sends it at once, streaming it to the submission server while its sealed outbox file is
    /// written, then sends the account's other due messages and stores the Sent copies, as ``drain(accountID:)``.
    ///
    /// The message is written twice from one writer (the same bytes: one `Message-ID`, `Date` and boundaries): into
    /// the outbox on the ``BlockingPool`` at disk speed, queued and claimed in one transaction that also deletes its
    /// draft (``MailStore/enqueueClaimed(_:accountID:replacingDraft:)``), and to the server at the server's pace.
    /// The final dot waits until the item is committed and the two copies' SHA-256 digests match: a crash, a
    /// failure to queue, or an attachment that changed while it was read drops the connection before the dot, so
    /// the server never accepts a message the outbox does not hold, and what it accepts is what the Sent copy is
    /// made from. A message not sent now stays queued, with backoff, as any other (it is then sent from its file).
    ///
    /// - Parameters:
    ///   - message: The message; its attachments are read twice, now.
    ///   - accountID: The store's account to send it through.
    ///   - draftID: The draft it was written from, deleted when it is queued.
    /// - Returns: The item as queued, and what the drain did (the message counted in it).
    /// - Throws: ``StoreError`` when the message cannot be queued (nothing is then sent and the draft stays), as
    ///   ``MailStore/enqueue(_:accountID:sendAfter:replacingDraft:)``; or as ``drain(accountID:)``.
    public func send(
        _ message: OutgoingMessage,
        accountID: Int64,
        replacingDraft draftID: Int64? = nil
    ) async throws(StoreError) -> (item: OutboxItem, report: OutboxReport) {
        let server = try await serverAccount(accountID)
        guard let submission = server.submission else {
            // Queued, then failed for good by the drain with the reason, as any message of such an account.
            let item = try await store.enqueue(message, accountID: accountID, replacingDraft: draftID)
            return (item, try await drain(accountID: accountID))
        }
        let unwritten: UnwrittenMessage
        do throws(ComposeError) { unwritten = try UnwrittenMessage(message) } catch { throw .compose(error) }
        // Settled once, never failed: the claimed item, or why the message is not queued.
        let queue = MultiThreadedEventLoopGroup.singleton.next().makePromise(
            of: Result<ClaimedMessage, StoreError>.self
        )
        let store = store
        /// Writes the outbox copy and settles `queue`.
        func enqueue() async {
            do throws(StoreError) {
                queue.succeed(
                    .success(try await store.enqueueClaimed(unwritten, accountID: accountID, replacingDraft: draftID))
                )
            } catch {
                queue.succeed(.failure(error))
            }
        }
        async let written: Void = enqueue()
        /// The claimed message once it is queued (the outbox copy written and committed).
        func queued() async throws(StoreError) -> ClaimedMessage {
            guard let result = try? await queue.futureResult.get() else { throw .invalidArgument("nothing was queued") }
            return try result.get()
        }
        var connections = OutboxConnections()
        var report = OutboxReport()
        let item: OutboxItem
        let sent: Result<Bool, SMTPError>
        do throws(StoreError) {
            let refused = await connect(submission, server: server, &connections)
            if let client = connections.smtp, refused == nil {
                (item, sent) = try await send(
                    queued: { () async throws(StoreError) -> OutboxItem in try await queued().item },
                    envelope: unwritten.writer.envelope,
                    declaredSize: nil,
                    body: StreamedMessage(unwritten.writer, queued: queue.futureResult),
                    over: client,
                    copyTo: &connections.sent
                )
            } else {
                (item, sent) = (try await queued().item, .failure(refused ?? .notReady(reason: "no connection")))
            }
            await written
            await store.removeDraftFiles(try await queued().draftFiles)
            try await record(sent, of: item, &connections, &report)
            try await sendDue(server: server, accountID: accountID, connections: &connections, &report)
        } catch {
            await connections.close()
            throw error
        }
        await connections.close()
        await storeSentCopies(server: server, accountID: accountID, &report)
        return (item, report)
    }

    /// The mail server account `accountID` of the store.
    private func serverAccount(_ accountID: Int64) async throws(StoreError) -> ServerAccount {
        guard let server = try await store.serverAccounts().first(where: { $0.id == accountID })?.server else {
            throw .invalidArgument("there is no mail server account \(accountID)")
        }
        return server
    }

    /// Claims and sends the account's due messages one at a time over `connections` (made when first needed).
    private func sendDue(
        server: ServerAccount,
        accountID: Int64,
        connections: inout OutboxConnections,
        _ report: inout OutboxReport
    ) async throws(StoreError) {
        while true {
            let item: OutboxItem?
            do {
                item = try await store.claimNextDue(accountID: accountID, now: now())
            } catch .locked where report != OutboxReport() {
                // Locked during the drain: what is left waits for the next unlock.
                break
            }
            guard let item else { break }
            guard let submission = server.submission else {
                try await fail(item, reason: "the account has no SMTP submission server", permanent: true, &report)
                continue
            }
            let reader: SealedFileReader
            do {
                reader = try await store.openOutboxMessage(item.id)
            } catch .locked {
                // Locked between the claim and the open: the message is queued again at once, for the next unlock.
                try await store.markFailed(item.id, reason: "", permanent: false, retryAt: now())
                throw .locked
            } catch {
                try await fail(item, reason: error.description, permanent: true, &report)
                continue
            }
            let sent: Result<Bool, SMTPError>
            if let refused = await connect(submission, server: server, &connections) {
                sent = .failure(refused)
            } else if let client = connections.smtp {
                sent = try await send(
                    queued: { item },
                    envelope: item.envelope,
                    declaredSize: Int(item.size),
                    body: SealedChunks(reader),
                    over: client,
                    copyTo: &connections.sent
                ).sent
            } else {
                continue
            }
            try await record(sent, of: item, &connections, &report)
        }
    }

    /// Counts what `sent` says of `item` in `report`, and records a failure on the item: queued again with backoff
    /// when it is transient, failed for good otherwise. A failed exchange closes the SMTP connection.
    private func record(
        _ sent: Result<Bool, SMTPError>,
        of item: OutboxItem,
        _ connections: inout OutboxConnections,
        _ report: inout OutboxReport
    ) async throws(StoreError) {
        switch sent {
        case .success(let copied):
            report.sent += 1
            if copied { report.sentCopies += 1 }
        case .failure(let error):
            // A failed exchange may leave the connection in any state: the next message gets a new one.
            if let failed = connections.smtp {
                connections.smtp = nil
                await failed.quit()
            }
            switch error.failureClass {
            case .transient:
                switch backoff.decision(afterAttempts: item.attempts, now: now()) {
                case .retry(let at):
                    try await store.markFailed(item.id, reason: error.description, permanent: false, retryAt: at)
                    report.retrying += 1
                case .giveUp:
                    try await fail(item, reason: error.description, permanent: false, &report)
                }
            case .permanent, .security:
                try await fail(item, reason: error.description, permanent: true, &report)
            }
        }
    }

    /// Opens the SMTP connection if there is none, and beside it the IMAP connection for the Sent copies if there
    /// is none (which may fail: the copies are then stored after the sends). The SMTP failure, or nil.
    private func connect(
        _ submission: SubmissionServer,
        server: ServerAccount,
        _ connections: inout OutboxConnections
    ) async -> SMTPError? {
        guard connections.smtp == nil else { return nil }
        async let opening = connections.sent == nil ? openSentFolder(server) : nil
        let login = server.submissionLogin
        let failure: SMTPError?
        do throws(SMTPError) {
            connections.smtp = try await SMTPClient.connect(
                to: submission.endpoint,
                credentials: SMTPCredentials(user: login.username, password: login.password),
                timeouts: timeouts
            )
            failure = nil
        } catch {
            failure = error
        }
        if let opened = await opening { connections.sent = opened }
        return failure
    }

    /// Sends a message over `client` while its Sent copy goes up over `folder` beside it: the `APPEND` held before
    /// its end and the import read. The transaction starts at once; the copy starts once `queued` has the item (at
    /// once for a message from the outbox; when its file is committed for one streamed while it is written, see
    /// ``send(_:accountID:replacingDraft:)``). Once the server accepts the message, the item is marked sent, then
    /// the import is committed and the `APPEND` ended, and the item removed; when the send fails, or the copy cannot
    /// be committed, the `APPEND` is withdrawn and the import's files deleted. `folder` is set to nil when its
    /// connection is closed (a withdrawn `APPEND` closes it).
    ///
    /// - Parameters:
    ///   - queued: The item the message is, once it is queued.
    ///   - envelope: Its envelope.
    ///   - declaredSize: The message's size for SMTP's `SIZE`, when known before it is written.
    ///   - body: The message's bytes. If they cannot all be had (the item could not be queued), it throws, and the
    ///     SMTP client drops the connection before the final dot.
    /// - Returns: The item, and whether the server accepted the message and then whether its copy is stored (if
    ///   not, the item stays sent, for ``storeSentCopies(server:accountID:_:)``); the SMTP failure otherwise.
    /// - Throws: ``StoreError`` when the item cannot be queued (`queued` throws) or marked sent.
    private func send(
        queued: () async throws(StoreError) -> OutboxItem,
        envelope: MailEnvelope,
        declaredSize: Int?,
        body: some AsyncSequence<[UInt8], any Error> & Sendable,
        over client: SMTPClient,
        copyTo folder: inout OutboxConnections.SentFolder?
    ) async throws(StoreError) -> (item: OutboxItem, sent: Result<Bool, SMTPError>) {
        let refused = NIOLockedValueBox(false)
        /// The SMTP transaction: the server's refusal or the connection's failure, nil when it accepted the message.
        /// A refused message's copy stops going up at once (the APPEND is then withdrawn mid-literal).
        func transmit(_ envelope: MailEnvelope) async -> SMTPError? {
            do throws(SMTPError) {
                _ = try await client.send(
                    from: envelope.sender,
                    to: envelope.recipients,
                    declaredSize: declaredSize,
                    body: body
                )
                return nil
            } catch {
                refused.withLockedValue { $0 = true }
                return error
            }
        }
        async let accepted = transmit(envelope)
        let item: OutboxItem
        do throws(StoreError) {
            item = try await queued()
        } catch {
            // The body throws too: the transaction ends without its final dot.
            _ = await accepted
            throw error
        }
        guard let sentFolder = folder else {
            if let refusal = await accepted { return (item, .failure(refusal)) }
            try await store.markSent(item.id)
            return (item, .success(false))
        }
        let (verdicts, verdict) = AsyncStream.makeStream(of: Bool.self)
        async let appended = Self.append(item, to: sentFolder, from: store, keep: verdicts, unless: refused)
        async let prepared = try? store.prepareOutboxImport(item.id, flags: [.seen], labels: [sentFolder.name])
        let refusal = await accepted
        var unmarked: StoreError?
        if refusal == nil {
            do { try await store.markSent(item.id) } catch { unmarked = error }
        }
        // Accepted and marked: the copy is committed in the store, then on the server; else it is withdrawn.
        var committed = false
        if refusal == nil, unmarked == nil, let ready = await prepared {
            // A failed commit deletes the import's files itself.
            committed = (try? await store.commitOutboxImport(ready)) != nil
        } else if let unused = await prepared {
            await store.discardOutboxImport(unused)
        }
        verdict.yield(committed)
        verdict.finish()
        let uploaded = await appended
        if !committed || !uploaded {
            // A withdrawn or failed APPEND leaves its connection closed or in doubt: the copies of the messages after
            // this one are stored after the sends (storeSentCopies), over a new connection.
            folder = nil
            await sentFolder.client.logout()
        }
        if let unmarked { throw unmarked }
        if let refusal { return (item, .failure(refusal)) }
        // When the store has the copy and the server may not, the item stays sent, and its copy is appended again at
        // the end of the drain (its import then finds it already stored).
        guard committed, uploaded, (try? await store.removeSent(item.id)) != nil else { return (item, .success(false)) }
        return (item, .success(true))
    }

    /// The Sent copy's `APPEND` of outbox item `item` to `folder`, streamed from its sealed file and held after its
    /// literal until `keep` gives a verdict; once `refused` is set, the next chunk is not read and the `APPEND` is
    /// withdrawn there (its connection closed mid-literal, so the server stores nothing). Whether the server now has
    /// the copy.
    private static func append(
        _ item: OutboxItem,
        to folder: OutboxConnections.SentFolder,
        from store: MailStore,
        keep verdicts: AsyncStream<Bool>,
        unless refused: NIOLockedValueBox<Bool>
    ) async -> Bool {
        do {
            let chunks = SealedChunks(try await store.openOutboxMessage(item.id))
            _ = try await folder.client.append(
                mailbox: folder.wire,
                flags: ["\\Seen"],
                size: Int(item.size),
                keep: {
                    var verdict = verdicts.makeAsyncIterator()
                    return await verdict.next() ?? false
                },
                nextChunk: {
                    if refused.withLockedValue({ $0 }) { throw CancellationError() }
                    return try await chunks.next()
                }
            )
            return true
        } catch {
            return false
        }
    }

    /// An IMAP connection to `server` and its Sent folder, or nil when either cannot be had (the copies are then
    /// stored after the sends, which reports why).
    private func openSentFolder(_ server: ServerAccount) async -> OutboxConnections.SentFolder? {
        guard let client = try? await Syncer(store: store).connect(server) else { return nil }
        guard let folder = try? await Self.sentFolder(client) else {
            await client.logout()
            return nil
        }
        return OutboxConnections.SentFolder(client: client, name: folder.name, wire: folder.wire)
    }

    private func fail(
        _ item: OutboxItem,
        reason: String,
        permanent: Bool,
        _ report: inout OutboxReport
    ) async throws(StoreError) {
        try await store.markFailed(item.id, reason: reason, permanent: permanent, retryAt: nil)
        report.failed.append(.init(id: item.id, subject: item.subject, reason: reason))
    }

    /// Appends every sent message of the account to the Sent folder and imports it, then ends its outbox item.
    private func storeSentCopies(server: ServerAccount, accountID: Int64, _ report: inout OutboxReport) async {
        let sent: [OutboxItem]
        do {
            sent = try await store.outbox().filter { $0.accountID == accountID && $0.state == .sent }
        } catch {
            report.sentCopyFailure = error.description
            return
        }
        guard !sent.isEmpty else { return }
        let client: IMAPClient
        do {
            client = try await Syncer(store: store).connect(server)
        } catch {
            report.sentCopyFailure = error.description
            return
        }
        do {
            let folder = try await Self.sentFolder(client)
            for item in sent {
                try await appendCopy(item, to: folder, client: client)
                report.sentCopies += 1
            }
        } catch {
            report.sentCopyFailure = "\(error)"
        }
        await client.logout()
    }

    /// The Sent folder: the one the server marks `\Sent` (RFC 6154), else one named Sent, else a new Sent folder.
    static func sentFolder(_ client: IMAPClient) async throws(IMAPError) -> (name: String, wire: String) {
        let listing = try await client.list()
        func named(_ entry: MailboxListing) -> (name: String, wire: String) {
            (MailboxName.decode(entry.name) ?? entry.name, entry.name)
        }
        if let marked = listing.first(where: {
            $0.attributes.contains { $0.caseInsensitiveCompare("\\Sent") == .orderedSame }
        }) {
            return named(marked)
        }
        if let plain = listing.first(where: { (MailboxName.decode($0.name) ?? $0.name).lowercased() == "sent" }) {
            return named(plain)
        }
        try await client.createAndSubscribe("Sent")
        return ("Sent", "Sent")
    }

    /// One message's Sent copy: appended from its sealed file with `\Seen`, imported under the folder's name from
    /// the same file (streamed: a large attachment goes to a sealed file of its own, never whole in memory), then
    /// its outbox item removed. A crash in between appends it again at the next drain (at least once, as sending).
    private func appendCopy(
        _ item: OutboxItem,
        to folder: (name: String, wire: String),
        client: IMAPClient
    ) async throws {
        let chunks = SealedChunks(try await store.openOutboxMessage(item.id))
        _ = try await client.append(mailbox: folder.wire, flags: ["\\Seen"], size: Int(item.size)) {
            try await chunks.next()
        }
        _ = try await store.importOutboxMessage(item.id, flags: [.seen], labels: [folder.name])
        try await store.removeSent(item.id)
    }
}

/// The connections of one drain: SMTP submission, and IMAP with its Sent folder for the copies (nil when it could not
/// be opened: the copies are then stored after the sends).
struct OutboxConnections {
    /// An IMAP connection and the Sent folder's name (as stored) and wire name.
    struct SentFolder {
        let client: IMAPClient
        let name: String
        let wire: String
    }

    var smtp: SMTPClient?
    var sent: SentFolder?

    /// Ends both connections (QUIT, LOGOUT).
    func close() async {
        await smtp?.quit()
        await sent?.client.logout()
    }
}

/// A sealed outbox message as the SMTP client's body: its chunks in order, each read from the file on the
/// BlockingPool as the previous one has been written.
struct SealedChunks: AsyncSequence, Sendable {
    typealias Element = [UInt8]
    typealias Failure = any Error

    /// The reader, used by one task at a time (the client reads its body in order); the lock makes that explicit.
    private final class Box: @unchecked Sendable {
        let lock = NIOLock()
        let reader: SealedFileReader

        init(_ reader: SealedFileReader) { self.reader = reader }
    }

    private let box: Box

    init(_ reader: sending SealedFileReader) {
        box = Box(reader)
    }

    /// The next chunk, or nil at the end.
    func next() async throws -> [UInt8]? {
        let box = box
        return try await BlockingPool.run { () throws(StoreError) -> [UInt8]? in
            box.lock.lock()
            defer { box.lock.unlock() }
            return try box.reader.nextChunk()
        }
    }

    struct AsyncIterator: AsyncIteratorProtocol {
        let chunks: SealedChunks

        mutating func next() async throws -> [UInt8]? { try await chunks.next() }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(chunks: self) }
}

/// A copy of a message's writer as the SMTP client's body while the other copy is written into the sealed outbox
/// (``OutboxSender/send(_:accountID:replacingDraft:)``): each chunk is written on the ``BlockingPool`` as the
/// previous one has been sent, and hashed. The end, after which the client sends the final dot, is handed out only
/// once the outbox holds the message, claimed, with the same SHA-256; otherwise it throws, and the client drops the
/// connection.
struct StreamedMessage: AsyncSequence, Sendable {
    typealias Element = [UInt8]
    typealias Failure = any Error

    /// Why the copy sent and the copy queued differ: an attachment changed while the two were read.
    struct CopiesDiffer: Error, CustomStringConvertible {
        var description: String { "an attachment changed while it was read; the queued copy is sent later" }
    }

    /// The writer and the digest, used by one task at a time (the client reads its body in order).
    private final class Box: @unchecked Sendable {
        let lock = NIOLock()
        var writer: MessageWriter
        var digest = MessageDigest()

        init(_ writer: MessageWriter) { self.writer = writer }
    }

    private let box: Box
    private let queued: EventLoopFuture<Result<ClaimedMessage, StoreError>>

    /// `writer`'s bytes (a copy that has written nothing), ended once `queued` has the item with the same digest.
    init(_ writer: MessageWriter, queued: EventLoopFuture<Result<ClaimedMessage, StoreError>>) {
        box = Box(writer)
        self.queued = queued
    }

    /// The next chunk, or nil at the end once the outbox copy matches.
    func next() async throws -> [UInt8]? {
        let box = box
        let chunk = try await BlockingPool.run { () throws(ComposeError) -> [UInt8]? in
            box.lock.lock()
            defer { box.lock.unlock() }
            guard let chunk = try box.writer.nextChunk() else { return nil }
            chunk.withUnsafeBytes { box.digest.update($0) }
            return chunk
        }
        if let chunk { return chunk }
        let claimed = try await queued.get().get()
        guard claimed.digest == box.lock.withLock({ box.digest.finalized() }) else { throw CopiesDiffer() }
        return nil
    }

    struct AsyncIterator: AsyncIteratorProtocol {
        let message: StreamedMessage

        mutating func next() async throws -> [UInt8]? { try await message.next() }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(message: self) }
}
