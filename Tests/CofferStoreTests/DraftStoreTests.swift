import CofferCrypto
import CofferMIME
import CofferTesting
import Foundation
import GRDB
import Testing

@testable import CofferStore

/// A draft with every field filled.
func sampleDraft(subject: String = "Quarterly plan", text: String = "Hello,\nsee attached.\n") -> DraftContent {
    DraftContent(
        from: MailAddress(name: "Alice", address: "alice@example.org"),
        to: [MailAddress(name: "Bob, Jr.", address: "bob@example.org")],
        cc: [MailAddress(name: nil, address: "carol@example.org")],
        bcc: [MailAddress(name: "Dan", address: "dan@example.org")],
        subject: subject,
        inReplyTo: ["parent@example.org"],
        references: ["root@example.org", "parent@example.org"],
        text: text
    )
}

/// The plaintext of a cell written by `CellWriter`, with its padding removed.
func unpadded(_ cell: [UInt8]) -> [UInt8] {
    Array(cell[..<cell.lastIndex(of: 0x80)!])
}

/// `body` padded again as a cell v2 (the 0x80 marker and zeros up to the bucket).
func repadded(_ body: [UInt8]) -> [UInt8] {
    var bytes = body + [0x80]
    bytes += [UInt8](repeating: 0, count: CellWriter.bucket(for: bytes.count) - bytes.count)
    return bytes
}

