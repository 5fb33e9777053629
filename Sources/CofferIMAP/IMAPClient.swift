import CofferTransport
import Foundation
import NIOCore
import NIOPosix

/// How the connection becomes TLS.
public enum IMAPSecurity: String, Sendable, Codable, CaseIterable {
    /// TLS from the first byte (`imaps://`, port 993).
    case implicitTLS
    /// Plain IMAP (port 143) upgraded with STARTTLS before anything else is sent. A server that does not offer
    /// STARTTLS is refused: there is no fallback to plaintext.
    case startTLS
}

/// Where and how to reach an IMAP server.
public struct IMAPConfiguration: Sendable {
    /// The pinned TLS connection (the same checks for both kinds of `security`).
    public var tls: PinnedTLSConfiguration
    /// Implicit TLS (the default) or STARTTLS.
    public var security: IMAPSecurity
    /// The parser's bounds.
    public var limits: IMAPResponseParser.Limits
    /// Capabilities to act as if the server did not offer (upper-case), such as `QRESYNC` to force the plain UID
    /// diff; the security-relevant `STARTTLS` and `LOGINDISABLED` are never ignored.
    public var ignoredCapabilities: Set<String>
    /// How long the server may stay silent while an answer is due (IDLE excepted) before the connection is
    /// dropped with ``IMAPError/stalled(seconds:)``; nil waits for ever.
    public var responseTimeout: Duration?
    /// Called with the name of every command sent (`UID STORE`, `SELECT`…), never its arguments: lets a caller
    /// count round trips.
    public var onCommand: (@Sendable (String) -> Void)?

    /// Creates a configuration.
    public init(
        tls: PinnedTLSConfiguration,
        security: IMAPSecurity = .implicitTLS,
        limits: IMAPResponseParser.Limits = .init(),
        ignoredCapabilities: Set<String> = [],
        responseTimeout: Duration? = .seconds(120),
        onCommand: (@Sendable (String) -> Void)? = nil
    ) {
        self.responseTimeout = responseTimeout
        self.tls = tls
        self.security = security
        self.limits = limits
        self.ignoredCapabilities = Set(ignoredCapabilities.map { $0.uppercased() })
            .subtracting(["STARTTLS", "LOGINDISABLED"])
        self.onCommand = onCommand
    }
}

/// What SELECT or EXAMINE reported.
public struct SelectedMailbox: Sendable, Equatable {
    /// The mailbox name.
    public var name: String
    /// The number of messages (`EXISTS`).
    public var exists: UInt32 = 0
    /// The UID validity; nil if the server did not send it.
    public var uidValidity: UInt32?
    /// The next UID; nil if the server did not send it.
    public var uidNext: UInt32?
    /// The highest mod-sequence (CONDSTORE); nil without CONDSTORE or with NOMODSEQ.
    public var highestModSeq: UInt64?
    /// The flags defined in the mailbox.
    public var flags: [String] = []
    /// The flags that can be changed permanently.
    public var permanentFlags: [String] = []
    /// True when selected read-only (EXAMINE, or the server said READ-ONLY).
    public var readOnly: Bool = false
    /// With a QRESYNC select: the UIDs expunged since the given mod-sequence (`VANISHED (EARLIER)`), as ranges.
    public var vanished: [ClosedRange<UInt32>] = []
    /// With a QRESYNC select: the messages whose flags changed since the given mod-sequence (UID, FLAGS, MODSEQ).
    public var changed: [FetchedMessage] = []
    /// Whether the select carried QRESYNC parameters that the server accepted (so ``vanished`` and ``changed``
    /// are complete).
    public var resynchronized: Bool = false
}

/// One message from UID FETCH.
public struct FetchedMessage: Sendable, Equatable {
    /// The message's UID.
    public var uid: UInt32
    /// Its flags.
    public var flags: [String] = []
    /// INTERNALDATE in seconds since 1970.
    public var internalDate: Int64?
    /// RFC822.SIZE.
    public var size: UInt64?
    /// MODSEQ (CONDSTORE).
    public var modSeq: UInt64?
    /// The BODY[] bytes, when fetched (assembled from streamed chunks if large).
    public var body: [UInt8]?
}

/// How UID STORE changes flags.
public enum StoreMode: String, Sendable {
    /// Adds the flags (`+FLAGS.SILENT`).
    case add = "+FLAGS.SILENT"
    /// Removes the flags (`-FLAGS.SILENT`).
    case remove = "-FLAGS.SILENT"
    /// Replaces the flags (`FLAGS.SILENT`).
    case replace = "FLAGS.SILENT"
}

