import Foundation

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
            let folder = (path as NSString).appendingPathComponent(subfolder)
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: folder, isDirectory: &isDirectory), isDirectory.boolValue
            else {
                continue
            }
            foundAny = true
            let names: [String]
            do {
                names = try FileManager.default.contentsOfDirectory(atPath: folder)
            } catch {
                throw .unreadable(path: folder, reason: error.localizedDescription)
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
            let path = ((reader.root as NSString).appendingPathComponent(subfolder) as NSString)
                .appendingPathComponent(name)
            var flags = ""
            if let range = name.range(of: ":2,") {
                flags = String(name[range.upperBound...])
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
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw .unreadable(path: path, reason: "No such file or directory")
        }
        if isDirectory.boolValue {
            for subfolder in ["cur", "new"] {
                var isSubdirectory: ObjCBool = false
                let folder = (path as NSString).appendingPathComponent(subfolder)
                if FileManager.default.fileExists(atPath: folder, isDirectory: &isSubdirectory),
                    isSubdirectory.boolValue
                {
                    return .maildir
                }
            }
            throw .unrecognizedFormat(path: path)
        }
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw .unreadable(path: path, reason: "Permission denied or not a regular file")
        }
        defer { try? handle.close() }
        let head = [UInt8]((try? handle.read(upToCount: 4096)) ?? Data())
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
        let size: Int
        do {
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            size = (attributes[.size] as? NSNumber)?.intValue ?? 0
        } catch {
            throw .unreadable(path: path, reason: error.localizedDescription)
        }
        if size > maxBytes {
            throw .messageTooLarge(limit: maxBytes)
        }
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw .unreadable(path: path, reason: "Permission denied or not a regular file")
        }
        defer { try? handle.close() }
        do {
            let data = try handle.read(upToCount: maxBytes + 1) ?? Data()
            if data.count > maxBytes {
                throw MIMEError.messageTooLarge(limit: maxBytes)
            }
            return [UInt8](data)
        } catch let error as MIMEError {
            throw error
        } catch {
            throw .unreadable(path: path, reason: error.localizedDescription)
        }
    }
}
