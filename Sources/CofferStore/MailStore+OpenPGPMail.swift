import CofferBlocking
import CofferCrypto
import CofferMIME
import CofferOpenPGP
import GRDB

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A PGP/MIME message (RFC 3156) met while preparing an import, to be decrypted before it is written.
struct EncryptedMail: Sendable {
    /// The message as it came (its headers are kept over the decrypted content).
    var outer: MIMEMessage
    /// The encrypted part's body: the OpenPGP message, armored or binary.
    var ciphertext: [UInt8]
    /// The flags and labels the message is stored with.
    var flags: MessageFlags
    var labels: [String]
    var statusHeaders: Bool
    /// Inline PGP: the whole text body is the armored message, and its plaintext is text, not a MIME entity.
    var inline: Bool
}

/// A PGP/MIME signed message (RFC 3156 section 5) met while preparing an import: the signed part in canonical form
/// and the detached signature, checked before it is written.
struct SignedMail: Sendable {
    /// The first part exactly as it came between its delimiter lines, every line break made CRLF.
    var data: [UInt8]
    /// The `application/pgp-signature` part's body.
    var signature: [UInt8]
}

extension MailStore {
    /// Whether the message is, as a whole, a PGP/MIME signed message: a top-level `multipart/signed;
    /// protocol="application/pgp-signature"` of exactly two parts, the second a single `application/pgp-signature`
    /// part.
    static func isPGPMIMESigned(_ message: MIMEMessage) -> Bool {
        let root = message.root
        return root.contentType.type == "multipart" && root.contentType.subtype == "signed"
            && root.contentType.parameters["protocol"]?.lowercased() == "application/pgp-signature"
            && root.children.count == 2 && root.children[1].contentType.mimeType == "application/pgp-signature"
            && !root.children[1].isMultipart && !root.children[1].body.isEmpty
            && root.contentType.parameters["boundary"].map({ !$0.isEmpty }) == true
    }

    /// The signed part and signature of a PGP/MIME signed message, from its raw bytes (the parser does not keep a
    /// part's bytes as they came): after the header, the bytes between the first delimiter line and the line break
    /// before the next one, with every line break made CRLF, the form RFC 3156 signs. `nil` for any other message, or
    /// when the delimiters are not found.
    static func pgpMIMESigned(_ message: MIMEMessage, raw: [UInt8]) -> SignedMail? {
        guard isPGPMIMESigned(message), let boundary = message.root.contentType.parameters["boundary"] else {
            return nil
        }
        let delimiter = Array(("--" + boundary).utf8)
        // The first delimiter at the start of a line after the header's end.
        guard let headerEnd = raw.firstRange(of: [0x0A, 0x0D, 0x0A]) ?? raw.firstRange(of: [0x0A, 0x0A]) else {
            return nil
        }
        func delimiterLine(from start: Int) -> Range<Int>? {
            var index = start
            while index < raw.count, let found = raw[index...].firstRange(of: delimiter) {
                let atLineStart = found.lowerBound == 0 || raw[found.lowerBound - 1] == 0x0A
                if atLineStart { return found }
                index = found.upperBound
            }
            return nil
        }
        guard let first = delimiterLine(from: headerEnd.lowerBound + 1),
            let lineEnd = raw[first.upperBound...].firstIndex(of: 0x0A),
            let second = delimiterLine(from: lineEnd + 1)
        else { return nil }
        // The line break before the next delimiter belongs to the delimiter.
        var end = second.lowerBound - 1
        if end > lineEnd + 1 && raw[end - 1] == 0x0D { end -= 1 }
        guard end >= lineEnd + 1 else { return nil }
        var data: [UInt8] = []
        data.reserveCapacity(end - lineEnd + 64)
        var previous: UInt8 = 0
        for byte in raw[(lineEnd + 1)..<end] {
            if byte == 0x0A && previous != 0x0D { data.append(0x0D) }
            data.append(byte)
            previous = byte
        }
        return SignedMail(data: data, signature: message.root.children[1].body)
    }

