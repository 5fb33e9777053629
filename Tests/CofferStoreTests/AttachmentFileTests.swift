import CofferCrypto
import CofferMIME
import CofferTesting
import Foundation
import GRDB
import Testing

@testable import CofferStore

#if canImport(Glibc)
import Glibc
#endif

/// Large attachments of stored messages in sealed files of their own (migration `v6-attachment-files`), and the
/// streamed import of an outbox message (the Sent copy) that puts them there.
@Suite("Attachment files")
struct AttachmentFileTests {
    static let canary = Array("CanaryLargeAttachment4K9 in the clear".utf8)

    /// 3 MiB of varied bytes with the canary every 64 KiB.
    static func largeAttachment() -> [UInt8] {
        var bytes = (0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 13) }
        for offset in stride(from: 1000, to: bytes.count - canary.count, by: 65_536) {
            bytes.replaceSubrange(offset..<offset + canary.count, with: canary)
        }
        return bytes
    }

    /// A message with the large attachment and a small one.
    static func message(_ large: [UInt8]) -> OutgoingMessage {
        var message = outgoing(subject: "Quarterly figures", text: "See the attached files.\n")
        message.attachments = [
            OutgoingAttachment(filename: "figures.bin", bytes: large),
            OutgoingAttachment(filename: "notes.txt", bytes: Array("short notes\n".utf8)),
        ]
        return message
    }

    func folder(_ world: StoreWorld) -> String { "\(world.root.path)/store/\(MailStore.sealedFilesFolderName)" }

    /// The attachment rows of a message: file name (nil when inline) and the sealed body cell's length.
    func rows(_ world: StoreWorld) throws -> [(file: String?, body: Int)] {
        try world.rawQueue().read { db in
            try Row.fetchAll(db, sql: "SELECT file, length(body) AS body FROM attachments ORDER BY id").map {
                ($0["file"], $0["body"])
            }
        }
    }

    @Test(
        "an outbox message imported streamed reads back as the same message and attachments as a whole import, its large attachment in a sealed file"
    )
    func streamedImport() async throws {
        let large = Self.largeAttachment()
        let world = try await StoreWorld()
        let item = try await world.store.enqueue(Self.message(large), accountID: 1)
        let bytes = try await world.store.openOutboxMessage(item.id).readAll()
        let outcome = try await world.store.importOutboxMessage(item.id, flags: [.seen], labels: ["Sent"])
        let id = try #require(outcome.id)

        // The same bytes imported whole into another store (the code before this change): the same message.
        let reference = try await StoreWorld()
        let wholeID = try #require(
            try await reference.store.importMessage(RawMessage(bytes: bytes, flags: [.seen], labels: ["Sent"])).id
        )
        let streamed = try await world.store.message(id)
        let whole = try await reference.store.message(wholeID)
        #expect(streamed == whole)
        #expect(streamed.attachments.map(\.size) == [large.count, 12])
        for (mine, theirs) in zip(streamed.attachments, whole.attachments) {
            let content = try await world.store.attachmentContent(mine.id)
            #expect(content.content == (try await reference.store.attachmentContent(theirs.id).content))
            #expect(content.info == mine)
        }
        #expect(try await world.store.attachmentContent(streamed.attachments[0].id).content == large)

        // The large body is a file; its cell is a short reference. The small one stays in its cell.
        let stored = try rows(world)
        #expect(stored.count == 2)
        let file = try #require(stored[0].file)
        #expect(file.hasSuffix(".cfb") && stored[0].body < 200)
        #expect(stored[1].file == nil)
        #expect(SecureFile.exists("\(folder(world))/\(file)"))
        #expect(try rows(reference).allSatisfy { $0.file == nil }, "a whole import keeps the body in its cell")

        // No plaintext anywhere in the store, the sealed file included.
        #expect(CanaryScanner.occurrences(of: [Self.canary], under: [world.root.path]).isEmpty)
        // The scanner finds the canary where it is in the clear.
        let clear = TemporaryDirectory(prefix: "coffer-attachment-file-control")
        try SecureFile.writeAtomically(large, to: "\(clear.path)/control")
        #expect(!CanaryScanner.occurrences(of: [Self.canary], under: [clear.path]).isEmpty)
    }

    @Test("the streamed Sent copy has the content hash of its bytes: storing them again, or syncing them, adds nothing")
    func sentCopyDedupe() async throws {
        let world = try await StoreWorld()
        let store = world.store
        let item = try await store.enqueue(Self.message(Self.largeAttachment()), accountID: 1)
        let bytes = try await store.openOutboxMessage(item.id).readAll()
        let id = try #require(try await store.importOutboxMessage(item.id, flags: [.seen], labels: ["Sent"]).id)
        #expect(try await store.importOutboxMessage(item.id, flags: [.seen], labels: ["Sent"]) == .duplicate)
        #expect(try await store.importMessage(RawMessage(bytes: bytes, labels: ["Sent"])) == .duplicate)
        #expect(try SecureFile.list(folder(world)).filter { $0.hasSuffix(".cfb") }.count == 1, "no file left over")

        // The Sent folder synced later: the server's copy is the same bytes, so it locates the stored message.
        let account = try await store.addServerAccount(
            ServerAccount(host: "h.test", port: 993, username: "u", password: "p")
        )
        let sent = try await store.addSyncFolder(accountID: account, name: "Sent", uidValidity: 1)
        let fetched = FetchedMail(uid: 7, bytes: bytes, flags: [.seen], label: "Sent")
        #expect(try await store.storeFetchedMail([fetched], folderID: sent.id) == [.located(id)])
        #expect(try await store.count() == 1)

        // Expunged on the server: the message goes, and its file once that committed.
        #expect(try await store.deleteLocations(folderID: sent.id, uids: [7]) == 1)
        #expect(try await store.count() == 0)
        #expect(try SecureFile.list(folder(world)).filter { $0.hasSuffix(".cfb") }.isEmpty)
    }

    @Test("deleting a message, forgetting its folder or removing its account deletes its attachment files")
    func deletion() async throws {
        let world = try await StoreWorld()
        let store = world.store
        let large = Self.largeAttachment()
        var ids: [Int64] = []
        var bytes: [[UInt8]] = []
        for subject in ["one", "two", "three"] {
            var message = Self.message(large)
            message.subject = subject
            let item = try await store.enqueue(message, accountID: 1)
            bytes.append(try await store.openOutboxMessage(item.id).readAll())
            ids.append(try #require(try await store.importOutboxMessage(item.id, labels: ["Sent"]).id))
        }
        func files() throws -> [String] { try SecureFile.list(folder(world)).filter { $0.hasSuffix(".cfb") } }
        #expect(try files().count == 3)
        let attachment = try await store.message(ids[0]).attachments[0].id
        try await store.deleteMessage(ids[0])
        #expect(try files().count == 2)
        await #expect(throws: StoreError.attachmentNotFound(attachment)) {
            try await store.attachmentContent(attachment)
        }

        let account = try await store.addServerAccount(
            ServerAccount(host: "h.test", port: 993, username: "u", password: "p")
        )
        let sent = try await store.addSyncFolder(accountID: account, name: "Sent", uidValidity: 1)
        let archive = try await store.addSyncFolder(accountID: account, name: "Archive", uidValidity: 1)
        let one = FetchedMail(uid: 1, bytes: bytes[1], flags: [], label: "Sent")
        let two = FetchedMail(uid: 2, bytes: bytes[2], flags: [], label: "Archive")
        #expect(try await store.storeFetchedMail([one], folderID: sent.id) == [.located(ids[1])])
        #expect(try await store.storeFetchedMail([two], folderID: archive.id) == [.located(ids[2])])
        #expect(try await store.forgetSyncFolder(sent.id) == 1)
        #expect(try files().count == 1)
        #expect(try await store.removeAccount(account) == 1)
        #expect(try files().isEmpty)
        #expect(try await store.count() == 0)
    }

    @Test("a file no row names (a kill before the commit, or after it and before the deletion) is swept at open")
    func orphanSwept() async throws {
        let world = try await StoreWorld()
        let store = world.store
        let large = Self.largeAttachment()
        let kept = try await store.enqueue(Self.message(large), accountID: 1)
        let keptID = try #require(try await store.importOutboxMessage(kept.id).id)
        var other = Self.message(large)
        other.subject = "orphaned"
        let orphaned = try await store.enqueue(other, accountID: 1)
        let orphanedID = try #require(try await store.importOutboxMessage(orphaned.id).id)
        let files = try rows(world).compactMap(\.file)
        #expect(files.count == 2)
        // The row goes without its file, as when a process dies between the commit and the deletion.
        try await world.rawQueue().write { db in
            try db.execute(sql: "DELETE FROM messages WHERE id = ?", arguments: [orphanedID])
        }
        var times = [timespec(tv_sec: 1_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000, tv_nsec: 0)]
        for file in files { #expect(utimensat(AT_FDCWD, "\(folder(world))/\(file)", &times, 0) == 0) }
        let reopened = try MailStore(folder: "\(world.root.path)/store", keys: world.keymaker)
        #expect(!SecureFile.exists("\(folder(world))/\(files[1])"), "the orphan is deleted")
        #expect(SecureFile.exists("\(folder(world))/\(files[0])"), "a file a row names is kept, however old")
        let attachment = try await reopened.message(keptID).attachments[0]
        #expect(try await reopened.attachmentContent(attachment.id).content == large)
    }

    /// Runs the streaming pass over `bytes` as if they were an outbox message's, with a small threshold.
    func scan(_ bytes: [UInt8], world: StoreWorld, threshold: Int = 1000) async throws -> SpillingScan.Result? {
        let keys = try await world.store.keys()
        let files = folder(world)
        var source = CountingSource(BufferSource(bytes))
        let (name, size) = try MailStore.writeSealedFile(
            .outboxMessage,
            folder: files,
            key: keys.fileKey(.outboxMessage),
            from: &source
        )
        defer { try? SecureFile.remove("\(files)/\(name)") }
        let reader = try SealedFileReader(
            path: "\(files)/\(name)",
            key: keys.fileKey(.outboxMessage),
            context: SealedFileKind.outboxMessage.context(file: name),
            size: size,
            table: "outbox",
            id: 0
        )
        var scan = SpillingScan(
            folder: files,
            key: keys.fileKey(.attachmentFile),
            hash: keys.lookup.start(tag: HashTag.content)
        )
        scan.threshold = threshold
        return try scan.run(reader)
    }

    /// A base64 body of `bytes` in lines of `width` characters, with `newline` line ends.
    static func base64Lines(_ bytes: [UInt8], width: Int = 76, newline: String = "\r\n") -> String {
        let encoded = Array(Data(bytes).base64EncodedString())
        return stride(from: 0, to: encoded.count, by: width).map {
            String(encoded[$0..<min($0 + width, encoded.count)]) + newline
        }.joined()
    }

    /// A nested multipart with three base64 attachments: one large and clean, one large with a space in a line,
    /// one small.
    static func nested(newline: String, large: [UInt8], unclean: [UInt8], small: [UInt8]) -> [UInt8] {
        let n = newline
        var bad = base64Lines(unclean, newline: n)
        let cut = bad.index(bad.startIndex, offsetBy: 200)
        bad.replaceSubrange(cut...cut, with: " ")
        let text =
            "From: a@example.org\(n)To: b@example.org\(n)Subject: nested\(n)Message-ID: <nested@example.org>\(n)"
            + "MIME-Version: 1.0\(n)Content-Type: multipart/mixed; boundary=\"outer\"\(n)\(n)preamble\(n)"
            + "--outer\(n)Content-Type: multipart/alternative; boundary=inner\(n)\(n)"
            + "--inner\(n)Content-Type: text/plain\(n)\(n)plain text\(n)"
            + "--inner\(n)Content-Type: text/html\(n)\(n)<p>html</p>\(n)--inner--\(n)"
            + "--outer\(n)Content-Type: application/octet-stream; name=large.bin\(n)"
            + "Content-Disposition: attachment; filename=large.bin\(n)Content-Transfer-Encoding: base64\(n)\(n)"
            + base64Lines(large, newline: n)
            + "--outer\(n)Content-Type: application/octet-stream\(n)"
            + "Content-Disposition: attachment; filename=unclean.bin\(n)Content-Transfer-Encoding: base64\(n)\(n)"
            + bad
            + "--outer\(n)Content-Type: image/png\(n)Content-ID: <small@x>\(n)Content-Transfer-Encoding: base64\(n)\(n)"
            + base64Lines(small, newline: n)
            + "--outer--  \(n)epilogue\(n)"
        return Array(text.utf8)
    }

    @Test(
        "the streaming pass spills only clean large base64 bodies, keeps the rest byte for byte, and hashes every byte",
        arguments: ["\r\n", "\n"]
    )
    func spillingPass(newline: String) async throws {
        let world = try await StoreWorld()
        let keys = try await world.store.keys()
        let large = (0..<5000).map { UInt8(truncatingIfNeeded: $0 * 7) }
        let unclean = (0..<4000).map { UInt8(truncatingIfNeeded: $0 * 13) }
        let small = Array(repeating: UInt8(9), count: 300)
        let bytes = Self.nested(newline: newline, large: large, unclean: unclean, small: small)
        let result = try #require(try await scan(bytes, world: world))
        #expect(result.contentHash == keys.lookup.hash(tag: HashTag.content, bytes))
        #expect(result.size == Int64(bytes.count))
        #expect(result.spills.count == 1)
        let spill = try #require(result.spills.first)
        #expect(spill.size == Int64(large.count))
        let spilled = try SealedFileReader(
            path: "\(folder(world))/\(spill.file)",
            key: keys.fileKey(.attachmentFile),
            context: SealedFileKind.attachmentFile.context(file: spill.file),
            size: spill.size,
            table: "attachments",
            id: 0
        ).readAll()
        #expect(spilled == large)
        // What is kept parses as the original does, the spilled body standing as its token.
        let original = try MIMEParser.parse(bytes)
        let reduced = try MIMEParser.parse(result.reduced)
        #expect(reduced.textBody == original.textBody && reduced.htmlBody == original.htmlBody)
        #expect(reduced.headers == original.headers)
        #expect(reduced.attachments.map(\.filename) == original.attachments.map(\.filename))
        #expect(reduced.attachments.map(\.body) == [spill.token, original.attachments[1].body, small])
        #expect(original.attachments.map(\.body) == [large, original.attachments[1].body, small])
        #expect(result.reduced.count < bytes.count - 6000)
    }

    @Test("a large base64 body that turns unclean after it started to spill ends the pass and leaves no file")
    func uncleanAfterSpilling() async throws {
        let world = try await StoreWorld()
        let large = (0..<5000).map { UInt8(truncatingIfNeeded: $0 * 7) }
        var body = Self.base64Lines(large)
        body.insert("!", at: body.index(body.endIndex, offsetBy: -100))
        let bytes = Array(
            ("From: a@example.org\r\nSubject: x\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n"
                + "Content-Disposition: attachment; filename=a.bin\r\nContent-Transfer-Encoding: base64\r\n\r\n"
                + body + "--b--\r\n").utf8
        )
        #expect(try await scan(bytes, world: world) == nil)
        #expect(try SecureFile.list(folder(world)).isEmpty, "neither the spilled file nor a temporary one is left")
        // Below the threshold the same body is kept as it is.
        let kept = try #require(try await scan(bytes, world: world, threshold: 1 << 20))
        #expect(kept.reduced == bytes && kept.spills.isEmpty)
    }

    @Test("a file-backed attachment whose clear file name, reference cell or file was changed is refused as corrupt")
    func tampering() async throws {
        let world = try await StoreWorld()
        let store = world.store
        let large = Self.largeAttachment()
        var ids: [Int64] = []
        for subject in ["one", "two"] {
            var message = Self.message(large)
            message.subject = subject
            let item = try await store.enqueue(message, accountID: 1)
            ids.append(try #require(try await store.importOutboxMessage(item.id).id))
        }
        let attachments = [
            try await store.message(ids[0]).attachments[0].id, try await store.message(ids[1]).attachments[0].id,
        ]
        let files = try rows(world).compactMap(\.file)
        #expect(files.count == 2)
        // The clear names swapped: each reference names its own file.
        try await world.rawQueue().write { db in
            try db.execute(sql: "UPDATE attachments SET file = 'x' || file WHERE file IS NOT NULL")
            try db.execute(sql: "UPDATE attachments SET file = ? WHERE id = ?", arguments: [files[1], attachments[0]])
            try db.execute(sql: "UPDATE attachments SET file = ? WHERE id = ?", arguments: [files[0], attachments[1]])
        }
        await #expect(throws: StoreError.corruptMessage(ids[0])) { try await store.attachmentContent(attachments[0]) }
        // The clear name dropped: the reference is not an inline body.
        try await world.rawQueue().write { db in
            try db.execute(sql: "UPDATE attachments SET file = NULL WHERE id = ?", arguments: [attachments[1]])
        }
        await #expect(throws: StoreError.corruptMessage(ids[1])) { try await store.attachmentContent(attachments[1]) }

        // A fresh message whose file is cut short, then missing.
        let item = try await store.enqueue(Self.message(Array(large.reversed())), accountID: 1)
        let id = try #require(try await store.importOutboxMessage(item.id).id)
        let attachment = try await store.message(id).attachments[0].id
        let file = try #require(try rows(world).last { $0.file != nil }?.file)
        let path = "\(folder(world))/\(file)"
        let sealed = try #require(try SecureFile.read(path))
        try SecureFile.writeAtomically(Array(sealed.dropLast(70_000)), to: path)
        await #expect(throws: StoreError.corruptMessage(id)) { try await store.attachmentContent(attachment) }
        try SecureFile.remove(path)
        await #expect(throws: StoreError.corruptMessage(id)) { try await store.attachmentContent(attachment) }
    }

    @Test(
        "imports and deletions killed with SIGKILL at random points leave no row without its file; the sweep takes the orphans"
    )
    func killedImports() async throws {
        let root = TemporaryDirectory(prefix: "coffer-attachment-file-crash")
        let key = (0..<32).map { _ in UInt8.random(in: 0...255) }
        let folder = "\(root.path)/store"
        let files = "\(folder)/\(MailStore.sealedFilesFolderName)"
        let environment = [
            OutboxChildEnvironment.role: "attachment-files",
            OutboxChildEnvironment.key: key.hexString,
            OutboxChildEnvironment.store: folder,
        ]
        let keymaker = try await Fixtures.unlockedKeymaker(account: "outbox", mainKey: key)
        /// Every row's file is there and reads back whole; returns the files rows name.
        func check() async throws -> Set<String> {
            let store = try MailStore(folder: folder, keys: keymaker)
            defer { try? store.close() }
            let named = try await store.database.read { db in
                try Row.fetchAll(db, sql: "SELECT messageID, file FROM attachments WHERE file IS NOT NULL").map {
                    (messageID: $0["messageID"] as Int64, file: $0["file"] as String)
                }
            }
            for row in named {
                let attachment = try #require(try await store.message(row.messageID).attachments.first)
                #expect(try await store.attachmentContent(attachment.id).content.count == attachment.size)
            }
            return Set(named.map(\.file))
        }
        var killed = 0
        var runs = 0
        while killed < 5 && runs < 12 {
            runs += 1
            if try OutboxChildEnvironment.run(
                suite: "AttachmentFileChild",
                environment: environment,
                killAfter: Int.random(in: 500...6000)
            ).killed {
                killed += 1
            }
            _ = try await check()
        }
        #expect(killed > 0, "the child must have been killed mid-run at least once")
        // Once a minute old, what no row names (orphans, temporary files of the dead writers) is swept at open.
        let before = try SecureFile.list(files)
        var times = [timespec(tv_sec: 1_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000, tv_nsec: 0)]
        for name in before { #expect(utimensat(AT_FDCWD, "\(files)/\(name)", &times, 0) == 0) }
        let named = try await check()
        let left = Set(try SecureFile.list(files).filter { $0.hasSuffix(".cfb") })
        #expect(left == named, "every file left is named by a row")
        #expect(try SecureFile.list(files).allSatisfy { !$0.hasPrefix(".") }, "no temporary file left")
        print(
            "AttachmentFileTests.killedImports: \(runs) runs, \(killed) killed, \(named.count) files kept, "
                + "\(before.count - (try SecureFile.list(files)).count) swept (\(before.filter { $0.hasPrefix(".") }.count) temporary)"
        )
    }
}

/// The child side of ``AttachmentFileTests/killedImports()``: runs only inside the processes it starts (and kills).
@Suite("Attachment file child")
struct AttachmentFileChild {
    /// Queues, imports (streamed) and cancels messages with a large attachment, deleting every other one imported.
    @Test(
        "import and delete for the parent",
        .enabled(
            if: OutboxChildEnvironment.role_ == "attachment-files",
            "runs only inside the child the attachment-file kill test starts"
        )
    )
    func importAndDelete() async throws {
        let environment = ProcessInfo.processInfo.environment
        let key = try #require(environment[OutboxChildEnvironment.key].flatMap { [UInt8](hexString: $0) })
        let store = try MailStore(
            folder: try #require(environment[OutboxChildEnvironment.store]),
            keys: try await Fixtures.unlockedKeymaker(account: "outbox", mainKey: key)
        )
        let large = (0..<((1 << 20) + 300_000)).map { UInt8(truncatingIfNeeded: $0 &* 40_503 >> 5) }
        var previous: Int64?
        for number in 0..<12 {
            var message = outgoing(subject: "kill \(UInt64.random(in: 0...UInt64.max)) \(number)", attachment: large)
            message.bcc = []
            let item = try await store.enqueue(message, accountID: 1)
            let id = try #require(try await store.importOutboxMessage(item.id, labels: ["Sent"]).id)
            try await store.cancel(item.id)
            if let previous, number % 2 == 1 { try await store.deleteMessage(previous) }
            previous = id
        }
        try store.close()
    }

    /// The one writer of sealed files takes its plaintext in pieces of any size: whatever the split (empty pieces,
    /// a byte, a chunk less one, a whole chunk, several chunks at once), the file reads back as the same bytes, and
    /// a length that ends exactly on a chunk boundary keeps its last chunk last.
    @Test(arguments: [
        [0], [1], [65_536], [65_535, 1], [65_536, 0, 1], [1, 65_535, 65_536, 65_537], [200_000, 3],
        [0, 131_072, 0], [70_000, 70_000, 70_000],
    ])
    func sealedFileWriterTakesAnySplit(pieces: [Int]) throws {
        let folder = TemporaryDirectory(prefix: "coffer-sealed-writer")
        let key = try EnvelopeKey(SecretBytes(copying: (0..<32).map { UInt8($0) }))
        let total = pieces.reduce(0, +)
        let plaintext = (0..<total).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 7) }
        let writer = try SealedFileWriter(.attachmentFile, folder: folder.path, key: key)
        var offset = 0
        for piece in pieces {
            try writer.append(Array(plaintext[offset..<offset + piece]))
            offset += piece
        }
        let (name, size) = try writer.finish()
        #expect(size == Int64(total))
        let reader = try SealedFileReader(
            path: "\(folder.path)/\(name)",
            key: key,
            context: SealedFileKind.attachmentFile.context(file: name),
            size: size,
            table: "attachments",
            id: 1
        )
        #expect(try reader.readAll() == plaintext)
    }
}
