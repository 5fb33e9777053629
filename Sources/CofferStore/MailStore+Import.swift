import CofferCrypto
import CofferMIME
import GRDB

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A parsed message ready to be written: everything but the cells' sealing, which needs the row id.
struct PreparedMessage: Sendable {
    var time: Int64
    var flags: Int64
    var size: Int64
    var messageIDHash: Data?
    var contentHash: Data
    /// Keyed hashes of the Message-IDs this one replies to, nearest first.
    var parentHashes: [Data]
    var cells: [(SealedColumn, [UInt8])]
    /// The message's row of the blind index (``SearchIndex/document(_:)``), empty when nothing is indexed.
    var searchDocument: String
    var attachments: [(info: [UInt8], body: [UInt8])]
    var labels: [String]
    /// The From, To and Cc addresses, counted in the address book when the message is stored.
    var sightings: [MailAddress] = []
    /// The sealed file of each attachment (by position) whose body cell is a file reference.
    var files: [Int: String] = [:]
    /// A PGP/MIME message waiting to be decrypted (``MailStore/openEncryptedMail(_:keys:now:)``) before it is written.
    var encrypted: EncryptedMail?
    /// A PGP/MIME signed message (`multipart/signed`) whose signature is checked before it is written.
    var signed: SignedMail?
    /// The sender and Autocrypt header, for the Autocrypt peer state (``MailStore/updateAutocryptPeers(_:keys:db:)``).
    var autocrypt: AutocryptSighting?
}

extension MailStore {
    /// Bytes of body text the blind index covers per message.
    public static let indexedBodyBytes = 32 << 10
    /// The most distinct tokens indexed per message.
    public static let maximumTokensPerMessage = 4096
    /// Characters in a snippet.
    static let snippetLength = 160

    /// Imports one raw message in its own transaction. Idempotent: a message whose Message-ID or whose exact
    /// content is already stored is reported as ``ImportOutcome/duplicate`` and nothing is written.
    public func importMessage(_ message: RawMessage) async throws(StoreError) -> ImportOutcome {
        try await importMessages([message])[0]
    }

    /// Imports messages in one transaction (either all of their rows are written, or none): the fast path for bulk
    /// imports. A malformed message is reported and skipped; it does not fail the others.
    public func importMessages(_ messages: [RawMessage]) async throws(StoreError) -> [ImportOutcome] {
        try await importMessages(messages, statusHeaders: false)
    }

    /// ``importMessages(_:)``; with `statusHeaders` (an mbox file's messages only), a message's `Status:` and
    /// `X-Status:` headers add flags, as the mail program that wrote the mbox file meant them.
    func importMessages(_ messages: [RawMessage], statusHeaders: Bool) async throws(StoreError) -> [ImportOutcome] {
        let keys = try await keys()
        let now = Schema.seconds(Date())
        let prepared = await checkAutocrypt(
            await openEncryptedMail(
                messages.map { Self.prepare($0, keys: keys, now: now, statusHeaders: statusHeaders) },
                keys: keys,
                now: now
            )
        )
        return try await write { db in
            let outcomes = try Self.insert(prepared, keys: keys, db: db)
            try Self.updateAutocryptPeers(prepared, keys: keys, db: db)
            return outcomes
        }
    }

