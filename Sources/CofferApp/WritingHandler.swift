import CofferAgentProtocol
import CofferCompose
import CofferMIME
import CofferOutbox
import CofferStore
import Foundation

/// Writing and sending in the agent (or a command's own process): where a message starts (new, a draft, a reply or a
/// forward), drafts sealed in the store with their attachments, the outbox, and the address book.
///
/// Every message is a draft before it is queued: `send` writes the draft once with the MIME writer into the sealed
/// outbox and deletes the draft in the same transaction. The account's coordinator sends (``AccountCoordinator``,
/// `Job.send`) as background work, which never restarts the autolock.
public struct WritingHandler: Sendable {
    /// What it uses.
    public typealias Dependencies = HasAccount & HasMailStore & HasAccountCoordinator & HasOutboxEvents

    private let dependencies: any Dependencies

    /// A handler over one account's container.
    public init(dependencies: any Dependencies) { self.dependencies = dependencies }

    /// The longest body of a stored message a reply quotes or a forward includes, in bytes.
    static let maxQuotedBytes = 256 * 1024

    /// What the editor opens with: the sending address of server account `server` (or the only one) and the fields
    /// of a new message, a draft, a reply or a forward.
    ///
    /// - Throws: ``AgentFailure`` (`badRequest`) when the account has no submission server (so no sending address),
    ///   the draft or message does not exist.
    public func start(_ start: ComposeStart, server: Int64?) async throws -> ComposeContext {
        let store = try dependencies.mailStore
        let from = try await Self.sendingAddress(server, in: store)
        switch start {
        case .new:
            return ComposeContext(from: from, fields: ComposedFields(), draft: nil)
        case .draft(let id):
            let draft = try await draftInfo(id, in: store)
            return ComposeContext(from: from, fields: draft.fields, draft: draft)
        case .reply(let id, let all):
            let original = try await Self.original(id, in: store)
            let builder = ReplyBuilder(ownAddresses: [from.address], maxQuotedBytes: Self.maxQuotedBytes)
            return ComposeContext(from: from, fields: Self.fields(builder.reply(to: original, all: all)), draft: nil)
        case .forward(let id, let attachOriginal):
            let original = try await Self.original(id, in: store)
            let builder = ReplyBuilder(ownAddresses: [from.address], maxQuotedBytes: Self.maxQuotedBytes)
            let draft: ComposeDraft
            let attachments: [OutgoingAttachment]
            if attachOriginal {
                draft = builder.forward(original, attaching: try await Self.enclosedOriginal(id, from: from, in: store))
                attachments = draft.outgoingMessage(from: from).attachments
            } else {
                draft = builder.forward(original)
                attachments = try await Self.originalAttachments(try await store.message(id), from: from, in: store)
            }
            let fields = Self.fields(draft)
            guard !attachments.isEmpty else { return ComposeContext(from: from, fields: fields, draft: nil) }
            return ComposeContext(from: from, fields: fields, draft: try await holding(attachments, fields, in: store))
        }
    }

    /// A new draft of `fields` holding `attachments` (sealed as they are added), or none if one fails.
    private func holding(
        _ attachments: [OutgoingAttachment],
        _ fields: ComposedFields,
        in store: MailStore
    ) async throws -> DraftInfo {
        let id = try await store.saveDraft(Self.content(fields))
        do {
            for attachment in attachments { try await store.addDraftAttachment(to: id, attachment) }
        } catch {
            try? await store.deleteDraft(id)
            throw error
        }
        return try await draftInfo(id, in: store)
    }

    /// The draft record of what the person wrote.
    private static func content(_ fields: ComposedFields) -> DraftContent {
        DraftContent(
            to: fields.to,
            cc: fields.cc,
            bcc: fields.bcc,
            subject: fields.subject,
            inReplyTo: fields.inReplyTo,
            references: fields.references,
            text: fields.text
        )
    }

