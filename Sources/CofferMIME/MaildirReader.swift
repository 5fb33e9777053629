#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One message file read from a Maildir.
public struct MaildirEntry: Sendable {
    /// The full path of the message file.
    public var path: String
    /// `cur` or `new`.
    public var subfolder: String
    /// The Maildir info flags after `:2,` (for example `"RS"` for replied and seen); empty when none.
    public var flags: String
    /// The message bytes, or why the file could not be used.
    public var content: Result<[UInt8], MIMEError>
}

/// Reads the messages of a Maildir (`cur/` then `new/`, each in file-name order; `tmp/` and dot-files are skipped).
/// Only the file names are listed up front; each message is read when the iterator reaches it, and files larger than
/// the per-message cap are reported as `MIMEError.messageTooLarge` without being read.
public struct MaildirReader: Sequence, Sendable {
    private let files: [(subfolder: String, name: String)]
    private let root: String
    private let maxMessageBytes: Int

    /// Lists the Maildir at `path`.
    public init(path: String, maxMessageBytes: Int = MboxReader.defaultMaxMessageBytes) throws(MIMEError) {
        root = path
        self.maxMessageBytes = maxMessageBytes
        var files: [(String, String)] = []
        var foundAny = false
        for subfolder in ["cur", "new"] {
            let folder = MailSource.join(path, subfolder)
            guard MailSource.kind(of: folder) == S_IFDIR else { continue }
            foundAny = true
            let names: [String]
            do {
                names = try FileManager.default.contentsOfDirectory(atPath: folder)
            } catch {
                throw .unreadable(path: folder, reason: String(describing: error))
            }
            for name in names.sorted() where !name.hasPrefix(".") {
                files.append((subfolder, name))
            }
        }
        guard foundAny else {
            throw .unrecognizedFormat(path: path)
        }
        self.files = files
    }

    /// The number of message files found.
    public var count: Int { files.count }

    /// Returns an iterator that reads the files one at a time.
    public func makeIterator() -> Iterator {
        Iterator(reader: self)
    }

    /// Reads one message file per step.
    public struct Iterator: IteratorProtocol {
        private let reader: MaildirReader
        private var position = 0

        fileprivate init(reader: MaildirReader) {
            self.reader = reader
        }

        /// Reads the next message file.
        public mutating func next() -> MaildirEntry? {
            guard position < reader.files.count else {
                return nil
            }
            let (subfolder, name) = reader.files[position]
            position += 1
            let path = MailSource.join(MailSource.join(reader.root, subfolder), name)
            var flags = ""
            if let info = name.utf8.firstRange(of: ":2,".utf8) {
                flags = String(name[info.upperBound...])
            }
            let content: Result<[UInt8], MIMEError>
            do {
                content = .success(try MailSource.readMessageFile(atPath: path, maxBytes: reader.maxMessageBytes))
            } catch {
                content = .failure(error)
            }
            return MaildirEntry(path: path, subfolder: subfolder, flags: flags, content: content)
        }
    }
}

/// The kinds of mail source a path can hold.
public enum MailSourceKind: Sendable, Hashable {
    /// A single RFC 5322 message file (`.eml`).
    case eml
    /// An mbox file of many messages.
    case mbox
    /// A Maildir folder (with `cur/` and/or `new/`).
    case maildir
}

/// Detection of mail sources and reading of single message files.
public enum MailSource {
    /// Decides whether `path` is a Maildir folder, an mbox file or a single message, from its structure and its
    /// first bytes (not its name).
    public static func detect(path: String) throws(MIMEError) -> MailSourceKind {
        guard let kind = kind(of: path) else {
            throw .unreadable(path: path, reason: "No such file or directory")
        }
        if kind == S_IFDIR {
            for subfolder in ["cur", "new"] where self.kind(of: join(path, subfolder)) == S_IFDIR {
                return .maildir
            }
            throw .unrecognizedFormat(path: path)
        }
        let head = try readPrefix(path, upTo: 4096)
        var start = 0
        while start < head.count && (head[start] == 0x0A || head[start] == 0x0D) {
            start += 1
        }
        let firstLine = head[start...].prefix { $0 != 0x0A }
        if firstLine.starts(with: "From ".utf8) {
            return .mbox
        }
        if let colon = firstLine.firstIndex(of: UInt8(ascii: ":")), colon > firstLine.startIndex,
            firstLine[firstLine.startIndex..<colon].allSatisfy({ $0 > 0x20 && $0 < 0x7F })
        {
            return .eml
        }
        throw .unrecognizedFormat(path: path)
    }

    /// Reads a whole message file, refusing files larger than `maxBytes` without reading them.
    public static func readMessageFile(
        atPath path: String,
        maxBytes: Int = MboxReader.defaultMaxMessageBytes
    ) throws(MIMEError) -> [UInt8] {
        let bytes = try readPrefix(path, upTo: maxBytes + 1, refusingFilesOver: maxBytes)
        // A file that grew while it was read.
        if bytes.count > maxBytes {
            throw .messageTooLarge(limit: maxBytes)
        }
        return bytes
    }

    /// `folder` and `name` joined with one `/`.
    static func join(_ folder: String, _ name: String) -> String {
        folder.hasSuffix("/") ? folder + name : folder + "/" + name
    }

    /// The file type bits (`S_IFDIR`, `S_IFREG`…) of what `path` names, following links; `nil` when nothing is there.
    static func kind(of path: String) -> mode_t? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return status.st_mode & S_IFMT
    }

    /// At most `count` bytes from the start of the regular file at `path`, in a buffer the size of the file (a file
    /// that grows while it is read is read on, up to `count`). Anything else is refused once open, without blocking
    /// (`O_NONBLOCK`): a FIFO or a device would block the read or never end. A file larger than `limit` is refused
    /// as ``MIMEError/messageTooLarge(limit:)`` before any of it is read.
    static func readPrefix(
        _ path: String,
        upTo count: Int,
        refusingFilesOver limit: Int? = nil
    ) throws(MIMEError) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            // A socket cannot be opened (ENXIO); anything else says why in the system's words.
            throw .unreadable(
                path: path,
                reason: errno == ENXIO ? "not a regular file" : String(cString: strerror(errno))
            )
        }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
            throw .unreadable(path: path, reason: "not a regular file")
        }
        if let limit, Int(status.st_size) > limit { throw .messageTooLarge(limit: limit) }
        let size = max(Int(status.st_size), 0)
        var bytes = [UInt8](repeating: 0, count: min(count, size + 1))
        var filled = 0
        while filled < count {
            if filled == bytes.count {
                bytes.append(contentsOf: repeatElement(0, count: min(count - filled, max(filled, 4096))))
            }
            let got = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + filled, $0.count - filled) }
            if got < 0 && errno == EINTR { continue }
            guard got >= 0 else { throw .unreadable(path: path, reason: String(cString: strerror(errno))) }
            if got == 0 { break }
            filled += got
        }
        bytes.removeSubrange(filled...)
        return bytes
    }
}