    /// Imports every message of a `.eml` file, an mbox file or a Maildir folder (``MailSource/detect(path:)``), in
    /// transactions of `batchSize` messages. A crash loses at most the batch in flight; running the import again
    /// completes it (duplicates are skipped).
    ///
    /// - Parameters:
    ///   - path: The mail source.
    ///   - label: The label every message gets.
    ///   - batchSize: Messages per transaction.
    ///   - progress: Called after each batch with the counters so far.
    /// - Returns: The final counters.
    public func importSource(
        at path: String,
        label: String = "Inbox",
        batchSize: Int = MailStore.defaultBatchSize,
        progress: @Sendable (ImportProgress) -> Void = { _ in }
    ) async throws(StoreError) -> ImportProgress {
        guard batchSize > 0 else { throw .invalidArgument("the batch size must be positive") }
        let start = ContinuousClock.now
        var counters = ImportProgress()
        var batch: [RawMessage] = []
        batch.reserveCapacity(batchSize)

        let kind: MailSourceKind
        do { kind = try MailSource.detect(path: path) } catch { throw .source(error) }

        func flush() async throws(StoreError) {
            guard !batch.isEmpty else { return }
            for outcome in try await importMessages(batch, statusHeaders: kind == .mbox) {
                switch outcome {
                case .imported: counters.imported += 1
                case .duplicate: counters.duplicates += 1
                case .malformed: counters.malformed += 1
                }
            }
            batch.removeAll(keepingCapacity: true)
            let elapsed = ContinuousClock.now - start
            counters.elapsedSeconds =
                Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            progress(counters)
        }

        switch kind {
        case .eml:
            do {
                batch.append(RawMessage(bytes: try MailSource.readMessageFile(atPath: path), labels: [label]))
            } catch {
                counters.malformed += 1
            }
        case .mbox:
            let reader: MboxReader
            do { reader = try MboxReader(path: path) } catch { throw .source(error) }
            for entry in reader {
                switch entry.content {
                case .success(let bytes): batch.append(RawMessage(bytes: bytes, labels: [label]))
                case .failure: counters.malformed += 1
                }
                if batch.count >= batchSize { try await flush() }
            }
        case .maildir:
            let reader: MaildirReader
            do { reader = try MaildirReader(path: path) } catch { throw .source(error) }
            for entry in reader {
                switch entry.content {
                case .success(let bytes):
                    batch.append(RawMessage(bytes: bytes, flags: Self.maildirFlags(entry.flags), labels: [label]))
                case .failure: counters.malformed += 1
                }
                if batch.count >= batchSize { try await flush() }
            }
        }
        try await flush()
        let elapsed = ContinuousClock.now - start
        counters.elapsedSeconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return counters
    }

    static func maildirFlags(_ letters: String) -> MessageFlags {
        var flags: MessageFlags = []
        if letters.contains("S") { flags.insert(.seen) }
        if letters.contains("R") { flags.insert(.answered) }
        if letters.contains("F") { flags.insert(.flagged) }
        if letters.contains("D") { flags.insert(.draft) }
        return flags
    }

    /// Parses and hashes one message (no database access).
    ///
    /// Its flags are `raw.flags`; only with `statusHeaders` (a message from an mbox file, where the mail program
    /// that wrote the file kept them there) do `Status: R` and `X-Status: A F T` add seen, answered, flagged and
    /// draft. Anyone can write those headers into a message they send, so mail from a server or a Maildir never
    /// takes flags from them.
    static func prepare(
        _ raw: RawMessage,
        keys: StoreKeys,
        now: Int64,
        statusHeaders: Bool = false
    ) -> Result<PreparedMessage, MIMEError> {
        let message: MIMEMessage
        do { message = try MIMEParser.parse(raw.bytes) } catch { return .failure(error) }
        var prepared = prepare(
            keepingEncryptedParts(message),
            contentHash: Data(keys.lookup.hash(tag: HashTag.content, raw.bytes).prefix(16)),
            size: Int64(raw.bytes.count),
            flags: raw.flags,
            labels: raw.labels,
            keys: keys,
            now: now,
            statusHeaders: statusHeaders
        )
        noteOpenPGP(&prepared, message: message, raw: raw, statusHeaders: statusHeaders)
        prepared.autocrypt = autocryptSighting(message, time: prepared.time, now: now)
        return .success(prepared)
    }