    /// Saves `fields` as draft `id` (or a new draft), then seals each file of `attach` (absolute paths) into it.
    ///
    /// - Throws: ``AgentFailure`` (`badRequest`) for a relative path or one that is not a readable regular file,
    ///   before anything is saved.
    public func saveDraft(id: Int64?, fields: ComposedFields, attach: [String]) async throws -> DraftInfo {
        let store = try dependencies.mailStore
        for path in attach { try Self.checkAttachable(path) }
        let saved = try await store.saveDraft(Self.content(fields), id: id)
        for path in attach {
            try await store.addDraftAttachment(
                to: saved,
                contentsOf: path,
                filename: (path as NSString).lastPathComponent,
                contentType: Self.contentType(of: path)
            )
        }
        return try await draftInfo(saved, in: store)
    }

    /// Every draft, most recently saved first.
    public func drafts() async throws -> [DraftInfo] {
        let store = try dependencies.mailStore
        var result: [DraftInfo] = []
        for summary in try await store.drafts() { result.append(try await draftInfo(summary.id, in: store)) }
        return result.sorted { $0.updated > $1.updated }
    }

    /// Deletes draft `id` with its attachments.
    public func deleteDraft(_ id: Int64) async throws {
        try await dependencies.mailStore.deleteDraft(id)
    }

    /// Queues draft `id` through server account `server` (or the only one), not before `delay` seconds from now:
    /// the MIME writer writes it once into the sealed outbox and the draft is deleted in the same transaction. The
    /// files of `attach` (absolute paths) follow the draft's own attachments, read straight into the outbox: a
    /// message sent at once needs no sealed copy of them in the draft first. With no delay, the account's
    /// coordinator queues it and sends it before this returns, streaming it to the server while its outbox file is
    /// written (``OutboxSender/send(_:accountID:replacingDraft:)``).
    ///
    /// - Returns: The message as it stands after the attempt (or queued, with a delay).
    /// - Throws: ``AgentFailure`` (`badRequest`) for a draft without a recipient, an account without a submission
    ///   server, a file of `attach` that cannot be attached, or (with `openPGP`) a recipient without a key or no key
    ///   of the user's (before anything is queued); the writer's refusal
    ///   (``StoreError/compose(_:)``).
    public func send(
        draft id: Int64,
        server: Int64?,
        delay: Int,
        attach: [String] = [],
        openPGP: OpenPGPSending? = nil
    ) async throws -> OutboxEntry {
        let store = try dependencies.mailStore
        for path in attach { try Self.checkAttachable(path) }
        let chosen = try await AccountCoordinator.serverAccount(server, in: store)
        let from = try await Self.sendingAddress(chosen.id, in: store)
        let draft = try await store.draft(id)
        let content = draft.content
        guard !(content.to.isEmpty && content.cc.isEmpty && content.bcc.isEmpty) else {
            throw AgentFailure(.badRequest, "The draft has no recipient; add one to To, Cc or Bcc.")
        }
        var message = OutgoingMessage(
            from: from,
            to: content.to,
            cc: content.cc,
            bcc: content.bcc,
            subject: content.subject,
            inReplyTo: content.inReplyTo,
            references: content.references,
            text: content.text,
            attachments: try await store.outgoingAttachments(ofDraft: id)
                + attach.map {
                    MailStore.fileAttachment(
                        path: $0,
                        filename: ($0 as NSString).lastPathComponent,
                        contentType: Self.contentType(of: $0)
                    )
                }
        )
        // Autocrypt Level 1: the user's key and prefer-encrypt travel with every message from an account that has one.
        message.autocrypt = try await AutocryptOutgoing.header(from: from, in: store)
        // Level 1's recommendation: encrypted by default when the user and every recipient prefer it, unless
        // `--no-encrypt`; otherwise as asked.
        var openPGP = openPGP
        var autocryptDecision: String?
        if openPGP?.encrypt != true, message.autocrypt?.preferEncryptMutual == true,
            await AutocryptOutgoing.recommendsEncryption(message, in: store)
        {
            if openPGP?.noEncrypt == true {
                autocryptDecision = "not-encrypted"
            } else {
                openPGP = OpenPGPSending(sign: openPGP?.sign ?? false, encrypt: true)
                autocryptDecision = "encrypted"
            }
        }
        // Signed and encrypted here, as the person's request, so the outbox never needs a secret key.
        if let openPGP {
            message = try await OpenPGPOutgoing.protect(
                message,
                sign: openPGP.sign,
                encrypt: openPGP.encrypt,
                in: store
            )
        }
        if delay <= 0 {
            var sent = try await entry(
                after: dependencies.coordinator.send(message, server: chosen.id, replacingDraft: id)
            )
            sent.autocrypt = autocryptDecision
            return sent
        }
        let item = try await store.enqueue(
            message,
            accountID: chosen.id,
            sendAfter: Date().addingTimeInterval(TimeInterval(delay)),
            replacingDraft: id
        )
        // The agent's outbox service waits for its time (a command without an agent sends it itself).
        try dependencies.outboxEvents.changed(dependencies.account)
        var queued = try await entry(after: item)
        queued.autocrypt = autocryptDecision
        return queued
    }