    /// The OpenPGP message of a message that is, as a whole, a PGP/MIME encrypted message (RFC 3156, section 4):
    /// a top-level `multipart/encrypted; protocol="application/pgp-encrypted"` of exactly two parts, the second a
    /// single part holding the OpenPGP data. Any other shape is not decrypted: an encrypted part beside cleartext
    /// parts is never decrypted and shown with them (EFAIL).
    static func pgpMIMECiphertext(_ message: MIMEMessage) -> [UInt8]? {
        let root = message.root
        guard root.contentType.type == "multipart", root.contentType.subtype == "encrypted",
            root.contentType.parameters["protocol"]?.lowercased() == "application/pgp-encrypted",
            root.children.count == 2, root.children[0].contentType.mimeType == "application/pgp-encrypted",
            !root.children[1].isMultipart, !root.children[1].body.isEmpty
        else { return nil }
        return root.children[1].body
    }

    /// The armored OpenPGP message of an inline PGP message: a single `text/plain` part (no multipart, no
    /// attachment) whose whole body, but for surrounding white space, is one `-----BEGIN PGP MESSAGE-----` block. Text
    /// before or after the block means it is not decrypted (EFAIL).
    static func inlineCiphertext(_ message: MIMEMessage) -> [UInt8]? {
        let root = message.root
        guard !root.isMultipart, root.contentType.mimeType == "text/plain", root.disposition?.isAttachment != true
        else { return nil }
        let body = root.body
        let isSpace: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D || $0 == 0x0A }
        guard let first = body.firstIndex(where: { !isSpace($0) }), let last = body.lastIndex(where: { !isSpace($0) })
        else { return nil }
        let block = body[first...last]
        let begin = "-----BEGIN PGP MESSAGE-----".utf8
        let end = "-----END PGP MESSAGE-----".utf8
        // Checked on the slice, so a plain text body is not copied.
        guard block.count > begin.count + end.count, block.starts(with: begin),
            block.suffix(end.count).elementsEqual(end)
        else { return nil }
        return Array(block)
    }

    /// Whether the message holds an OpenPGP encrypted part anywhere but as the whole message: such a part stays
    /// opaque (EFAIL).
    static func hasEnclosedEncryptedPart(_ message: MIMEMessage) -> Bool {
        func encrypted(_ part: MIMEPart) -> Bool {
            let type = part.contentType.mimeType
            return type == "multipart/encrypted" || type == "application/pgp-encrypted"
        }
        func containsEncrypted(_ part: MIMEPart) -> Bool {
            part.children.contains { encrypted($0) || containsEncrypted($0) }
        }
        return message.root.contentType.mimeType == "multipart/encrypted" || containsEncrypted(message.root)
    }

    /// `message` with the encrypted data of each `multipart/encrypted` part (its parts after the first) listed as an
    /// attachment (named `encrypted.asc` when it has no name), so a message stored as it came keeps its ciphertext as
    /// an opaque attachment, to be saved or decrypted later, instead of losing it as an unnamed part. Other messages
    /// are returned unchanged.
    static func keepingEncryptedParts(_ message: MIMEMessage) -> MIMEMessage {
        func kept(_ part: MIMEPart) -> MIMEPart? {
            guard part.isMultipart else { return nil }
            var changed = false
            var copy = part
            let encrypted = part.contentType.mimeType == "multipart/encrypted"
            for index in copy.children.indices {
                if encrypted, index > 0, !copy.children[index].isMultipart,
                    copy.children[index].disposition?.isAttachment != true
                {
                    let name = copy.children[index].filename ?? "encrypted.asc"
                    copy.children[index].disposition = ContentDisposition(
                        type: "attachment",
                        parameters: ["filename": name]
                    )
                    changed = true
                } else if let child = kept(copy.children[index]) {
                    copy.children[index] = child
                    changed = true
                }
            }
            return changed ? copy : nil
        }
        guard let root = kept(message.root) else { return message }
        return MIMEMessage(root: root, defects: message.defects)
    }

    /// Adds what the store found of OpenPGP to a prepared message: an encrypted message is marked for
    /// ``openEncryptedMail(_:keys:now:)`` (and stored as it came, with ``MessageOpenPGP/Outcome/noSecretKey``, if
    /// nothing opens it); one with an enclosed encrypted part is marked as not decrypted.
    static func noteOpenPGP(
        _ prepared: inout PreparedMessage,
        message: MIMEMessage,
        raw: RawMessage,
        statusHeaders: Bool
    ) {
        let pgpMIME = pgpMIMECiphertext(message)
        if let ciphertext = pgpMIME ?? inlineCiphertext(message) {
            prepared.encrypted = EncryptedMail(
                outer: message,
                ciphertext: ciphertext,
                flags: raw.flags,
                labels: raw.labels,
                statusHeaders: statusHeaders,
                inline: pgpMIME == nil
            )
            prepared.cells.append((.messageOpenPGP, MessageOpenPGP(outcome: .noSecretKey).cell))
        } else if hasEnclosedEncryptedPart(message) {
            prepared.cells.append((.messageOpenPGP, MessageOpenPGP(outcome: .nestedNotDecrypted).cell))
        } else if let signed = pgpMIMESigned(message, raw: raw.bytes) {
            prepared.signed = signed
            prepared.cells.append((.messageOpenPGP, MessageOpenPGP(outcome: .signed).cell))
        }
    }

    /// Decrypts the PGP/MIME messages among `prepared` with the user's secret keys (loaded from the store, used on
    /// the ``BlockingPool`` (standard error silenced, ``RNPDiagnostics``) and released, their memory zeroed, when this returns). A decrypted message is prepared
    /// again from its decrypted content under its own headers, with the same content hash (so the same message
    /// fetched again is a duplicate); one that cannot be decrypted is kept as it came with the reason. Nothing here
    /// fails an import.
    func openEncryptedMail(
        _ prepared: [Result<PreparedMessage, MIMEError>],
        keys: StoreKeys,
        now: Int64
    ) async -> [Result<PreparedMessage, MIMEError>] {
        let waiting = prepared.indices.filter { index in
            if case .success(let message) = prepared[index], message.encrypted != nil { return true }
            return false
        }
        let signed = prepared.indices.filter { index in
            if case .success(let message) = prepared[index], message.signed != nil { return true }
            return false
        }
        guard !waiting.isEmpty || !signed.isEmpty else { return prepared }
        // Secret keys only when something is to be decrypted; a signature needs certificates alone.
        let (secretKeys, userIDs) = waiting.isEmpty ? ([], [:]) : await openPGPSecretKeysForReading()
        let (contactCertificates, contactUserIDs) = await contactCertificatesForReading()
        let ownCertificates =
            waiting.isEmpty ? await ownCertificatesForReading() : (secretKeys.map(\.publicKey), userIDs)
        let certificates = ownCertificates.0 + contactCertificates
        let signerNames = ownCertificates.1.merging(contactUserIDs) { own, _ in own }
        var result = prepared
        for index in signed {
            guard case .success(var message) = prepared[index], let mail = message.signed else { continue }
            let checked = await RNPDiagnostics.run { () -> [OpenPGPSignature]? in
                try? OpenPGP.verifyDetached(mail.data, signature: mail.signature, publicKeys: certificates)
            }
            let signatures = (checked ?? []).map { signature in
                MessageOpenPGP.Signature(
                    status: signature.status.description,
                    fingerprint: signature.signerFingerprint,
                    userID: signature.signerFingerprint.flatMap { signerNames[$0] }
                )
            }
            message.signed = nil
            message.cells.removeAll { $0.0 == .messageOpenPGP }
            message.cells.append((.messageOpenPGP, MessageOpenPGP(outcome: .signed, signatures: signatures).cell))
            result[index] = .success(message)
        }
        for index in waiting {
            guard case .success(let message) = prepared[index], let encrypted = message.encrypted else { continue }
            let status: MessageOpenPGP
            var replacement: PreparedMessage?
            if secretKeys.isEmpty {
                status = MessageOpenPGP(outcome: .noSecretKey)
            } else {
                let ciphertext = encrypted.ciphertext
                let decrypted = await RNPDiagnostics.run { () -> Result<OpenPGPDecryption, OpenPGPError> in
                    do throws(OpenPGPError) {
                        return .success(try OpenPGP.decrypt(ciphertext, with: secretKeys, verifyingWith: certificates))
                    } catch {
                        return .failure(error)
                    }
                }
                switch decrypted {
                case .success(let decryption):
                    let signatures = decryption.signatures.map { signature in
                        MessageOpenPGP.Signature(
                            status: signature.status.description,
                            fingerprint: signature.signerFingerprint,
                            userID: signature.signerFingerprint.flatMap { signerNames[$0] }
                        )
                    }
                    let inner =
                        encrypted.inline
                        ? Self.decryptedText(outer: encrypted.outer, plaintext: decryption.plaintext)
                        : try? Self.decryptedMessage(outer: encrypted.outer, plaintext: decryption.plaintext)
                    if let inner {
                        status = MessageOpenPGP(
                            outcome: .decrypted,
                            protection: decryption.protection.description,
                            signatures: signatures
                        )
                        replacement = Self.prepare(
                            inner,
                            contentHash: message.contentHash,
                            size: message.size,
                            flags: encrypted.flags,
                            labels: encrypted.labels,
                            keys: keys,
                            now: now,
                            statusHeaders: encrypted.statusHeaders
                        )
                    } else {
                        status = MessageOpenPGP(outcome: .malformed)
                    }
                case .failure(let error):
                    switch error {
                    case .noMatchingSecretKey: status = MessageOpenPGP(outcome: .noSecretKey)
                    case .integrityFailure: status = MessageOpenPGP(outcome: .integrityFailure)
                    default: status = MessageOpenPGP(outcome: .malformed)
                    }
                }
            }
            var stored = replacement ?? message
            stored.autocrypt = message.autocrypt
            stored.encrypted = nil
            stored.cells.removeAll { $0.0 == .messageOpenPGP }
            stored.cells.append((.messageOpenPGP, status.cell))
            result[index] = .success(stored)
        }
        return result
    }

    /// Decrypts the messages stored encrypted because no key of the user's could open them (``MessageOpenPGP/Outcome/noSecretKey``)
    /// with the keys the store holds now (call it after a key is added). Each one decrypted is rewritten in place,
    /// in one transaction per message: same id, labels, conversation and flags the user set; its cells, search
    /// tokens and attachments those of the decrypted content, its status `decrypted`. Messages still no key opens
    /// are left as they are.
    ///
    /// - Returns: How many messages were decrypted.
    /// - Throws: ``StoreError/locked``; a store error while rewriting.
    /// The messages with an OpenPGP status and their status cells: the rows of the partial index `messages_openPGP`
    /// (migration `v11-openpgp-pending`) only, never a scan of the whole table.
    static let openPGPStatusesQuery = "SELECT id, openPGP FROM messages WHERE openPGP IS NOT NULL"

    public func openStoredEncryptedMail() async throws(StoreError) -> Int {
        let keys = try await keys()
        // Without a key of the user's nothing can be opened (this runs at every unlock).
        guard !(try await openPGPKeys()).isEmpty else { return 0 }
        let candidates = try await read { db in
            try Row.fetchAll(db, sql: Self.openPGPStatusesQuery).compactMap {
                row -> Int64? in
                let strict = try StrictRow(row, table: "messages")
                let id = strict.id
                let status = keys.decode(try strict.blob("openPGP"), .messageOpenPGP, row: id, MessageOpenPGP.read)
                return status?.outcome == .noSecretKey ? id : nil
            }
        }
        guard !candidates.isEmpty else { return 0 }
        var opened = 0
        // In batches, so the keys are loaded once per batch and a backlog's ciphertexts are not all in memory.
        var start = candidates.startIndex
        while start < candidates.endIndex {
            let batch = candidates[start..<min(start + 32, candidates.endIndex)]
            start = batch.endIndex
            var waiting: [(id: Int64, message: Result<PreparedMessage, MIMEError>)] = []
            for id in batch {
                // A message that cannot be read (damaged) is left for the others' sake; a lock ends the run.
                do {
                    if let pending = try await pendingDecryption(id) { waiting.append((id, .success(pending))) }
                } catch .locked {
                    throw .locked
                } catch {
                    continue
                }
            }
            let results = await openEncryptedMail(waiting.map(\.message), keys: keys, now: Schema.seconds(Date()))
            for (index, result) in results.enumerated() {
                guard case .success(let prepared) = result, decryptedStatus(prepared) else { continue }
                try await rewrite(waiting[index].id, with: prepared, keys: keys)
                opened += 1
            }
        }
        return opened
    }

    /// Message `id` as it was stored, ready for ``openEncryptedMail(_:keys:now:)``: its header fields over its
    /// ciphertext (its last attachment, or its text for inline PGP); `nil` when it has none.
    private func pendingDecryption(_ id: Int64) async throws(StoreError) -> PreparedMessage? {
        let detail = try await message(id)
        let contentType = ContentType.parse(
            detail.headers.last { $0.name.lowercased() == "content-type" }?.unfoldedValue ?? "text/plain"
        )
        let ciphertext: [UInt8]
        let inline = contentType.mimeType == "text/plain"
        if inline {
            guard let text = detail.textBody else { return nil }
            ciphertext = Array(text.utf8)
        } else {
            guard let last = detail.attachments.last else { return nil }
            ciphertext = try await attachmentContent(last.id).content
        }
        let time = Schema.seconds(detail.summary.date)
        var pending = PreparedMessage(
            time: time,
            flags: 0,
            size: Int64(detail.summary.size),
            messageIDHash: nil,
            contentHash: Data(),
            parentHashes: [],
            cells: [],
            searchDocument: "",
            attachments: [],
            labels: []
        )
        pending.encrypted = EncryptedMail(
            outer: MIMEMessage(root: MIMEPart(headers: detail.headers, contentType: contentType)),
            ciphertext: ciphertext,
            flags: detail.summary.flags.subtracting(.hasAttachments),
            labels: [],
            statusHeaders: false,
            inline: inline
        )
        return pending
    }

    /// Whether `prepared` carries the status `decrypted`.
    private func decryptedStatus(_ prepared: PreparedMessage) -> Bool {
        guard let cell = prepared.cells.first(where: { $0.0 == .messageOpenPGP })?.1 else { return false }
        return (try? MessageOpenPGP.read(cell))?.outcome == .decrypted
    }

    /// Replaces message `id`'s cells, flags, search tokens and attachments with `prepared`'s, keeping its id,
    /// conversation, Message-ID and content hashes, and labels.
    private func rewrite(_ id: Int64, with prepared: PreparedMessage, keys: StoreKeys) async throws(StoreError) {
        let removed = try await write { db -> [String] in
            guard let old = try MessageRecord.fetchOne(db, key: id) else { return [] }
            var cells: [SealedColumn: Data] = [:]
            for (column, plaintext) in prepared.cells { cells[column] = try keys.seal(plaintext, column, row: id) }
            try MessageRecord(
                id: id,
                conversationID: old.conversationID,
                time: old.time,
                flags: prepared.flags,
                size: old.size,
                messageIDHash: old.messageIDHash,
                contentHash: old.contentHash,
                cells: cells
            ).update(db)
            let files = try String.fetchAll(
                db,
                sql: "SELECT file FROM attachments WHERE messageID = ? AND file IS NOT NULL",
                arguments: [id]
            )
            try db.execute(sql: "DELETE FROM attachments WHERE messageID = ?", arguments: [id])
            try SearchIndex.remove(messageID: id, db: db)
            try SearchIndex.insert(prepared.searchDocument, messageID: id, db: db)
            var nextAttachmentID = try Schema.nextID(db, table: "attachments")
            for (position, attachment) in prepared.attachments.enumerated() {
                let attachmentID = nextAttachmentID
                nextAttachmentID += 1
                try AttachmentRecord(
                    id: attachmentID,
                    messageID: id,
                    position: Int64(position),
                    info: try keys.seal(attachment.info, .attachmentInfo, row: attachmentID, extra: String(id)),
                    body: try keys.seal(attachment.body, .attachmentBody, row: attachmentID, extra: String(id))
                ).insert(db)
            }
            return files
        }
        await removeSealedFiles(removed)
    }

    /// The user's secret keys, ready for RNP, and the first user id of each key by fingerprint; none when there are
    /// none or they cannot be read (the messages are then stored as they came).
    private func openPGPSecretKeysForReading() async -> ([OpenPGPSecretKey], [String: String]) {
        guard let entries = try? await openPGPKeys(), !entries.isEmpty else { return ([], [:]) }
        var secretKeys: [OpenPGPSecretKey] = []
        var userIDs: [String: String] = [:]
        for entry in entries {
            if let first = entry.userIDs.first { userIDs[entry.fingerprint] = first }
            guard let bytes = try? await openPGPSecretKey(fingerprint: entry.fingerprint) else { continue }
            let key = await RNPDiagnostics.run { () -> OpenPGPSecretKey? in try? OpenPGPSecretKey(bytes: bytes) }
            if let key { secretKeys.append(key) }
        }
        return (secretKeys, userIDs)
    }

    /// The user's own certificates (no secret key opened), to check signatures, and the first user id of each by
    /// fingerprint; none when they cannot be read.
    private func ownCertificatesForReading() async -> ([OpenPGPPublicKey], [String: String]) {
        guard let entries = try? await openPGPKeys(), !entries.isEmpty else { return ([], [:]) }
        var userIDs: [String: String] = [:]
        for entry in entries { if let first = entry.userIDs.first { userIDs[entry.fingerprint] = first } }
        let certificates = await RNPDiagnostics.run { () -> [OpenPGPPublicKey] in
            entries.compactMap { try? OpenPGPPublicKey(bytes: $0.certificate) }
        }
        return (certificates, userIDs)
    }

    /// Correspondents' certificates (migration `v9-contact-keys`), to check the signatures of their mail, and the first
    /// user id of each by fingerprint; a certificate RNP does not read is left out, none when they cannot be read.
    private func contactCertificatesForReading() async -> ([OpenPGPPublicKey], [String: String]) {
        guard let entries = try? await contactKeys(), !entries.isEmpty else { return ([], [:]) }
        var userIDs: [String: String] = [:]
        for entry in entries { if let first = entry.userIDs.first { userIDs[entry.fingerprint] = first } }
        let certificates = await RNPDiagnostics.run { () -> [OpenPGPPublicKey] in
            entries.compactMap { try? OpenPGPPublicKey(bytes: $0.certificate) }
        }
        return (certificates, userIDs)
    }

    /// The message whose content is the decrypted MIME entity: the outer message's header fields except its
    /// `Content-*` fields, then the entity's `Content-*` fields, and the entity's body and parts. Other header fields
    /// inside the entity are not taken over the outer ones.
    static func decryptedMessage(outer: MIMEMessage, plaintext: [UInt8]) throws(MIMEError) -> MIMEMessage {
        let inner = try MIMEParser.parse(plaintext).root
        func isContent(_ field: HeaderField) -> Bool { field.name.lowercased().hasPrefix("content-") }
        let root = MIMEPart(
            headers: outer.headers.filter { !isContent($0) } + inner.headers.filter(isContent),
            contentType: inner.contentType,
            disposition: inner.disposition,
            transferEncoding: inner.transferEncoding,
            contentID: inner.contentID,
            body: inner.body,
            children: inner.children
        )
        return MIMEMessage(root: root)
    }

    /// The message whose text is the decrypted text of an inline PGP message (read as UTF-8: inline PGP names no
    /// charset), under the outer message's header fields.
    static func decryptedText(outer: MIMEMessage, plaintext: [UInt8]) -> MIMEMessage {
        let type = ContentType(type: "text", subtype: "plain", parameters: ["charset": "utf-8"])
        let root = MIMEPart(
            headers: outer.headers.filter { !$0.name.lowercased().hasPrefix("content-") } + [
                HeaderField(
                    name: "Content-Type",
                    rawValue: " text/plain; charset=utf-8",
                    value: "text/plain; charset=utf-8"
                )
            ],
            contentType: type,
            transferEncoding: "8bit",
            body: plaintext
        )
        return MIMEMessage(root: root)
    }
}