    /// Prepares a parsed message whose raw bytes had `contentHash` and `size`. An attachment whose body is a key of
    /// `files` is stored as a reference to that sealed file (``importOutboxMessage(_:flags:labels:)``).
    static func prepare(
        _ message: MIMEMessage,
        contentHash: Data,
        size: Int64,
        flags rawFlags: MessageFlags,
        labels: [String],
        keys: StoreKeys,
        now: Int64,
        statusHeaders: Bool = false,
        files: [[UInt8]: (file: String, size: Int64)] = [:]
    ) -> PreparedMessage {
        var flags = rawFlags
        if statusHeaders {
            if let status = message.header("Status")?.value, status.contains("R") { flags.insert(.seen) }
            if let status = message.header("X-Status")?.value {
                if status.contains("A") { flags.insert(.answered) }
                if status.contains("F") { flags.insert(.flagged) }
                if status.contains("T") { flags.insert(.draft) }
            }
        }
        let attachments = message.attachments
        if !attachments.isEmpty { flags.insert(.hasAttachments) }
        flags.remove(.corrupt)

        let subject = message.subject
        let from = message.from
        let to = message.to
        let text = message.textBody
        var tokens = Set<Int64>()
        // Each distinct word is hashed once: the keyed hash costs far more than remembering the word.
        var seen = Set<[UInt8]>()
        func index(_ text: String?) {
            guard let text else { return }
            SearchTokenizer.forEachToken(in: text) { token in
                guard tokens.count < maximumTokensPerMessage, seen.insert(Array(token)).inserted else { return }
                tokens.insert(keys.search.hash64(tag: HashTag.searchToken, token))
            }
        }
        index(subject)
        for address in from + to {
            index(address.name)
            index(address.address)
        }
        if let text {
            let utf8 = text.utf8
            if utf8.count <= indexedBodyBytes {
                index(text)
            } else {
                index(String(decoding: utf8.prefix(indexedBodyBytes), as: UTF8.self))
            }
        }

        let messageIDHash = message.messageID.map {
            Data(keys.lookup.hash(tag: HashTag.messageID, Array($0.utf8)).prefix(16))
        }
        var parents: [Data] = []
        for parent in message.inReplyTo + message.references.reversed() where parents.count < 4 {
            let hash = Data(keys.lookup.hash(tag: HashTag.messageID, Array(parent.utf8)).prefix(16))
            if !parents.contains(hash) { parents.append(hash) }
        }

        let cells: [(SealedColumn, [UInt8])] = [
            (.messageSubject, CellWriter.text(subject)),
            (.messageFrom, CellWriter.addressList(from)),
            (.messageTo, CellWriter.addressList(to)),
            (.messageCc, CellWriter.addressList(message.cc)),
            (.messageBcc, CellWriter.addressList(message.bcc)),
            (.messageHeaders, CellWriter.headers(message.headers)),
            (.messageText, CellWriter.text(text)),
            (.messageHTML, CellWriter.text(message.htmlBody)),
            (.messageSnippet, CellWriter.text(text.map(snippet))),
            (.messageSummary, CellWriter.summary(subject: subject, from: from)),
        ]
        var attachmentFiles: [Int: String] = [:]
        let sealedAttachments = attachments.enumerated().map { position, part -> (info: [UInt8], body: [UInt8]) in
            let spilled = files[part.body]
            var info = CellWriter(capacity: 96)
            info.string(part.filename)
            info.string(part.contentType.mimeType)
            info.string(part.contentID)
            info.count(spilled.map { Int($0.size) } ?? part.body.count)
            if let spilled {
                attachmentFiles[position] = spilled.file
                return (info.bytes, AttachmentFileReference.payload(file: spilled.file, size: spilled.size))
            }
            var body = CellWriter(capacity: part.body.count + 8)
            body.raw(part.body)
            return (info.bytes, body.bytes)
        }
        let time = message.date.map(Schema.seconds) ?? now
        return PreparedMessage(
            time: time,
            flags: flags.rawValue,
            size: size,
            messageIDHash: messageIDHash,
            contentHash: contentHash,
            parentHashes: parents,
            cells: cells,
            searchDocument: SearchIndex.document(tokens),
            attachments: sealedAttachments,
            labels: labels,
            sightings: from + to + message.cc,
            files: attachmentFiles
        )
    }

    package static func snippet(_ text: String) -> String {
        var result = ""
        // Counted as they are appended: `String.count` walks the whole string each time.
        var count = 0
        var lastWasSpace = true
        for character in text {
            if count >= snippetLength { break }
            if character.isWhitespace {
                if !lastWasSpace {
                    result.append(" ")
                    count += 1
                }
                lastWasSpace = true
            } else {
                result.append(character)
                count += 1
                lastWasSpace = false
            }
        }
        if result.last == " " { result.removeLast() }
        return result
    }