    /// Sends every due message of server account `server` (or the only one) now.
    public func flush(server: Int64?) async throws -> OutboxReport {
        let store = try dependencies.mailStore
        let chosen = try await AccountCoordinator.serverAccount(server, in: store)
        return try await dependencies.coordinator.send(server: chosen.id)
    }

    /// The outbox, oldest first.
    public func outbox() async throws -> [OutboxEntry] {
        try await dependencies.mailStore.outbox().map(OutboxEntry.init)
    }

    /// Queues a failed message for a new attempt now (its attempts counted from zero) and sends it.
    public func retry(_ id: Int64) async throws -> OutboxEntry {
        let store = try dependencies.mailStore
        try await store.retry(id)
        guard let item = try await store.outbox().first(where: { $0.id == id }) else {
            throw StoreError.outboxItemNotFound(id)
        }
        _ = try await dependencies.coordinator.send(server: item.accountID)
        return try await entry(after: item)
    }

    /// `item` as the outbox holds it now, or as sent once its Sent copy was stored and it left the outbox.
    private func entry(after item: OutboxItem) async throws -> OutboxEntry {
        if let current = try await outbox().first(where: { $0.id == item.id }) { return current }
        var sent = item
        sent.state = .sent
        return OutboxEntry(sent)
    }

    /// Takes a queued or failed message back out of the outbox.
    public func cancel(_ id: Int64) async throws {
        try await dependencies.mailStore.cancel(id)
    }

    /// The address book: every contact, or those a word of whose name or address starts with `query`.
    public func contacts(matching query: String?) async throws -> [ContactInfo] {
        let store = try dependencies.mailStore
        let found: [Contact]
        if let query {
            found = try await store.contacts(matching: query)
        } else {
            found = try await store.allContacts()
        }
        let keys = try await Self.contactKeyFingerprints(in: store)
        return found.map {
            ContactInfo(
                id: $0.id,
                name: $0.name,
                address: $0.address,
                timesSeen: $0.timesSeen,
                openPGPKeys: keys[$0.address]
            )
        }
    }

    /// The fingerprints of the correspondents' certificates by canonical address.
    static func contactKeyFingerprints(in store: MailStore) async throws -> [String: [String]] {
        var result: [String: [String]] = [:]
        for entry in try await store.contactKeys() {
            for address in entry.addresses { result[address, default: []].append(entry.fingerprint) }
        }
        return result
    }

    /// Adds (or names) a contact.
    public func addContact(name: String?, address: String) async throws -> ContactInfo {
        let contact = try await dependencies.mailStore.addContact(name: name, address: address)
        return ContactInfo(id: contact.id, name: contact.name, address: contact.address, timesSeen: contact.timesSeen)
    }

