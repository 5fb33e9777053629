import Foundation
import Testing

@testable import CofferMIME

/// A temporary folder removed when the value is deinitialised.
final class TemporaryFolder {
    let path: String

    init() throws {
        path = NSTemporaryDirectory() + "coffer-mime-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }

    func file(_ name: String, _ bytes: [UInt8]) throws -> String {
        let full = (path as NSString).appendingPathComponent(name)
        try FileManager.default.createDirectory(
            atPath: (full as NSString).deletingLastPathComponent,
            withIntermediateDirectories: true
        )
        try Data(bytes).write(to: URL(fileURLWithPath: full))
        return full
    }
}

private func contents(_ reader: MboxReader) -> [String] {
    reader.map { entry in
        switch entry.content {
        case .success(let bytes): return String(decoding: bytes, as: UTF8.self)
        case .failure(let error): return "error: \(error)"
        }
    }
}

@Suite struct MboxTests {
    static let mboxrd = """
        From alice@example.com Tue Jul  1 10:52:37 2003
        Subject: one

        >From here on
        >>From quoted twice
        From the desk of Alice: no separator, no time

        From bob@example.com Tue Jul  1 11:00:00 2003
        Subject: two

        second

        """

    @Test func mboxrdUnquoting() throws {
        let folder = try TemporaryFolder()
        let path = try folder.file("box.mbox", Array(Self.mboxrd.utf8))
        let reader = try MboxReader(path: path)
        let messages = contents(reader)
        #expect(messages.count == 2)
        #expect(
            messages.first
                == "Subject: one\n\nFrom here on\n>From quoted twice\nFrom the desk of Alice: no separator, no time\n"
        )
        #expect(messages.last == "Subject: two\n\nsecond\n")
    }

    @Test func mboxoUnquoting() throws {
        let folder = try TemporaryFolder()
        let path = try folder.file("box.mbox", Array(Self.mboxrd.utf8))
        let messages = contents(try MboxReader(path: path, format: .mboxo))
        #expect(messages.first?.contains("\nFrom here on\n>>From quoted twice\n") == true)
    }

    @Test func envelopeAndOffsets() throws {
        let folder = try TemporaryFolder()
        let path = try folder.file("box.mbox", Array(Self.mboxrd.utf8))
        let entries = Array(try MboxReader(path: path))
        #expect(entries.map(\.index) == [0, 1])
        #expect(entries[0].offset == 0)
        #expect(entries[0].envelope == "alice@example.com Tue Jul  1 10:52:37 2003")
        let second =
            Self.mboxrd.utf8.count
            - "From bob@example.com Tue Jul  1 11:00:00 2003\nSubject: two\n\nsecond\n".utf8.count
        #expect(entries[1].offset == UInt64(second))
    }

    @Test func crlfFile() throws {
        let folder = try TemporaryFolder()
        let text = Self.mboxrd.replacingOccurrences(of: "\n", with: "\r\n")
        let path = try folder.file("box.mbox", Array(text.utf8))
        let messages = contents(try MboxReader(path: path, chunkSize: 7))
        #expect(messages.count == 2)
        #expect(messages.last == "Subject: two\r\n\r\nsecond\r\n")
        #expect(messages.first?.contains("\r\nFrom here on\r\n>From quoted twice\r\n") == true)
    }

    @Test func tinyChunksGiveTheSameResult() throws {
        let folder = try TemporaryFolder()
        let path = try folder.file("box.mbox", Array(Self.mboxrd.utf8))
        for chunk in [1, 2, 3, 5, 16, 1000] {
            #expect(contents(try MboxReader(path: path, chunkSize: chunk)) == contents(try MboxReader(path: path)))
        }
    }

    @Test func oversizedMessageIsAnErrorEntry() throws {
        let folder = try TemporaryFolder()
        let big = String(repeating: "x", count: 10_000)
        let text =
            "From a@b Mon Jan  1 00:00:00 2024\nSubject: big\n\n\(big)\n\nFrom a@b Mon Jan  1 00:00:01 2024\nSubject: small\n\nok\n"
        let path = try folder.file("box.mbox", Array(text.utf8))
        let reader = try MboxReader(path: path, maxMessageBytes: 4096, chunkSize: 512)
        let messages = contents(reader)
        #expect(messages == ["error: \(MIMEError.messageTooLarge(limit: 4096))", "Subject: small\n\nok\n"])
        #expect(reader.peakBufferedBytes <= 512 + 4096 + 4096 + 1)
    }