/// An IMAP4rev1 client over one pinned TLS connection; the actor is the connection's only owner.
///
/// Each method sends one command and returns when its tagged completion arrives. Untagged responses that arrive
/// meanwhile update `capabilities` and `selected`, and the latest are in `unsolicited` until `takeUnsolicited()`.
/// Cancel the calling task to time out: the connection is then closed (its state is unknown).
public actor IMAPClient {
    private let channel: any Channel
    private let queue: IMAPEventQueue
    private var encoder = IMAPCommandEncoder()
    private var closed = false
    /// The capabilities last announced (greeting, CAPABILITY, or the login response code).
    public private(set) var capabilities: Set<String> = []
    /// The extensions ENABLE turned on.
    public private(set) var enabled: Set<String> = []
    /// The selected mailbox, if any (its ``SelectedMailbox/exists`` follows EXISTS, EXPUNGE and VANISHED).
    public private(set) var selected: SelectedMailbox?
    /// How many messages the server reported expunged (`EXPUNGE`, or a `VANISHED` without `EARLIER`) since the
    /// connection opened: a caller walking the mailbox by sequence numbers sees when they shifted under it.
    public private(set) var expungedCount = 0
    /// Whether the connection is still open (false after a failure, BYE or LOGOUT: make a new client).
    public var isConnected: Bool { !closed }
    private var unsolicited: [UntaggedResponse] = []
    /// What the pin policy decided about the server's validated chain.
    public private(set) var pinEvaluation: PinEvaluation
    private let ignoredCapabilities: Set<String>
    private let onCommand: (@Sendable (String) -> Void)?

    private init(
        channel: any Channel,
        queue: IMAPEventQueue,
        pinEvaluation: PinEvaluation,
        configuration: IMAPConfiguration
    ) {
        self.channel = channel
        self.queue = queue
        self.pinEvaluation = pinEvaluation
        self.ignoredCapabilities = configuration.ignoredCapabilities
        self.onCommand = configuration.onCommand
        if let timeout = configuration.responseTimeout { Self.startWatchdog(queue: queue, channel: channel, timeout) }
    }

    /// Fails the connection with `.stalled` when a whole `timeout` passes in which the client waited for the
    /// server outside IDLE and nothing at all arrived (a body chunk counts). Ends with the connection.
    private static func startWatchdog(queue: IMAPEventQueue, channel: any Channel, _ timeout: Duration) {
        let tick = timeout / 2
        let seconds = Int(timeout.components.seconds)
        Task.detached {
            var last = queue.watch
            var silentTicks = 0
            while true {
                try? await Task.sleep(for: tick)
                let now = queue.watch
                if now.ended { return }
                silentTicks = now.starving && last.starving && now.pushed == last.pushed ? silentTicks + 1 : 0
                last = now
                if silentTicks >= 2 {
                    queue.push(.failed(.stalled(seconds: seconds)))
                    channel.close(promise: nil)
                    return
                }
            }
        }
    }

    private func setCapabilities(_ names: [String]) {
        capabilities = Set(names.map { $0.uppercased() }).subtracting(ignoredCapabilities)
    }

    /// Connects over pinned TLS (implicit, or STARTTLS before anything else) and reads the greeting.
    ///
    /// - Throws: `IMAPError.transport` with the transport's sentence for a TLS or pin failure (never bypassable),
    ///   `.missingCapability("STARTTLS")` when STARTTLS is configured and not offered,
    ///   `.plaintextAfterStartTLS`, `.connectionClosed` for a BYE greeting, or a parse error.
    public static func connect(_ configuration: IMAPConfiguration) async throws(IMAPError) -> IMAPClient {
        let queue = IMAPEventQueue()
        let limits = configuration.limits
        let addHandler: @Sendable (any Channel) -> EventLoopFuture<any Channel> = { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(IMAPChannelHandler(limits: limits, queue: queue))
                return channel
            }
        }
        switch configuration.security {
        case .implicitTLS:
            let connection: PinnedConnection<any Channel>
            do {
                connection = try await PinnedTLS.connect(configuration.tls, configure: addHandler)
            } catch {
                throw .transport(error.description)
            }
            let client = IMAPClient(
                channel: connection.output,
                queue: queue,
                pinEvaluation: connection.pinEvaluation,
                configuration: configuration
            )
            try await client.readGreeting()
            return client
        case .startTLS:
            let channel: any Channel
            do {
                channel = try await PinnedTLS.connectPlaintext(configuration.tls, configure: addHandler)
            } catch {
                throw .transport(error.description)
            }
            // Not pinned yet: the client is handed out only after startTLS has checked the chain and the pins.
            let client = IMAPClient(
                channel: channel,
                queue: queue,
                pinEvaluation: .notPinned,
                configuration: configuration
            )
            try await client.readGreeting()
            try await client.startTLS(configuration.tls)
            return client
        }
    }

    /// STARTTLS (RFC 3501 6.2.1, RFC 8314): refuses a server without it, upgrades with the full pinned checks, and
    /// forgets what the server said in plaintext (its capabilities are asked again over TLS).
    private func startTLS(_ tls: PinnedTLSConfiguration) async throws(IMAPError) {
        if capabilities.isEmpty { _ = try await run(IMAPCommand("CAPABILITY")) }
        guard capabilities.contains("STARTTLS") else {
            await closeChannel()
            throw .missingCapability("STARTTLS")
        }
        let channel = channel
        do {
            try await channel.eventLoop.submit {
                try channel.pipeline.syncOperations.handler(type: IMAPChannelHandler.self).armForStartTLS()
            }.get()
        } catch {
            await closeChannel()
            throw .connectionClosed
        }
        do {
            _ = try await run(IMAPCommand("STARTTLS"))
        } catch {
            await closeChannel()
            throw error
        }
        let connection: PinnedConnection<any Channel>
        do {
            connection = try await PinnedTLS.startTLS(on: channel, tls) { channel in
                try channel.pipeline.syncOperations.handler(type: IMAPChannelHandler.self).resumeOverTLS()
            }
        } catch {
            closed = true
            if queue.failure == .plaintextAfterStartTLS { throw .plaintextAfterStartTLS }
            throw .transport(error.description)
        }
        pinEvaluation = connection.pinEvaluation
        capabilities = []
        _ = try await run(IMAPCommand("CAPABILITY"))
    }

    private func readGreeting() async throws(IMAPError) {
        let greeting = try await nextResponse(body: nil)
        guard case .untagged(.condition(let status, let code, _)) = greeting else {
            await closeChannel()
            throw .unexpectedResponse(expected: "a greeting")
        }
        if case .capability(let names) = code { setCapabilities(names) }
        switch status {
        case .ok, .preauth: break
        default:
            await closeChannel()
            throw .connectionClosed
        }
    }

    // MARK: - Commands

    /// CAPABILITY: asks for and returns the capabilities (upper-cased).
    public func capability() async throws(IMAPError) -> Set<String> {
        _ = try await run(IMAPCommand("CAPABILITY"))
        return capabilities
    }

    /// LOGIN with the password sent as a literal (never quoted into the command line).
    ///
    /// - Throws: `.missingCapability("LOGIN")` if the server advertises LOGINDISABLED; `.commandFailed` on refusal.
    public func login(user: String, password: String) async throws(IMAPError) {
        guard !capabilities.contains("LOGINDISABLED") else { throw .missingCapability("LOGIN") }
        _ = try await run(IMAPCommand("LOGIN", [.string(user), .literal(Array(password.utf8))]), name: "LOGIN")
        try await refreshCapabilitiesIfNeeded()
    }

    /// AUTHENTICATE PLAIN (RFC 4616), the credentials in the continuation (or initial response with SASL-IR).
    public func authenticatePlain(user: String, password: String) async throws(IMAPError) {
        guard capabilities.contains("AUTH=PLAIN") else { throw .missingCapability("AUTH=PLAIN") }
        let token = Data([0] + Array(user.utf8) + [0] + Array(password.utf8)).base64EncodedString()
        let encoded = try encoder.encode(IMAPCommand("AUTHENTICATE", [.atom("PLAIN")]))
        onCommand?("AUTHENTICATE")
        try await write(encoded.parts[0])
        var done: TaggedResponse?
        var untagged: [UntaggedResponse] = []
        while done == nil {
            switch try await nextResponse(body: nil) {
            case .continuation:
                try await write(Array(token.utf8) + [0x0D, 0x0A])
            case .untagged(let response):
                absorb(response, into: &untagged)
            case .tagged(let tagged):
                guard tagged.tag == encoded.tag else { throw .unexpectedResponse(expected: "the tag \(encoded.tag)") }
                done = tagged
            }
        }
        if let done { try check(done, command: "AUTHENTICATE") }
        try await refreshCapabilitiesIfNeeded()
    }

    /// ID (RFC 2971): tells the server about this client, each field and value as a quoted string; the server's own
    /// ID data is not kept. A proxy sends `x-originating-ip` and `x-originating-port` before logging in, which
    /// Dovecot believes from its `login_trusted_networks`.
    ///
    /// - Throws: `.unencodable` for more than 30 fields, a name over 30 bytes, a value over 1024 bytes, or a byte that
    ///   is not printable ASCII (CR, LF, NUL) — nothing is sent then; `.missingCapability("ID")` when the server does
    ///   not offer ID; `.commandFailed` when it refuses the command.
    public func id(_ fields: [(String, String)]) async throws(IMAPError) {
        guard fields.count <= 30, fields.allSatisfy({ $0.0.utf8.count <= 30 && $0.1.utf8.count <= 1024 }) else {
            throw .unencodable(reason: "ID takes at most 30 fields, names of 30 bytes and values of 1024")
        }
        let list = fields.flatMap { [IMAPArgument.quoted(Array($0.0.utf8)), .quoted(Array($0.1.utf8))] }
        guard capabilities.contains("ID") else { throw .missingCapability("ID") }
        // The encoder refuses a value it cannot quote before anything is written.
        _ = try await run(IMAPCommand("ID", [list.isEmpty ? .atom("NIL") : .list(list)]))
    }

    /// LIST: the mailboxes matching `pattern` under `reference`.
    public func list(reference: String = "", pattern: String = "*") async throws(IMAPError) -> [MailboxListing] {
        let untagged = try await run(IMAPCommand("LIST", [.string(reference), .string(pattern)]))
        return untagged.compactMap { if case .list(let listing) = $0 { listing } else { nil } }
    }

    /// STATUS: the requested items (MESSAGES, UIDNEXT, UIDVALIDITY, UNSEEN, HIGHESTMODSEQ…) of a mailbox.
    public func status(_ mailbox: String, items: [String]) async throws(IMAPError) -> [String: UInt64] {
        let untagged = try await run(IMAPCommand("STATUS", [.string(mailbox), .list(items.map { .atom($0) })]))
        var result: [String: UInt64] = [:]
        for case .status(_, let values) in untagged { result.merge(values) { $1 } }
        return result
    }

    /// CREATE a mailbox (its wire name), then SUBSCRIBE to it so that syncs follow it.
    public func createAndSubscribe(_ mailbox: String) async throws(IMAPError) {
        _ = try await run(IMAPCommand("CREATE", [.string(mailbox)]))
        _ = try await run(IMAPCommand("SUBSCRIBE", [.string(mailbox)]))
    }

    /// LSUB: the subscribed mailboxes matching `pattern` (names as the server sends them, modified UTF-7).
    public func subscribed(reference: String = "", pattern: String = "*") async throws(IMAPError) -> [MailboxListing] {
        let untagged = try await run(IMAPCommand("LSUB", [.string(reference), .string(pattern)]))
        return untagged.compactMap { if case .list(let listing) = $0 { listing } else { nil } }
    }

    /// SELECT (or EXAMINE when `readOnly`); asks for CONDSTORE data when the server offers it.
    ///
    /// With `qresync` (the UIDVALIDITY and HIGHESTMODSEQ a previous session ended with) and QRESYNC enabled, the
    /// server also reports what changed since (RFC 7162 3.2.5): the expunged UIDs in ``SelectedMailbox/vanished``
    /// and the changed flags in ``SelectedMailbox/changed``.
    public func select(
        _ mailbox: String,
        readOnly: Bool = false,
        qresync: (uidValidity: UInt32, modSeq: UInt64)? = nil
    ) async throws(IMAPError) -> SelectedMailbox {
        var arguments: [IMAPArgument] = [.string(mailbox)]
        let resync = qresync.flatMap { enabled.contains("QRESYNC") && $0.modSeq > 0 ? $0 : nil }
        if let resync {
            arguments.append(
                .list([
                    .atom("QRESYNC"), .list([.atom(String(resync.uidValidity)), .atom(String(resync.modSeq))]),
                ])
            )
        } else if capabilities.contains("CONDSTORE"), !enabled.contains("CONDSTORE"), !enabled.contains("QRESYNC") {
            arguments.append(.list([.atom("CONDSTORE")]))
        }
        selected = nil
        var mailboxState = SelectedMailbox(name: mailbox, readOnly: readOnly)
        let untagged: [UntaggedResponse]
        let done: TaggedResponse
        (untagged, done) = try await runRaw(IMAPCommand(readOnly ? "EXAMINE" : "SELECT", arguments))
        for response in untagged {
            switch response {
            case .exists(let count): mailboxState.exists = count
            case .flags(let flags): mailboxState.flags = flags
            case .condition(_, let code?, _): apply(code, to: &mailboxState)
            case .vanished(_, let set) where resync != nil:
                guard let ranges = UIDSet.ranges(set) else { throw .unexpectedResponse(expected: "a set of UIDs") }
                mailboxState.vanished += ranges
            case .fetch(_, let items) where resync != nil:
                let (message, hasUID) = Self.message(items)
                if hasUID { mailboxState.changed.append(message) }
            default: break
            }
        }
        if let code = done.code { apply(code, to: &mailboxState) }
        try check(done, command: readOnly ? "EXAMINE" : "SELECT")
        // The server answers a stale UIDVALIDITY with a plain select: nothing it reports is relative to modSeq.
        mailboxState.resynchronized = resync != nil && mailboxState.uidValidity == resync?.uidValidity
        if !mailboxState.resynchronized {
            mailboxState.vanished = []
            mailboxState.changed = []
        }
        selected = mailboxState
        return mailboxState
    }

    /// UID SEARCH with the given criteria (`ALL`, `UNSEEN`, `UID 100:*`…, as atoms): the UIDs found, in the order
    /// the server sent them (see ``uidSearchRanges(_:)``).
    public func uidSearch(_ criteria: [String] = ["ALL"]) async throws(IMAPError) -> [UInt32] {
        try await uidSearchRanges(criteria).flatMap { Array($0) }
    }

    /// UID SEARCH with the given criteria, the UIDs found as ranges: with ESEARCH (RFC 4731) offered, as
    /// `UID SEARCH RETURN (ALL) …`, whose answer names runs of UIDs (`1:100000`) instead of every one; otherwise as
    /// a plain `UID SEARCH`, each UID its own range. Either answer is one line: a caller that may find many UIDs
    /// narrows the criteria (for example to a window of sequence numbers) so that it stays under the parser's
    /// line limit.
    public func uidSearchRanges(_ criteria: [String] = ["ALL"]) async throws(IMAPError) -> [ClosedRange<UInt32>] {
        let extended = capabilities.contains("ESEARCH")
        let prefix: [IMAPArgument] = extended ? [.atom("RETURN"), .list([.atom("ALL")])] : []
        let untagged = try await run(IMAPCommand("UID SEARCH", prefix + criteria.map { .atom($0) }))
        var ranges: [ClosedRange<UInt32>] = []
        for response in untagged {
            switch response {
            case .search(let found, _): ranges += found.map { $0...$0 }
            case .esearch(let result) where result.uid || !extended: ranges += result.all
            default: break
            }
        }
        return ranges
    }

    /// UID FETCH of FLAGS, INTERNALDATE, RFC822.SIZE (and MODSEQ with CONDSTORE), and BODY.PEEK[] when `body`.
    ///
    /// Large bodies arrive as streamed chunks; `onBodyChunk` receives them (UID unknown until the response ends, so
    /// the sequence number is given). Without `onBodyChunk` they are assembled into `FetchedMessage.body`.
    public func uidFetch(
        _ uidSet: String,
        body: Bool = true,
        changedSince: UInt64? = nil,
        onBodyChunk: (@Sendable (_ sequence: UInt32, _ chunk: [UInt8]) -> Void)? = nil
    ) async throws(IMAPError) -> [FetchedMessage] {
        var items: [IMAPArgument] = [.atom("UID"), .atom("FLAGS"), .atom("INTERNALDATE"), .atom("RFC822.SIZE")]
        if capabilities.contains("CONDSTORE") { items.append(.atom("MODSEQ")) }
        if body { items.append(.atom("BODY.PEEK[]")) }
        var assembled: [UInt32: [UInt8]] = [:]
        var current: UInt32 = 0
        let sink: (IMAPResponseEvent) -> Void = { event in
            switch event {
            case .bodyBegin(let sequence, _, let size):
                current = sequence
                if onBodyChunk == nil { assembled[sequence, default: []].reserveCapacity(size) }
            case .bodyChunk(let chunk):
                if let onBodyChunk { onBodyChunk(current, chunk) } else { assembled[current, default: []] += chunk }
            default: break
            }
        }
        var arguments: [IMAPArgument] = [.atom(uidSet), .list(items)]
        if let changedSince, capabilities.contains("CONDSTORE") {
            arguments.append(.list([.atom("CHANGEDSINCE"), .atom(String(changedSince))]))
        }
        let untagged = try await run(IMAPCommand("UID FETCH", arguments), body: sink)
        var messages: [FetchedMessage] = []
        for case .fetch(let sequence, let fetchItems) in untagged {
            var (message, hasUID) = Self.message(fetchItems)
            if fetchItems.contains(where: { if case .streamedBody("", _, _) = $0 { true } else { false } }),
                onBodyChunk == nil
            {
                message.body = assembled.removeValue(forKey: sequence) ?? []
            }
            // A FETCH without UID is an unsolicited flag update, not an answer to this command.
            if hasUID {
                messages.append(message)
            } else {
                unsolicited.append(.fetch(sequence: sequence, items: fetchItems))
            }
        }
        return messages
    }

    /// UID STORE: adds, removes or replaces flags (silently).
    public func uidStore(_ uidSet: String, _ mode: StoreMode, flags: [String]) async throws(IMAPError) {
        _ = try await run(
            IMAPCommand("UID STORE", [.atom(uidSet), .atom(mode.rawValue), .list(flags.map { .atom($0) })])
        )
    }

    /// UID EXPUNGE (RFC 4315): removes only the given messages marked `\Deleted`.
    ///
    /// - Throws: `.missingCapability("UIDPLUS")` without UIDPLUS (a plain EXPUNGE could remove other messages).
    public func uidExpunge(_ uidSet: String) async throws(IMAPError) {
        guard capabilities.contains("UIDPLUS") else { throw .missingCapability("UIDPLUS") }
        _ = try await run(IMAPCommand("UID EXPUNGE", [.atom(uidSet)]))
    }

    /// ENABLE (RFC 5161) of the given extensions that the server offers; returns those it enabled.
    public func enable(_ extensions: [String]) async throws(IMAPError) -> Set<String> {
        let offered = extensions.filter { capabilities.contains($0.uppercased()) }
        guard capabilities.contains("ENABLE"), !offered.isEmpty else { return [] }
        let untagged = try await run(IMAPCommand("ENABLE", offered.map { .atom($0) }))
        for case .enabled(let names) in untagged { enabled.formUnion(names.map { $0.uppercased() }) }
        return enabled
    }

    /// IDLE (RFC 2177) until the server reports a change (EXISTS, EXPUNGE, FETCH, VANISHED) or `timeout` passes,
    /// then DONE; returns the untagged responses received (empty on timeout).
    public func idle(timeout: Duration) async throws(IMAPError) -> [UntaggedResponse] {
        guard capabilities.contains("IDLE") else { throw .missingCapability("IDLE") }
        let encoded = try encoder.encode(IMAPCommand("IDLE"))
        onCommand?("IDLE")
        queue.setIdling(true)
        defer { queue.setIdling(false) }
        try await write(encoded.parts[0])
        var changes: [UntaggedResponse] = []
        var timer: Task<Void, Never>?
        defer { timer?.cancel() }
        var sentDone = false
        while true {
            let response = try await nextResponseOrWakeUp(body: nil, wakeUp: true)
            switch response {
            case nil:
                if !sentDone {
                    sentDone = true
                    try await write(try IMAPCommandEncoder.continuationLine("DONE"))
                }
            case .continuation?:
                if timer == nil {
                    let queue = self.queue
                    timer = Task {
                        try? await Task.sleep(for: timeout)
                        if !Task.isCancelled { queue.push(.wakeUp) }
                    }
                }
            case .untagged(let untagged)?:
                absorb(untagged, into: &changes)
                switch untagged {
                case .exists, .expunge, .fetch, .vanished, .recent:
                    if !sentDone {
                        sentDone = true
                        try await write(try IMAPCommandEncoder.continuationLine("DONE"))
                    }
                default: break
                }
            case .tagged(let tagged)?:
                guard tagged.tag == encoded.tag else { throw .unexpectedResponse(expected: "the tag \(encoded.tag)") }
                try check(tagged, command: "IDLE")
                return changes
            }
        }
    }

    /// SETMETADATA (RFC 5464) on a mailbox (`""` for the server); a nil value removes the entry.
    public func setMetadata(mailbox: String, entries: [(name: String, value: [UInt8]?)]) async throws(IMAPError) {
        guard capabilities.contains("METADATA") || capabilities.contains("METADATA-SERVER") else {
            throw .missingCapability("METADATA")
        }
        var list: [IMAPArgument] = []
        for entry in entries {
            list.append(.string(entry.name))
            list.append(entry.value.map { .literal($0) } ?? .atom("NIL"))
        }
        _ = try await run(IMAPCommand("SETMETADATA", [.string(mailbox), .list(list)]))
    }

    /// GETMETADATA (RFC 5464) of the given entries.
    public func getMetadata(mailbox: String, entries: [String]) async throws(IMAPError) -> [MetadataEntry] {
        let untagged = try await run(
            IMAPCommand("GETMETADATA", [.string(mailbox), .list(entries.map { .string($0) })])
        )
        var result: [MetadataEntry] = []
        for case .metadata(_, let found) in untagged { result += found }
        return result
    }

    /// APPEND (RFC 3501 section 6.3.11) of a message of `size` bytes to `mailbox` (its wire name), read from
    /// `nextChunk` as it is sent. The literal is synchronising, so nothing of the message goes before the server's
    /// `+`, and each chunk is written before the next is read: the message is never whole in memory.
    ///
    /// A server keeps an appended message only when the command ends, after its literal. `keep`, when given, is
    /// asked once the whole literal has been written: while it waits, the message is with the server but not in the
    /// mailbox, so the upload can run beside the work that decides whether the message belongs there (a Sent copy
    /// beside the SMTP transaction). When it answers false, the connection is closed before the command ends, which
    /// makes the server discard the message (RFC 3501 section 6.3.11: the message is appended only if the command
    /// completes), and `.appendWithdrawn` is thrown.
    ///
    /// - Returns: The message's UID validity and UID when the server says them (UIDPLUS `APPENDUID`), else nil.
    /// - Throws: `.unencodable` when the chunks do not add up to `size` or hold a NUL byte, and `.transport` when a
    ///   chunk cannot be read (the connection is closed then: a literal cannot be taken back); the server's refusal
    ///   as `.commandFailed`; `.appendWithdrawn` when `keep` answered false.
    public func append(
        mailbox: String,
        flags: [String] = [],
        size: Int,
        keep: (@Sendable () async -> Bool)? = nil,
        nextChunk: @Sendable () async throws -> [UInt8]?
    ) async throws(IMAPError) -> (uidValidity: UInt32, uid: UInt32)? {
        guard !closed else { throw .connectionClosed }
        guard size > 0 else { throw .unencodable(reason: "an appended message cannot be empty") }
        encoder.literalPlus = capabilities.contains("LITERAL+")
        var encoded = try encoder.encode(IMAPCommand("APPEND", [.string(mailbox), .list(flags.map { .atom($0) })]))
        // The message's literal goes on the command's last line, in place of its line break.
        encoded.parts[encoded.parts.count - 1].removeLast(2)
        encoded.parts[encoded.parts.count - 1] += Array(" {\(size)}\r\n".utf8)
        onCommand?("APPEND")
        var untagged: [UntaggedResponse] = []
        for part in encoded.parts {
            try await write(part)
            waiting: while true {
                switch try await nextResponseOrWakeUp(body: nil, wakeUp: false) {
                case .continuation?: break waiting
                case .untagged(let response)?: absorb(response, into: &untagged)
                case .tagged(let tagged)?:
                    guard tagged.tag == encoded.tag else { throw .unexpectedResponse(expected: "'+'") }
                    try check(tagged, command: "APPEND")
                    throw .unexpectedResponse(expected: "'+'")
                case nil: break
                }
            }
        }
        var sent = 0
        while true {
            let chunk: [UInt8]?
            do {
                chunk = try await nextChunk()
            } catch {
                await closeChannel()
                throw .transport("The message to append could not be read; nothing was stored.")
            }
            guard let chunk else { break }
            guard sent + chunk.count <= size, !chunk.contains(0) else {
                await closeChannel()
                throw .unencodable(reason: "the message is longer than announced or holds a NUL byte")
            }
            try await write(chunk)
            sent += chunk.count
        }
        guard sent == size else {
            await closeChannel()
            throw .unencodable(reason: "the message is shorter than announced")
        }
        if let keep, await !keep() {
            await closeChannel()
            throw .appendWithdrawn
        }
        try await write([0x0D, 0x0A])
        while true {
            switch try await nextResponseOrWakeUp(body: nil, wakeUp: false) {
            case .untagged(let response)?: absorb(response, into: &untagged)
            case .tagged(let tagged)?:
                guard tagged.tag == encoded.tag else { throw .unexpectedResponse(expected: "the tag \(encoded.tag)") }
                try check(tagged, command: "APPEND")
                if case .appendUID(let validity, let uid)? = tagged.code, let number = UInt32(uid) {
                    return (validity, number)
                }
                return nil
            case .continuation?:
                await closeChannel()
                throw .unexpectedResponse(expected: "no continuation")
            case nil: break
            }
        }
    }

    /// NOOP: lets the server report changes; returns them.
    public func noop() async throws(IMAPError) -> [UntaggedResponse] {
        try await run(IMAPCommand("NOOP"))
    }

    /// Untagged responses not consumed by a command (flag changes, EXISTS, EXPUNGE…), oldest first; clears them.
    public func takeUnsolicited() -> [UntaggedResponse] {
        defer { unsolicited = [] }
        return unsolicited
    }

    /// LOGOUT, then closes the connection (also when the server does not answer properly).
    public func logout() async {
        if !closed { _ = try? await run(IMAPCommand("LOGOUT")) }
        await closeChannel()
    }

    // MARK: - Plumbing

    /// A FETCH response's items as a message, and whether it carried a UID.
    private static func message(_ items: [FetchItem]) -> (FetchedMessage, Bool) {
        var message = FetchedMessage(uid: 0)
        var hasUID = false
        for item in items {
            switch item {
            case .uid(let uid):
                message.uid = uid
                hasUID = true
            case .flags(let flags): message.flags = flags
            case .internalDate(let seconds): message.internalDate = seconds
            case .rfc822Size(let size): message.size = size
            case .modSeq(let value): message.modSeq = value
            case .body(let section, _, let data) where section.isEmpty: message.body = data ?? []
            default: break
            }
        }
        return (message, hasUID)
    }

    private func apply(_ code: ResponseCode, to mailbox: inout SelectedMailbox) {
        switch code {
        case .uidValidity(let value): mailbox.uidValidity = value
        case .uidNext(let value): mailbox.uidNext = value
        case .highestModSeq(let value): mailbox.highestModSeq = value
        case .noModSeq: mailbox.highestModSeq = nil
        case .permanentFlags(let flags): mailbox.permanentFlags = flags
        case .readOnly: mailbox.readOnly = true
        case .readWrite: mailbox.readOnly = false
        default: break
        }
    }

    private func refreshCapabilitiesIfNeeded() async throws(IMAPError) {
        // Servers may change capabilities after login without a CAPABILITY code; ask once.
        _ = try await run(IMAPCommand("CAPABILITY"))
    }

    private func run(
        _ command: IMAPCommand,
        name: String? = nil,
        body: ((IMAPResponseEvent) -> Void)? = nil
    ) async throws(IMAPError) -> [UntaggedResponse] {
        let (untagged, done) = try await runRaw(command, body: body)
        try check(done, command: name ?? command.name)
        return untagged
    }

    private func runRaw(
        _ command: IMAPCommand,
        body: ((IMAPResponseEvent) -> Void)? = nil
    ) async throws(IMAPError) -> ([UntaggedResponse], TaggedResponse) {
        guard !closed else { throw .connectionClosed }
        encoder.literalPlus = capabilities.contains("LITERAL+")
        let encoded = try encoder.encode(command)
        onCommand?(command.name)
        var untagged: [UntaggedResponse] = []
        for (index, part) in encoded.parts.enumerated() {
            try await write(part)
            guard index + 1 < encoded.parts.count else { break }
            // A synchronising literal: wait for `+` (or the command's refusal).
            waiting: while true {
                switch try await nextResponseOrWakeUp(body: body, wakeUp: false) {
                case .continuation?: break waiting
                case .untagged(let response)?: absorb(response, into: &untagged)
                case .tagged(let tagged)?:
                    guard tagged.tag == encoded.tag else { throw .unexpectedResponse(expected: "'+'") }
                    return (untagged, tagged)
                case nil: break
                }
            }
        }
        while true {
            switch try await nextResponseOrWakeUp(body: body, wakeUp: false) {
            case .untagged(let response)?: absorb(response, into: &untagged)
            case .tagged(let tagged)?:
                guard tagged.tag == encoded.tag else { throw .unexpectedResponse(expected: "the tag \(encoded.tag)") }
                if case .capability(let names)? = tagged.code { setCapabilities(names) }
                return (untagged, tagged)
            case .continuation?:
                await closeChannel()
                throw .unexpectedResponse(expected: "no continuation")
            case nil: break
            }
        }
    }

    private func absorb(_ response: UntaggedResponse, into untagged: inout [UntaggedResponse]) {
        switch response {
        case .capability(let names): setCapabilities(names)
        case .condition(_, .capability(let names)?, _): setCapabilities(names)
        case .enabled(let names): enabled.formUnion(names.map { $0.uppercased() })
        case .exists(let count): selected?.exists = count
        case .expunge:
            expungedCount += 1
            if let exists = selected?.exists, exists > 0 { selected?.exists = exists - 1 }
        case .vanished(false, let set):
            let removed = (UIDSet.ranges(set) ?? []).reduce(0) { $0 + $1.count }
            expungedCount += removed
            if let exists = selected?.exists { selected?.exists = exists - UInt32(clamping: min(removed, Int(exists))) }
        default: break
        }
        untagged.append(response)
        if case .condition(.bye, _, _) = response { closed = true }
    }

    private func check(_ done: TaggedResponse, command: String) throws(IMAPError) {
        guard done.status == .ok else {
            throw .commandFailed(
                command: command,
                status: done.status.rawValue,
                code: done.code.map(Self.codeName),
                text: IMAPError.serverText(done.text)
            )
        }
    }

    private static func codeName(_ code: ResponseCode) -> String {
        switch code {
        case .other(let name, _): name
        case .alert: "ALERT"
        case .tryCreate: "TRYCREATE"
        case .readOnly: "READ-ONLY"
        default: "\(code)".split(separator: "(").first.map(String.init) ?? ""
        }
    }

    /// The next response; nil for an IDLE wake-up when `wakeUp`. Body events go to `body`.
    private func nextResponseOrWakeUp(
        body: ((IMAPResponseEvent) -> Void)?,
        wakeUp: Bool
    ) async throws(IMAPError) -> IMAPResponse? {
        while true {
            switch await queue.next() {
            case .wakeUp:
                if wakeUp { return nil }
            case .failed(let error):
                await closeChannel()
                throw error
            case .event(.response(let response)):
                return response
            case .event(let event):
                body?(event)
            }
        }
    }

    private func nextResponse(body: ((IMAPResponseEvent) -> Void)?) async throws(IMAPError) -> IMAPResponse {
        while true {
            if let response = try await nextResponseOrWakeUp(body: body, wakeUp: false) { return response }
        }
    }

    private func write(_ bytes: [UInt8]) async throws(IMAPError) {
        guard !closed else { throw .connectionClosed }
        let buffer = channel.allocator.buffer(bytes: bytes)
        do {
            try await channel.writeAndFlush(buffer)
        } catch {
            await closeChannel()
            throw .connectionClosed
        }
    }

    private func closeChannel() async {
        closed = true
        try? await channel.close()
    }
}