    /// The whole address book as vCard 4.0 text.
    public func vCards() async throws -> String {
        MailStore.vCard(for: try await dependencies.mailStore.allContacts())
    }

    // MARK: - Pieces

    /// The sending address of server account `id` (or the only one).
    static func sendingAddress(_ id: Int64?, in store: MailStore) async throws -> MailAddress {
        let chosen = try await AccountCoordinator.serverAccount(id, in: store)
        guard let submission = chosen.server.submission else {
            throw AgentFailure(
                .badRequest,
                "The mail server account \(chosen.id) has no SMTP submission server, so mail cannot be sent from it."
            )
        }
        return submission.address
    }

    private func draftInfo(_ id: Int64, in store: MailStore) async throws -> DraftInfo {
        let draft = try await store.draft(id)
        let content = draft.content
        return DraftInfo(
            id: draft.id,
            fields: ComposedFields(
                to: content.to,
                cc: content.cc,
                bcc: content.bcc,
                subject: content.subject,
                text: content.text,
                inReplyTo: content.inReplyTo,
                references: content.references
            ),
            attachments: draft.attachments.map { .init(id: $0.id, filename: $0.filename, size: $0.size) },
            updated: draft.updated
        )
    }

    /// A stored message as the reply builder reads it: its headers as received (but its content headers), and its
    /// text (or, without one, its HTML, which the builder renders as text) as the one body part. The store keeps a
    /// message's parts, not its bytes.
    static func original(_ id: Int64, in store: MailStore) async throws -> MIMEMessage {
        let detail = try await store.readMessage(id)
        var bytes: [UInt8] = []
        for header in detail.headers where !header.name.lowercased().hasPrefix("content-") {
            guard header.name.lowercased() != "mime-version" else { continue }
            bytes += Array("\(header.name):\(header.rawValue)\r\n".utf8)
        }
        let isHTML = detail.textBody == nil && detail.htmlBody != nil
        let body = String((detail.textBody ?? detail.htmlBody ?? "").utf8.prefix(maxQuotedBytes * 2)) ?? ""
        bytes += Array(
            ("MIME-Version: 1.0\r\nContent-Type: text/\(isHTML ? "html" : "plain"); charset=utf-8\r\n"
                + "Content-Transfer-Encoding: 8bit\r\n\r\n").utf8
        )
        bytes += Array(body.utf8)
        do {
            return try MIMEParser.parse(bytes)
        } catch {
            throw AgentFailure(.badRequest, "Message \(id) cannot be quoted: \(error)")
        }
    }

    /// The fields of a message being written, as the requests carry them.
    public static func fields(_ draft: ComposeDraft) -> ComposedFields {
        ComposedFields(
            to: draft.to,
            cc: draft.cc,
            bcc: draft.bcc,
            subject: draft.subject,
            text: draft.body,
            inReplyTo: draft.inReplyTo,
            references: draft.references
        )
    }