@Suite("Drafts")
struct DraftStoreTests {
    @Test("a draft round-trips, is updated in place, listed newest first and deleted")
    func roundTrip() async throws {
        let world = try await StoreWorld()
        let store = world.store
        let first = try await store.saveDraft(sampleDraft())
        let second = try await store.saveDraft(DraftContent(subject: "Second", text: ""))
        #expect(try await store.draft(first).content == sampleDraft())
        var changed = sampleDraft(subject: "Quarterly plan, v2")
        changed.to.append(MailAddress(name: "Eve", address: "eve@example.org"))
        #expect(try await store.saveDraft(changed, id: first) == first)
        let draft = try await store.draft(first)
        #expect(draft.content == changed)
        #expect(draft.updated >= draft.created)
        let listed = try await store.drafts()
        #expect(listed.map(\.id).sorted() == [first, second])
        let summary = try #require(listed.first { $0.id == first })
        #expect(summary.subject == "Quarterly plan, v2")
        #expect(
            summary.recipients.map(\.address) == [
                "bob@example.org", "eve@example.org", "carol@example.org", "dan@example.org",
            ]
        )
        try await store.deleteDraft(second)
        #expect(try await store.drafts().map(\.id) == [first])
        await #expect(throws: StoreError.draftNotFound(second)) { try await store.draft(second) }
        await #expect(throws: StoreError.draftNotFound(second)) { try await store.deleteDraft(second) }
        await #expect(throws: StoreError.draftNotFound(999)) { try await store.saveDraft(changed, id: 999) }
    }

    @Test("attachments are sealed into files as they are added, read back chunk by chunk, and deleted with the draft")
    func attachments() async throws {
        let world = try await StoreWorld()
        let store = world.store
        let id = try await store.saveDraft(sampleDraft())
        let bytes = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
        let path = "\(world.root.path)/report.pdf"
        try SecureFile.writeAtomically(bytes, to: path)
        let fromFile = try await store.addDraftAttachment(
            to: id,
            contentsOf: path,
            filename: "report.pdf",
            contentType: "application/pdf"
        )
        let small = Array("a small note".utf8)
        let fromReader = try await store.addDraftAttachment(
            to: id,
            OutgoingAttachment(filename: "note.txt", contentType: "text/plain", bytes: small)
        )
        #expect(fromFile.size == Int64(bytes.count) && fromFile.position == 0)
        #expect(fromReader.size == Int64(small.count) && fromReader.position == 1)
        #expect(try await store.draft(id).attachments == [fromFile, fromReader])
        #expect(try await store.drafts().first?.attachmentCount == 2)
        #expect(try await store.draftAttachmentReader(fromFile.id).readAll() == bytes)
        #expect(try await store.draftAttachmentReader(fromReader.id).readAll() == small)

        // The MIME writer streams them from the sealed files.
        var message = OutgoingMessage(from: MailAddress(name: nil, address: "alice@example.org"))
        message.to = [MailAddress(name: nil, address: "bob@example.org")]
        message.attachments = try await store.outgoingAttachments(ofDraft: id)
        let written = try MessageWriter.bytes(of: message)
        let parsed = try MIMEParser.parse(written.bytes)
        #expect(parsed.attachments.map(\.body) == [bytes, small])
        #expect(parsed.attachments.map(\.filename) == ["report.pdf", "note.txt"])

        let folder = "\(world.root.path)/store/\(MailStore.sealedFilesFolderName)"
        #expect(try SecureFile.list(folder).count == 2)
        try await store.removeDraftAttachment(fromReader.id)
        #expect(try SecureFile.list(folder).count == 1)
        await #expect(throws: StoreError.draftAttachmentNotFound(fromReader.id)) {
            try await store.draftAttachmentReader(fromReader.id)
        }
        try await store.deleteDraft(id)
        #expect(try SecureFile.list(folder).isEmpty)
        await #expect(throws: StoreError.draftNotFound(id)) {
            try await store.addDraftAttachment(to: id, OutgoingAttachment(filename: nil, bytes: [1]))
        }
        #expect(try SecureFile.list(folder).isEmpty, "the file of a refused attachment is deleted")
    }

    @Test("a changed, cut, swapped or missing attachment file is refused with a typed error")
    func damagedFiles() async throws {
        let world = try await StoreWorld()
        let store = world.store
        let id = try await store.saveDraft(sampleDraft())
        let bytes = [UInt8](repeating: 0x41, count: 150_000)
        let one = try await store.addDraftAttachment(to: id, OutgoingAttachment(filename: "1", bytes: bytes))
        let two = try await store.addDraftAttachment(to: id, OutgoingAttachment(filename: "2", bytes: bytes))
        let folder = "\(world.root.path)/store/\(MailStore.sealedFilesFolderName)"
        let files = try await world.rawQueue().read { db in
            try String.fetchAll(db, sql: "SELECT file FROM draftAttachments ORDER BY id")
        }
        let original = try #require(try SecureFile.read("\(folder)/\(files[0])"))

        func expectCorruptFile(_ attachment: DraftAttachment) async {
            await #expect(throws: StoreError.corruptFile(table: "draftAttachments", id: attachment.id)) {
                _ = try await store.draftAttachmentReader(attachment.id).readAll()
            }
        }
        // Cut at a chunk boundary, cut mid-chunk, extended, one bit flipped, the other file's bytes under this name.
        let chunk = StreamingAEAD.headerCount + StreamingAEAD.chunkSize + StreamingAEAD.tagCount
        var flipped = original
        flipped[original.count / 2] ^= 1
        let other = try #require(try SecureFile.read("\(folder)/\(files[1])"))
        for damaged in [Array(original.prefix(chunk)), Array(original.dropLast(5)), original + [0], flipped, other] {
            try SecureFile.writeAtomically(damaged, to: "\(folder)/\(files[0])")
            await expectCorruptFile(one)
        }
        try SecureFile.remove("\(folder)/\(files[0])")
        await expectCorruptFile(one)
        #expect(try await store.draftAttachmentReader(two.id).readAll() == bytes)

        // Swapping the clear file names of two rows is caught by the sealed metadata, which names its file.
        try await world.rawQueue().write { db in
            try db.execute(sql: "UPDATE draftAttachments SET file = 'x' || file")
            try db.execute(sql: "UPDATE draftAttachments SET file = ? WHERE id = ?", arguments: [files[1], one.id])
            try db.execute(sql: "UPDATE draftAttachments SET file = ? WHERE id = ?", arguments: [files[0], two.id])
        }
        await #expect(throws: StoreError.corruptRecord(table: "draftAttachments", id: one.id)) {
            try await store.draftAttachmentReader(one.id)
        }
        await #expect(throws: StoreError.corruptRecord(table: "draftAttachments", id: two.id)) {
            try await store.draftAttachmentReader(two.id)
        }
        await #expect(throws: StoreError.corruptRecord(table: "draftAttachments", id: one.id)) {
            try await store.draft(id)
        }
    }

    @Test("a draft's sealed record moved to another row, or of the wrong type, is a corrupt record")
    func tamperedRows() async throws {
        let world = try await StoreWorld()
        let store = world.store
        let first = try await store.saveDraft(sampleDraft(subject: "one"))
        let second = try await store.saveDraft(sampleDraft(subject: "two"))
        try await world.rawQueue().write { db in
            try db.execute(
                sql: "UPDATE drafts SET record = (SELECT record FROM drafts WHERE id = ?) WHERE id = ?",
                arguments: [first, second]
            )
        }
        #expect(try await store.draft(first).content.subject == "one")
        await #expect(throws: StoreError.corruptRecord(table: "drafts", id: second)) { try await store.draft(second) }
        await #expect(throws: StoreError.corruptRecord(table: "drafts", id: second)) { try await store.drafts() }
        try await world.rawQueue().write { db in
            try db.execute(sql: "UPDATE drafts SET updated = 'yesterday' WHERE id = ?", arguments: [first])
        }
        await #expect(throws: StoreError.corruptRecord(table: "drafts", id: first)) { try await store.draft(first) }
    }

    @Test("drafts and their attachments need the key: a locked store throws the typed locked error")
    func locked() async throws {
        let world = try await StoreWorld()
        let store = world.store
        let id = try await store.saveDraft(sampleDraft())
        let attachment = try await store.addDraftAttachment(to: id, OutgoingAttachment(filename: nil, bytes: [1, 2]))
        await world.keymaker.lock()
        await #expect(throws: StoreError.locked) { try await store.saveDraft(sampleDraft()) }
        await #expect(throws: StoreError.locked) { try await store.drafts() }
        await #expect(throws: StoreError.locked) { try await store.draft(id) }
        await #expect(throws: StoreError.locked) { try await store.deleteDraft(id) }
        await #expect(throws: StoreError.locked) {
            try await store.addDraftAttachment(to: id, OutgoingAttachment(filename: nil, bytes: [1]))
        }
        await #expect(throws: StoreError.locked) { try await store.draftAttachmentReader(attachment.id) }
        await #expect(throws: StoreError.locked) { try await store.outgoingAttachments(ofDraft: id) }
        await #expect(throws: StoreError.locked) { try await store.removeDraftAttachment(attachment.id) }
    }
}

