import CofferTransport
import Foundation
import NIOCore
import NIOPosix

/// The user name and password for SMTP AUTH. The password never appears in `description`, `dump` or an error.
public struct SMTPCredentials: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The user name (the IMAP account's, by default).
    public var user: String
    /// The password, sent only over a verified TLS connection.
    public var password: String

    /// Creates credentials.
    public init(user: String, password: String) {
        self.user = user
        self.password = password
    }

    /// The user name and `<redacted>`.
    public var description: String { "SMTPCredentials(user: \(user), password: <redacted>)" }
    /// The same as ``description``.
    public var debugDescription: String { description }
    /// Nothing: `dump` shows no field.
    public var customMirror: Mirror { Mirror(self, children: []) }
}

/// How long the client waits, all enforced in the channel's pipeline.
public struct SMTPTimeouts: Sendable, Equatable {
    /// The limit for the TCP connection and, separately, for the TLS handshake.
    public var connect: TimeAmount
    /// The longest time in which no byte arrives and none is written while the connection is open; then the
    /// connection is dropped with ``SMTPError/timedOut(seconds:)``. It covers a server that does not answer and one
    /// that stops taking a message's data.
    public var idle: TimeAmount

    /// Creates timeouts (20 s to connect, 120 s of silence; RFC 5321 4.5.3.2 suggests minutes per step, and
    /// submission servers answer at once).
    public init(connect: TimeAmount = .seconds(20), idle: TimeAmount = .seconds(120)) {
        self.connect = connect
        self.idle = idle
    }
}

/// What the server announced in its EHLO reply over TLS (what it said before TLS is forgotten).
public struct SMTPCapabilities: Sendable, Equatable {
    /// Each extension keyword (upper-cased) with its parameters.
    public var keywords: [String: [String]]

    /// Parses EHLO reply lines after the first.
    init(ehloLines: [String]) {
        var keywords: [String: [String]] = [:]
        for line in ehloLines.dropFirst() {
            let words = line.split(separator: " ").map(String.init)
            guard let keyword = words.first?.uppercased() else { continue }
            keywords[keyword] = Array(words.dropFirst())
        }
        self.keywords = keywords
    }

    /// Whether the server offers `keyword`.
    public func offers(_ keyword: String) -> Bool { keywords[keyword.uppercased()] != nil }

    /// The SASL mechanisms of `AUTH`, upper-cased.
    public var authMechanisms: Set<String> { Set((keywords["AUTH"] ?? []).map { $0.uppercased() }) }

    /// The message size limit of `SIZE` (RFC 1870) in bytes; nil without SIZE, without a number or with 0 (no limit).
    public var sizeLimit: Int? {
        guard let value = keywords["SIZE"]?.first.flatMap({ Int($0) }), value > 0 else { return nil }
        return value
    }
}

/// What the server said when it took a message.
public struct SMTPSendReceipt: Sendable, Equatable {
    /// The recipients the server accepted (all of those given: a refused one fails the send).
    public var recipients: [String]
    /// The server's final reply to the data (often with its queue ID).
    public var reply: SMTPServerReply
    /// The bytes sent as the message's data, framing included (dot-stuffing, line ends, the final dot).
    public var dataBytes: Int
}