    /// Stored message `id` as one message to attach whole (`message/rfc822`): its header fields as received (but
    /// its content headers), then its text, HTML and attachments written again by the MIME writer. The store keeps
    /// a message's parts, not its bytes, so the body is the same content, not the same bytes; line breaks are CRLF.
    ///
    /// - Throws: ``AgentFailure`` (`badRequest`) when the result cannot travel unencoded (RFC 2046 5.2.1): a header
    ///   line over 998 octets or a NUL; the message is then forwarded inline or not at all.
    static func enclosedOriginal(_ id: Int64, from: MailAddress, in store: MailStore) async throws -> [UInt8] {
        let detail = try await store.message(id)
        var head = ""
        for header in detail.headers {
            let name = header.name.lowercased()
            guard !name.hasPrefix("content-"), name != "mime-version" else { continue }
            head += header.name + ":" + header.rawValue + "\n"
        }
        // Any line break of the stored fields (CRLF, a bare CR or LF) becomes CRLF, the form RFC 5322 requires.
        head = head.replacingOccurrences(of: "\r\n", with: "\n").replacingOccurrences(of: "\r", with: "\n")
            .replacingOccurrences(of: "\n", with: "\r\n")
        let body = OutgoingMessage(
            from: from,
            text: detail.textBody ?? "",
            html: detail.htmlBody,
            attachments: try await originalAttachments(detail, from: from, in: store)
        )
        let written: [UInt8]
        do {
            written = try MessageWriter.bytes(of: body).bytes
        } catch {
            throw AgentFailure(.badRequest, "Message \(id) cannot be attached whole: \(error)")
        }
        // The writer's own header fields end with its MIME-Version line; what follows is the body and its type.
        guard let mimeVersion = written.firstRange(of: Array("\r\nMIME-Version: 1.0\r\n".utf8)) else {
            throw AgentFailure(.badRequest, "Message \(id) cannot be attached whole.")
        }
        let bytes = Array(head.utf8) + written[(mimeVersion.lowerBound + 2)...]
        var check = EnclosedMessageCheck()
        if let problem = check.feed(bytes) ?? check.finish() {
            throw AgentFailure(
                .badRequest,
                "Message \(id) cannot be attached whole: it has \(problem), which a message sent as an attachment "
                    + "may not hold. Forward its text inline instead."
            )
        }
        return bytes
    }

    /// The attachments of a stored message, to attach again: each file name made header-safe, and a type the
    /// writer refuses (a multipart, an attached message it cannot send unencoded, a malformed type) sent as
    /// `application/octet-stream`.
    static func originalAttachments(
        _ detail: MessageDetail,
        from: MailAddress,
        in store: MailStore
    ) async throws -> [OutgoingAttachment] {
        var result: [OutgoingAttachment] = []
        for info in detail.attachments {
            let content = try await store.attachmentContent(info.id).content
            let filename = info.filename.map { OutgoingMessage.headerSafe($0) }
            let candidates = [
                OutgoingAttachment(filename: filename, contentType: info.contentType, bytes: content),
                OutgoingAttachment(filename: filename, bytes: content),
                OutgoingAttachment(filename: nil, bytes: content),
            ]
            let writable = candidates.first { candidate in
                (try? MessageWriter(OutgoingMessage(from: from, attachments: [candidate]))) != nil
            }
            if let writable { result.append(writable) }
        }
        return result
    }

    /// Refuses what cannot be attached before anything is saved.
    static func checkAttachable(_ path: String) throws {
        guard path.hasPrefix("/") else {
            throw AgentFailure(.badRequest, "The path of a file to attach must be absolute.")
        }
        var info = stat()
        guard stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG, access(path, R_OK) == 0 else {
            throw AgentFailure(.badRequest, "\(path) is not a file that can be read, so it cannot be attached.")
        }
    }

    /// A content type from the file name's extension (the recipient's program decides what to do with it).
    static func contentType(of path: String) -> String {
        switch (path as NSString).pathExtension.lowercased() {
        case "txt": "text/plain"
        case "pdf": "application/pdf"
        case "png": "image/png"
        case "jpg", "jpeg": "image/jpeg"
        case "gif": "image/gif"
        case "zip": "application/zip"
        default: "application/octet-stream"
        }
    }
}

extension OutboxEntry {
    /// The entry of an outbox item.
    init(_ item: OutboxItem) {
        let (state, reason): (State, String?) =
            switch item.state {
            case .queued: (.queued, nil)
            case .sending: (.sending, nil)
            case .failed(let reason): (.failed, reason)
            case .sent: (.sent, nil)
            }
        self.init(
            id: item.id,
            state: state,
            reason: reason,
            subject: item.subject,
            recipients: item.envelope.recipients,
            attempts: item.attempts,
            nextAttempt: item.nextAttempt,
            size: item.size
        )
    }
}