    @Test func manyMessagesInBoundedMemory() throws {
        let folder = try TemporaryFolder()
        let path = (folder.path as NSString).appendingPathComponent("large.mbox")
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        let handle = try #require(FileHandle(forWritingAtPath: path))
        let body = String(repeating: "Lorem ipsum dolor sit amet, consectetur adipiscing elit.\n", count: 150)
        var block = ""
        for index in 0..<100 {
            block += "From sender@example.com Mon Jan  1 00:00:00 2024\nSubject: message \(index)\n\n\(body)\n"
        }
        let blockData = Data(block.utf8)
        for _ in 0..<50 {
            handle.write(blockData)
        }
        try handle.close()
        let reader = try MboxReader(path: path, chunkSize: 64 << 10)
        var count = 0
        for entry in reader {
            if case .success(let bytes) = entry.content, bytes.count > 8000 {
                count += 1
            }
        }
        #expect(count == 5000)
        // About 43 MB were read; the reader never held more than one chunk plus one message.
        #expect(reader.peakBufferedBytes < (64 << 10) + 4096 + 20_000)
    }

    @Test func missingFileIsATypedError() {
        #expect(throws: MIMEError.self) { try MboxReader(path: "/nonexistent/coffer/box.mbox") }
    }
}

@Suite struct MaildirAndDetectionTests {
    @Test func maildirReadsCurAndNew() throws {
        let folder = try TemporaryFolder()
        _ = try folder.file("md/cur/1000.a.host:2,RS", Array("Subject: one\n\nbody\n".utf8))
        _ = try folder.file("md/new/2000.b.host", Array("Subject: two\n\nbody\n".utf8))
        _ = try folder.file("md/tmp/3000.c.host", Array("Subject: three\n\nbody\n".utf8))
        _ = try folder.file("md/cur/.hidden", Array("x".utf8))
        let root = (folder.path as NSString).appendingPathComponent("md")
        let entries = Array(try MaildirReader(path: root))
        #expect(entries.map(\.subfolder) == ["cur", "new"])
        #expect(entries.map(\.flags) == ["RS", ""])
        let subjects = try entries.map { try MIMEParser.parse($0.content.get()).subject }
        #expect(subjects == ["one", "two"])
        #expect(try MailSource.detect(path: root) == .maildir)
    }

    @Test func detection() throws {
        let folder = try TemporaryFolder()
        let eml = try folder.file("a.eml", Array("Received: x\nSubject: s\n\nbody\n".utf8))
        let mbox = try folder.file("a.txt", Array("From x@y Mon Jan  1 00:00:00 2024\nSubject: s\n\nb\n".utf8))
        let other = try folder.file("b.eml", Array("just some text\n".utf8))
        #expect(try MailSource.detect(path: eml) == .eml)
        #expect(try MailSource.detect(path: mbox) == .mbox)
        #expect(throws: MIMEError.unrecognizedFormat(path: other)) { try MailSource.detect(path: other) }
        #expect(throws: MIMEError.unrecognizedFormat(path: folder.path)) { try MailSource.detect(path: folder.path) }
    }

    @Test func messageFileSizeCap() throws {
        let folder = try TemporaryFolder()
        let path = try folder.file("big.eml", [UInt8](repeating: 0x41, count: 2000))
        #expect(throws: MIMEError.messageTooLarge(limit: 1000)) {
            try MailSource.readMessageFile(atPath: path, maxBytes: 1000)
        }
        #expect(try MailSource.readMessageFile(atPath: path).count == 2000)
        // One open, and the system's reason when it fails.
        let missing = "\(folder.path)/missing.eml"
        #expect(throws: MIMEError.unreadable(path: missing, reason: "No such file or directory")) {
            try MailSource.readMessageFile(atPath: missing)
        }
        #expect(throws: MIMEError.unreadable(path: missing, reason: "No such file or directory")) {
            try MailSource.detect(path: missing)
        }
    }

    /// A FIFO (or a device) named as a source or lying in a Maildir is refused at once: reading it would block or
    /// never end. The Maildir's other messages are still read.
    @Test func aFIFOIsRefusedWithoutReadingIt() throws {
        let folder = try TemporaryFolder()
        _ = try folder.file("md/cur/1000.a.host:2,S", Array("Subject: one\n\nbody\n".utf8))
        let fifo = "\(folder.path)/md/cur/2000.b.host:2,S"
        #expect(mkfifo(fifo, 0o600) == 0)
        let entries = Array(try MaildirReader(path: "\(folder.path)/md"))
        #expect(entries.count == 2)
        #expect(try MIMEParser.parse(entries[0].content.get()).subject == "one")
        #expect(throws: MIMEError.unreadable(path: fifo, reason: "not a regular file")) { try entries[1].content.get() }
        #expect(throws: MIMEError.unreadable(path: fifo, reason: "not a regular file")) {
            try MailSource.detect(path: fifo)
        }
        #expect(throws: MIMEError.unreadable(path: "/dev/zero", reason: "not a regular file")) {
            try MailSource.readMessageFile(atPath: "/dev/zero")
        }
    }
}