/// The record decoders: every truncation, a wrong version and a trailing field are refused with
/// `CellReader.Malformed`, never a crash.
@Suite("Outgoing record decoders")
struct OutgoingRecordTests {
    /// Each record kind: a valid cell, and its decoder.
    static let kinds: [(name: String, cell: [UInt8], decode: @Sendable ([UInt8]) throws -> Void)] = [
        ("draft", DraftCoding.record(sampleDraft()), { _ = try DraftCoding.content($0) }),
        (
            "draft attachment",
            DraftCoding.attachmentInfo(
                file: "0123456789abcdef0123456789abcdef.cfd",
                filename: "a.pdf",
                contentType: "application/pdf",
                size: 12
            ),
            { _ = try DraftCoding.attachmentInfo($0) }
        ),
        (
            "contact",
            ContactCoding.record(
                Contact(
                    id: 1,
                    name: "Carol",
                    address: "carol@example.org",
                    timesSeen: 3,
                    lastSeen: Date(),
                    source: .mail
                )
            ),
            { _ = try ContactCoding.contact($0, id: 1) }
        ),
        (
            "outbox item",
            OutboxCoding.record(
                OutboxCoding.Record(
                    file: "0123456789abcdef0123456789abcdef.cfo",
                    size: 10,
                    envelope: MailEnvelope(sender: "a@example.org", recipients: ["b@example.org"]),
                    messageID: "m@example.org",
                    subject: "s"
                )
            ),
            { _ = try OutboxCoding.record($0) }
        ),
    ]

    @Test("a valid record decodes", arguments: 0..<4)
    func valid(kind: Int) throws {
        try Self.kinds[kind].decode(Self.kinds[kind].cell)
    }

    @Test("every truncation of a record's fields is refused", arguments: 0..<4)
    func truncated(kind: Int) {
        let body = unpadded(Self.kinds[kind].cell)
        for length in 0..<body.count {
            #expect(throws: CellReader.Malformed.self, "\(Self.kinds[kind].name) cut to \(length) bytes") {
                try Self.kinds[kind].decode(repadded(Array(body.prefix(length))))
            }
            // And without re-padding: the bytes as they are when a cell is cut.
            #expect(throws: CellReader.Malformed.self) {
                try Self.kinds[kind].decode(Array(Self.kinds[kind].cell.prefix(length)))
            }
        }
    }

    @Test("another record version, a trailing field or garbage is refused", arguments: 0..<4)
    func malformed(kind: Int) {
        let body = unpadded(Self.kinds[kind].cell)
        var version = body
        version[4] = 2  // the record version, a u32 after the cell version byte
        var generator = SystemRandomNumberGenerator()
        let garbage = (0..<64).map { _ in UInt8.random(in: 0...255, using: &generator) }
        for bytes in [repadded(version), repadded(body + [0]), repadded(body + [1, 0, 0, 0, 0]), [], [2], garbage] {
            #expect(throws: CellReader.Malformed.self, "\(Self.kinds[kind].name)") {
                try Self.kinds[kind].decode(bytes)
            }
        }
    }
}