    /// Writes prepared messages inside the caller's transaction.
    ///
    /// A message whose content is already stored is a duplicate. So is one whose Message-ID is, when
    /// `duplicateByMessageID` (file imports, so that a message saved twice in other forms is imported once); a sync
    /// passes false, since a Message-ID is the sender's word and two different messages may carry the same one.
    static func insert(
        _ prepared: [Result<PreparedMessage, MIMEError>],
        keys: StoreKeys,
        db: Database,
        duplicateByMessageID: Bool = true
    ) throws -> [ImportOutcome] {
        var nextMessageID = try Schema.nextID(db, table: "messages")
        var nextAttachmentID = try Schema.nextID(db, table: "attachments")
        var labelIDs: [String: Int64] = [:]
        let duplicateByContent = try db.cachedStatement(sql: "SELECT 1 FROM messages WHERE contentHash = ?")
        let duplicateByID = try db.cachedStatement(sql: "SELECT 1 FROM messages WHERE messageIDHash = ?")
        let conversation = try db.cachedStatement(sql: "SELECT conversationID FROM messages WHERE messageIDHash = ?")
        var outcomes: [ImportOutcome] = []
        outcomes.reserveCapacity(prepared.count)
        var seen: [(MailAddress, Int64)] = []
        for item in prepared {
            let message: PreparedMessage
            switch item {
            case .failure(let error):
                outcomes.append(.malformed(error))
                continue
            case .success(let value): message = value
            }
            if try Bool.fetchOne(duplicateByContent, arguments: [message.contentHash]) == true {
                outcomes.append(.duplicate)
                continue
            }
            if duplicateByMessageID, let hash = message.messageIDHash,
                try Bool.fetchOne(duplicateByID, arguments: [hash]) == true
            {
                outcomes.append(.duplicate)
                continue
            }
            let id = nextMessageID
            nextMessageID += 1
            var conversationID = id
            for parent in message.parentHashes {
                if let found = try Int64.fetchOne(conversation, arguments: [parent]) {
                    conversationID = found
                    break
                }
            }
            var cells: [SealedColumn: Data] = [:]
            for (column, plaintext) in message.cells { cells[column] = try keys.seal(plaintext, column, row: id) }
            try MessageRecord(
                id: id,
                conversationID: conversationID,
                time: message.time,
                flags: message.flags,
                size: message.size,
                messageIDHash: message.messageIDHash,
                contentHash: message.contentHash,
                cells: cells
            ).insert(db)
            for name in message.labels {
                let labelID: Int64
                if let known = labelIDs[name] {
                    labelID = known
                } else {
                    labelID = try label(named: name, keys: keys, db: db)
                    labelIDs[name] = labelID
                }
                try MessageLabelRecord(labelID: labelID, time: message.time, messageID: id).insert(db)
            }
            try SearchIndex.insert(message.searchDocument, messageID: id, db: db)
            for (position, attachment) in message.attachments.enumerated() {
                let attachmentID = nextAttachmentID
                nextAttachmentID += 1
                let owner = String(id)
                try AttachmentRecord(
                    id: attachmentID,
                    messageID: id,
                    position: Int64(position),
                    info: try keys.seal(attachment.info, .attachmentInfo, row: attachmentID, extra: owner),
                    body: try keys.seal(attachment.body, .attachmentBody, row: attachmentID, extra: owner),
                    file: message.files[position]
                ).insert(db)
            }
            outcomes.append(.imported(id))
            for address in message.sightings { seen.append((address, message.time)) }
        }
        // The address book counts the addresses of the messages stored, in the same transaction.
        for (address, sighting) in sightings(seen) {
            try upsertContact(sighting, address: address, source: .mail, keys: keys, db: db)
        }
        return outcomes
    }

    /// The id of the label called `name`, created if missing (found by a keyed hash of the name).
    static func label(named name: String, keys: StoreKeys, db: Database) throws -> Int64 {
        let lookup = Data(keys.lookup.hash(tag: HashTag.labelName, Array(name.utf8)).prefix(16))
        if let id = try Int64.fetchOne(db, sql: "SELECT id FROM labels WHERE lookup = ?", arguments: [lookup]) {
            return id
        }
        let id = try Schema.nextID(db, table: "labels")
        try LabelRecord(id: id, lookup: lookup, name: try keys.seal(CellWriter.text(name), .labelName, row: id))
            .insert(db)
        return id
    }
}