/// An SMTP submission client (RFC 6409, RFC 5321) over one pinned TLS connection; the actor is the connection's
/// only owner.
///
/// ``connect(to:credentials:timeouts:helloName:)`` returns a client that is connected over verified TLS, has sent
/// EHLO over TLS and has authenticated; ``send(from:to:declaredSize:body:)`` submits one message (call it again for
/// more over the same connection); ``quit()`` ends the session. Every failure is an ``SMTPError`` whose
/// ``SMTPError/failureClass`` says whether to retry.
///
/// - Warning: A refused recipient fails the whole send and nothing is sent to anyone (``SMTPError/recipientsRefused(_:)``):
///   the outbox can then retry the message without duplicating it to the recipients that were accepted.
public actor SMTPClient {
    private let channel: any Channel
    private let queue: SMTPReplyQueue
    private let handler: NIOLoopBound<SMTPChannelHandler>
    private let helloName: String
    private let reports: PinReportUploader?
    private let onCommand: (@Sendable (String) -> Void)?
    private var closed = false
    private var verified = false
    private var sending = false
    /// What the server announced over TLS.
    public private(set) var capabilities = SMTPCapabilities(ehloLines: [])
    /// What the pin policy decided about the server's validated chain.
    public private(set) var pinEvaluation: PinEvaluation
    /// Whether the connection is still open (false after a failure or QUIT: make a new client).
    public var isConnected: Bool { !closed }

    private init(
        channel: any Channel,
        queue: SMTPReplyQueue,
        handler: NIOLoopBound<SMTPChannelHandler>,
        helloName: String,
        reports: PinReportUploader?,
        pinEvaluation: PinEvaluation,
        onCommand: (@Sendable (String) -> Void)?
    ) {
        self.channel = channel
        self.queue = queue
        self.handler = handler
        self.helloName = helloName
        self.reports = reports
        self.pinEvaluation = pinEvaluation
        self.onCommand = onCommand
    }

    /// Connects to `endpoint` over pinned TLS (implicit TLS, or STARTTLS when the endpoint says so), reads the
    /// greeting, sends EHLO over TLS and, with `credentials`, authenticates (AUTH PLAIN, or LOGIN when the server
    /// offers only that).
    ///
    /// The certificate chain, host name and pins are checked inside the TLS handshake: a connection that fails them
    /// is closed before a byte is sent over it, so no credentials and no EHLO reach an unverified server. With
    /// STARTTLS, the plaintext part is the greeting, one EHLO and STARTTLS; any byte the server sends after its 220
    /// to STARTTLS and before the handshake completes fails the connection, and the plaintext EHLO's answer is
    /// forgotten.
    ///
    /// - Parameters:
    ///   - endpoint: Host, port, security, pins, CA bundle, connect address, pin report URL.
    ///   - credentials: The user and password, or nil to send without AUTH (a server that relays for us).
    ///   - timeouts: The connect and idle limits.
    ///   - helloName: The EHLO argument: an address literal by default, which says nothing about this machine.
    /// - Throws: ``SMTPError``: `.transport` for a TLS, certificate or pin failure (class `security`) or a refused
    ///   connection (`transient`); `.startTLSNotOffered`, `.startTLSRefused`, `.plaintextAfterStartTLS`
    ///   (`security`); `.greetingRefused`; `.authenticationFailed` (535 is `permanent`), `.noUsableAuthentication`.
    public static func connect(
        to endpoint: ServerEndpoint,
        credentials: SMTPCredentials?,
        timeouts: SMTPTimeouts = .init(),
        helloName: String = "[127.0.0.1]"
    ) async throws(SMTPError) -> SMTPClient {
        let tls: (configuration: PinnedTLSConfiguration, reports: PinReportUploader?)
        do {
            tls = try endpoint.tlsConfiguration(timeout: timeouts.connect)
        } catch {
            throw .transport(error)
        }
        do {
            return try await connect(
                tls: tls.configuration,
                startTLS: endpoint.security == .startTLS,
                credentials: credentials,
                timeouts: timeouts,
                helloName: helloName,
                reports: tls.reports
            )
        } catch {
            await tls.reports?.finish()
            throw error
        }
    }

    /// ``connect(to:credentials:timeouts:helloName:)`` with a TLS configuration made elsewhere (tests), the parser's
    /// limits, and a hook that sees every command's verb (never its arguments).
    package static func connect(
        tls: PinnedTLSConfiguration,
        startTLS: Bool,
        credentials: SMTPCredentials?,
        timeouts: SMTPTimeouts = .init(),
        helloName: String = "[127.0.0.1]",
        limits: SMTPReplyParser.Limits = .init(),
        reports: PinReportUploader? = nil,
        onCommand: (@Sendable (String) -> Void)? = nil
    ) async throws(SMTPError) -> SMTPClient {
        _ = try SMTPCommand.ehlo(helloName).encoded()
        let queue = SMTPReplyQueue()
        let idle = timeouts.idle
        let idleSeconds = Int(idle.nanoseconds / 1_000_000_000)
        let addHandlers: @Sendable (any Channel) -> EventLoopFuture<NIOLoopBound<SMTPChannelHandler>> = { channel in
            channel.eventLoop.makeCompletedFuture {
                let handler = SMTPChannelHandler(limits: limits, queue: queue, idleSeconds: idleSeconds)
                try channel.pipeline.syncOperations.addHandlers(IdleStateHandler(allTimeout: idle), handler)
                return NIOLoopBound(handler, eventLoop: channel.eventLoop)
            }
        }
        var configuration = tls
        configuration.timeout = timeouts.connect
        let client: SMTPClient
        if startTLS {
            let opened: (channel: any Channel, handler: NIOLoopBound<SMTPChannelHandler>)
            do {
                opened = try await PinnedTLS.connectPlaintext(configuration) { channel in
                    addHandlers(channel).map { (channel, $0) }
                }
            } catch {
                throw .transport(error)
            }
            client = SMTPClient(
                channel: opened.channel,
                queue: queue,
                handler: opened.handler,
                helloName: helloName,
                reports: reports,
                pinEvaluation: .notPinned,
                onCommand: onCommand
            )
            try await client.readGreeting()
            try await client.startTLS(configuration)
        } else {
            let connection: PinnedConnection<(any Channel, NIOLoopBound<SMTPChannelHandler>)>
            do {
                connection = try await PinnedTLS.connect(configuration) { channel in
                    addHandlers(channel).map { (channel, $0) }
                }
            } catch {
                throw .transport(error)
            }
            client = SMTPClient(
                channel: connection.output.0,
                queue: queue,
                handler: connection.output.1,
                helloName: helloName,
                reports: reports,
                pinEvaluation: connection.pinEvaluation,
                onCommand: onCommand
            )
            await client.markVerified()
            try await client.readGreeting()
            try await client.hello()
        }
        if let credentials { try await client.authenticate(credentials) }
        return client
    }

    private func markVerified() { verified = true }

    private func readGreeting() async throws(SMTPError) {
        let greeting = try await nextReply()
        guard greeting.code == 220 else {
            await closeChannel()
            throw .greetingRefused(SMTPServerReply(greeting))
        }
    }

    /// EHLO; its reply's extensions become ``capabilities``.
    private func hello() async throws(SMTPError) {
        let reply = try await run(.ehlo(helloName))
        guard reply.code == 250 else {
            await closeChannel()
            throw .commandRefused(command: "EHLO", reply: SMTPServerReply(reply))
        }
        capabilities = SMTPCapabilities(ehloLines: reply.lines)
    }

    /// STARTTLS (RFC 3207, RFC 8314): refuses a server without it, upgrades with the full pinned checks, refuses any
    /// plaintext after the 220, and forgets what the server said before TLS (EHLO is sent again).
    private func startTLS(_ tls: PinnedTLSConfiguration) async throws(SMTPError) {
        try await hello()
        guard capabilities.offers("STARTTLS") else {
            await closeChannel()
            throw .startTLSNotOffered
        }
        capabilities = SMTPCapabilities(ehloLines: [])
        let handler = handler
        do {
            try await channel.eventLoop.submit { handler.value.armForStartTLS() }.get()
        } catch {
            await closeChannel()
            throw .connectionClosed
        }
        let reply: SMTPReply
        do {
            reply = try await run(.startTLS)
        } catch {
            await closeChannel()
            throw error
        }
        guard reply.code == 220 else {
            await closeChannel()
            throw .startTLSRefused(SMTPServerReply(reply))
        }
        let connection: PinnedConnection<any Channel>
        do {
            connection = try await PinnedTLS.startTLS(on: channel, tls) { channel in
                try channel.pipeline.syncOperations.handler(type: SMTPChannelHandler.self).resumeOverTLS()
            }
        } catch {
            closed = true
            if queue.failure == .plaintextAfterStartTLS { throw .plaintextAfterStartTLS }
            throw .transport(error)
        }
        pinEvaluation = connection.pinEvaluation
        verified = true
        try await hello()
    }

    /// AUTH PLAIN (RFC 4616) with its initial response, or AUTH LOGIN when the server offers only that.
    private func authenticate(_ credentials: SMTPCredentials) async throws(SMTPError) {
        guard verified else { throw .notReady(reason: "authentication needs a verified TLS connection") }
        let mechanisms = capabilities.authMechanisms
        let reply: SMTPReply
        if mechanisms.contains("PLAIN") {
            reply = try await run(.authPlain(user: credentials.user, password: credentials.password))
            if reply.code == 334 {  // a server that ignores the initial response: cancel (RFC 4954 4)
                let cancelled = try await run(.saslCancel)
                await closeChannel()
                throw .unexpectedReply(command: "AUTH", reply: SMTPServerReply(cancelled))
            }
        } else if mechanisms.contains("LOGIN") {
            var step = try await run(.authLogin)
            for secret in [credentials.user, credentials.password] where step.code == 334 {
                step = try await run(.saslResponse(Array(secret.utf8)))
            }
            reply = step
        } else {
            await closeChannel()
            throw .noUsableAuthentication(offered: mechanisms.sorted())
        }
        guard reply.code == 235 else {
            await closeChannel()
            throw .authenticationFailed(SMTPServerReply(reply))
        }
    }

    // MARK: - Sending

    /// Submits one message: MAIL FROM (with SIZE when the server offers it and `declaredSize` is given), RCPT TO for
    /// each recipient, then DATA with the body streamed from `body`, framed as it goes (``SMTPDataEncoder``: line
    /// ends made CRLF, lines starting with a dot stuffed, the final dot). The body is never held whole: each chunk
    /// is framed, written, and the next is read only while the channel is writable.
    ///
    /// - Parameters:
    ///   - from: The envelope sender (`""` for the null sender).
    ///   - recipients: Every To, Cc and Bcc address, each once.
    ///   - declaredSize: The message's size in bytes if known, checked against the server's SIZE before anything
    ///     is sent and declared in MAIL FROM.
    ///   - body: The message's bytes (RFC 5322, header and body), in chunks of any size; `MessageWriter`'s output.
    /// - Returns: The accepted recipients and the server's final reply.
    /// - Throws: ``SMTPError``. `.recipientsRefused` when any recipient is refused (the transaction is reset and
    ///   nothing is sent); `.commandRefused` for MAIL, DATA or the end of the data, with the server's reason
    ///   (5xx `permanent`, 4xx `transient`); `.replyLostAfterData` when the connection ends after the final dot and
    ///   before the reply (the message may have been delivered); `.messageUnreadable` when `body` throws (the
    ///   connection is dropped so that the server discards the partial message).
    public func send(
        from: String,
        to recipients: [String],
        declaredSize: Int? = nil,
        body: some AsyncSequence<[UInt8], any Error> & Sendable
    ) async throws(SMTPError) -> SMTPSendReceipt {
        guard !closed else { throw .notReady(reason: "the connection is closed") }
        guard verified else { throw .notReady(reason: "the connection is not verified TLS") }
        guard !sending else { throw .notReady(reason: "another message is being sent on this connection") }
        guard !recipients.isEmpty else { throw .invalidAddress(reason: "a message needs at least one recipient") }
        try SMTPCommand.check(from, allowEmpty: true)
        for recipient in recipients { try SMTPCommand.check(recipient, allowEmpty: false) }
        if let declaredSize, let limit = capabilities.sizeLimit, declaredSize > limit {
            throw .messageTooLarge(size: declaredSize, limit: limit)
        }
        sending = true
        defer { sending = false }

        let mail = try await run(.mail(from: from, size: capabilities.offers("SIZE") ? declaredSize : nil))
        guard mail.code == 250 else {
            await reset()
            throw .commandRefused(command: "MAIL FROM", reply: SMTPServerReply(mail))
        }
        var refusals: [SMTPRecipientRefusal] = []
        for recipient in recipients {
            let reply = try await run(.rcpt(to: recipient))
            if reply.code != 250 && reply.code != 251 {
                refusals.append(SMTPRecipientRefusal(address: recipient, reply: SMTPServerReply(reply)))
            }
        }
        guard refusals.isEmpty else {
            await reset()
            throw .recipientsRefused(refusals)
        }
        let data = try await run(.data)
        guard data.code == 354 else {
            await reset()
            if data.isPositive { throw .unexpectedReply(command: "DATA", reply: SMTPServerReply(data)) }
            throw .commandRefused(command: "DATA", reply: SMTPServerReply(data))
        }
        let dataBytes = try await stream(body)
        let final: SMTPReply
        do {
            final = try await queue.next()
        } catch {
            await closeChannel()
            if error == .cancelled { throw error }
            throw .replyLostAfterData
        }
        guard final.code == 250 else {
            if final.code / 100 == 4 || final.code / 100 == 5 {
                throw .commandRefused(command: "the message data", reply: SMTPServerReply(final))
            }
            await closeChannel()
            throw .unexpectedReply(command: "the message data", reply: SMTPServerReply(final))
        }
        return SMTPSendReceipt(recipients: recipients, reply: SMTPServerReply(final), dataBytes: dataBytes)
    }

    /// Frames and writes the body, then the final dot; waits for writability after every write of about 64 KiB.
    private func stream(_ body: some AsyncSequence<[UInt8], any Error> & Sendable) async throws(SMTPError) -> Int {
        var encoder = SMTPDataEncoder()
        var pending: [UInt8] = []
        pending.reserveCapacity(Self.writeSize + 1024)
        var total = 0
        var iterator = body.makeAsyncIterator()
        while true {
            let chunk: [UInt8]?
            do {
                chunk = try await iterator.next()
            } catch let error as SMTPError {
                await closeChannel()
                throw error
            } catch {
                await closeChannel()
                if error is CancellationError || Task.isCancelled { throw .cancelled }
                throw .messageUnreadable(reason: SMTPServerReply.sanitized("\(error)"))
            }
            guard let chunk else { break }
            var offset = 0
            while offset < chunk.count {
                let end = min(chunk.count, offset + Self.writeSize)
                encoder.encode(chunk[offset..<end], into: &pending)
                offset = end
                if pending.count >= Self.writeSize {
                    total += pending.count
                    try await writeWithBackpressure(pending)
                    pending.removeAll(keepingCapacity: true)
                }
            }
        }
        encoder.finish(into: &pending)
        total += pending.count
        try await writeWithBackpressure(pending)
        return total
    }

    private static let writeSize = 64 * 1024

    /// Writes and flushes `bytes` without waiting for them to reach the socket, then waits until the channel is
    /// writable again (at once if its buffer is under the high-water mark).
    private func writeWithBackpressure(_ bytes: [UInt8]) async throws(SMTPError) {
        guard !closed else { throw queue.failure ?? .connectionClosed }
        let channel = channel
        let handler = handler
        let buffer = channel.allocator.buffer(bytes: bytes)
        do {
            try await channel.eventLoop.flatSubmit {
                channel.writeAndFlush(buffer).whenFailure { _ in channel.close(promise: nil) }
                return handler.value.whenWritable(eventLoop: channel.eventLoop)
            }.get()
        } catch let error as SMTPError {
            await closeChannel()
            throw error
        } catch {
            await closeChannel()
            throw queue.failure ?? .connectionClosed
        }
    }

    /// RSET after a refused transaction, so the connection can send the next message; a failure closes it.
    private func reset() async {
        guard !closed else { return }
        guard let reply = try? await run(.rset), reply.code == 250 else {
            await closeChannel()
            return
        }
    }

    /// QUIT, then closes the connection (also when the server does not answer), and lets pending pin reports go.
    /// Call it when done with the client, after a failure too. During a send it only closes the connection (the
    /// server then discards the unfinished message).
    public func quit() async {
        if !closed && !sending { _ = try? await run(.quit) }
        await closeChannel()
        await reports?.finish()
    }

    // MARK: - Plumbing

    private func run(_ command: SMTPCommand) async throws(SMTPError) -> SMTPReply {
        guard !closed else { throw queue.failure ?? .connectionClosed }
        // The client does not pipeline: a reply waiting before a command is sent answers nothing it asked, and would
        // be read as the answer to the next command (a reply injected or a server out of step).
        guard !queue.hasUnreadReply else {
            await closeChannel()
            throw .malformedReply(reason: "the server sent a reply that no command asked for")
        }
        let bytes = try command.encoded()
        onCommand?(command.verb)
        try await write(bytes)
        return try await nextReply()
    }

    private func nextReply() async throws(SMTPError) -> SMTPReply {
        do {
            return try await queue.next()
        } catch {
            await closeChannel()
            throw error
        }
    }

    private func write(_ bytes: [UInt8]) async throws(SMTPError) {
        let buffer = channel.allocator.buffer(bytes: bytes)
        do {
            try await channel.writeAndFlush(buffer)
        } catch {
            await closeChannel()
            throw queue.failure ?? .connectionClosed
        }
    }

    private func closeChannel() async {
        closed = true
        try? await channel.close()
    }
}
