#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// How `>From ` lines in an mbox body were escaped by the program that wrote the file.
public enum MboxFormat: Sendable, Hashable {
    /// mboxrd: every `>*From ` line was quoted with one more `>`; one `>` is removed from each such line.
    case mboxrd
    /// mboxo: only `From ` lines were quoted; `>From ` lines lose their `>`, deeper quoting is left alone.
    case mboxo
}

/// One message read from an mbox file.
public struct MboxEntry: Sendable {
    /// The 0-based position of the message in the file.
    public var index: Int
    /// The byte offset of the message's `From ` separator line (or 0 for text before the first separator).
    public var offset: UInt64
    /// The separator line after `From ` (envelope sender and date), at most 1,000 bytes; empty if there was none.
    public var envelope: String
    /// The message bytes with the separator removed and `>From ` quoting undone, or why the message was skipped.
    public var content: Result<[UInt8], MIMEError>
}

/// Reads an mbox file message by message with a fixed-size read buffer: memory use is bounded by the chunk size plus
/// the per-message cap, whatever the file size. A message larger than the cap is skipped and reported as a
/// `MIMEError.messageTooLarge` entry; reading continues with the next message.
///
/// A line starting with `From ` separates messages when it is the first line of the file, or when it follows a blank
/// line and looks like a separator (it contains a time such as `12:08`). Body lines such as "From the desk of..."
/// therefore stay in the body even if the writer forgot to quote them. LF and CRLF files are both accepted; line
/// endings are passed through unchanged.
///
/// The reader is a single-pass iterator that owns an open file descriptor; it is not meant to be shared between tasks.
public final class MboxReader: Sequence, IteratorProtocol {
    /// The default per-message cap: 64 MiB.
    public static let defaultMaxMessageBytes = 64 << 20

    private let path: String
    private let format: MboxFormat
    private let maxMessageBytes: Int
    private let lineCap = 4096
    private var descriptor: Int32
    private var chunk: [UInt8]
    private var chunkCount = 0
    private var chunkPosition = 0
    private var chunkBaseOffset: UInt64 = 0
    private var endOfFile = false
    private var finished = false

    private var pendingLine: [UInt8] = []
    private var lineIsContinuation = false
    private var lineStartOffset: UInt64 = 0
    private var atFileStart = true
    private var previousLineBlank = false

    private var message: [UInt8] = []
    private var oversized = false
    private var hasSeparator = false
    private var messageOffset: UInt64 = 0
    private var envelope = ""
    private var nextIndex = 0

    /// The most bytes the reader has held at once (read buffer, partial line and current message); it never exceeds
    /// `chunkSize + 4096 + maxMessageBytes` plus the length of one line.
    public private(set) var peakBufferedBytes = 0

    /// Opens `path` for reading.
    /// - Parameters:
    ///   - format: how `>From ` lines are unquoted (mboxrd by default).
    ///   - maxMessageBytes: messages larger than this are skipped with an error entry.
    ///   - chunkSize: the size of the fixed read buffer.
    public init(
        path: String,
        format: MboxFormat = .mboxrd,
        maxMessageBytes: Int = MboxReader.defaultMaxMessageBytes,
        chunkSize: Int = 64 << 10
    ) throws(MIMEError) {
        self.path = path
        self.format = format
        self.maxMessageBytes = maxMessageBytes
        self.chunk = [UInt8](repeating: 0, count: Swift.max(chunkSize, 16))
        descriptor = open(path, O_RDONLY)
        if descriptor < 0 {
            throw .unreadable(path: path, reason: String(cString: strerror(errno)))
        }
    }

    deinit {
        if descriptor >= 0 {
            close(descriptor)
        }
    }

    /// Returns the next message, or `nil` at the end of the file.
    public func next() -> MboxEntry? {
        while !finished {
            if chunkPosition == chunkCount {
                if endOfFile {
                    finished = true
                    if !pendingLine.isEmpty {
                        let line = pendingLine
                        pendingLine = []
                        if let entry = handleLine(line) {
                            return entry
                        }
                    }
                    return finishMessage()
                }
                if let failure = refill() {
                    finished = true
                    return failure
                }
                continue
            }
            if !lineIsContinuation && pendingLine.isEmpty {
                lineStartOffset = chunkBaseOffset + UInt64(chunkPosition)
            }
            let newline: Int? = chunk.withUnsafeBufferPointer { buffer in
                guard let base = buffer.baseAddress,
                    let found = memchr(base + chunkPosition, Int32(UInt8(ascii: "\n")), chunkCount - chunkPosition)
                else {
                    return nil
                }
                return UnsafePointer(found.assumingMemoryBound(to: UInt8.self)) - base
            }
            let segmentEnd = newline.map { $0 + 1 } ?? chunkCount
            let segment = chunk[chunkPosition..<segmentEnd]
            chunkPosition = segmentEnd
            if lineIsContinuation {
                append(segment)
                if newline != nil {
                    lineIsContinuation = false
                    previousLineBlank = false
                }
                continue
            }
            pendingLine.append(contentsOf: segment)
            notePeak()
            if newline != nil {
                let line = pendingLine
                pendingLine = []
                if let entry = handleLine(line) {
                    return entry
                }
            } else if pendingLine.count > lineCap {
                // Too long to be a separator: unquote its start and pass the rest through as it arrives.
                let line = pendingLine
                pendingLine = []
                append(unquoted(line))
                atFileStart = false
                lineIsContinuation = true
            }
        }
        return nil
    }

    private func refill() -> MboxEntry? {
        chunkBaseOffset += UInt64(chunkCount)
        chunkPosition = 0
        chunkCount = 0
        let capacity = chunk.count
        var result = 0
        repeat {
            result = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, capacity) }
        } while result < 0 && errno == EINTR
        if result < 0 {
            let reason = String(cString: strerror(errno))
            return MboxEntry(
                index: nextIndex,
                offset: chunkBaseOffset,
                envelope: "",
                content: .failure(.unreadable(path: path, reason: reason))
            )
        }
        if result == 0 {
            endOfFile = true
        }
        chunkCount = result
        return nil
    }

    private func notePeak() {
        peakBufferedBytes = Swift.max(peakBufferedBytes, chunk.count + pendingLine.count + message.count)
    }

    private func append(_ bytes: some Collection<UInt8>) {
        if oversized {
            return
        }
        if message.count + bytes.count > maxMessageBytes {
            oversized = true
            message = []
            return
        }
        message.append(contentsOf: bytes)
        notePeak()
    }

    private func unquoted(_ line: [UInt8]) -> ArraySlice<UInt8> {
        var quotes = 0
        while quotes < line.count && line[quotes] == UInt8(ascii: ">") {
            quotes += 1
        }
        guard quotes > 0, format == .mboxrd || quotes == 1, Self.startsWithFrom(line[quotes...]) else {
            return line[...]
        }
        return line.dropFirst()
    }

    private static func startsWithFrom(_ bytes: ArraySlice<UInt8>) -> Bool {
        bytes.starts(with: "From ".utf8)
    }

    private static func content(of line: [UInt8]) -> ArraySlice<UInt8> {
        var end = line.count
        if end > 0 && line[end - 1] == UInt8(ascii: "\n") {
            end -= 1
            if end > 0 && line[end - 1] == UInt8(ascii: "\r") {
                end -= 1
            }
        }
        return line[..<end]
    }

    /// A separator names a sender and a date; requiring a time (`d:dd`) keeps ordinary prose out.
    private static func looksLikeSeparator(_ content: ArraySlice<UInt8>) -> Bool {
        let bytes = Array(content)
        guard bytes.count > 5 else {
            return false
        }
        let isDigit: (UInt8) -> Bool = { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
        var index = 6
        while index + 2 < bytes.count {
            if bytes[index] == UInt8(ascii: ":") && isDigit(bytes[index - 1]) && isDigit(bytes[index + 1])
                && isDigit(bytes[index + 2])
            {
                return true
            }
            index += 1
        }
        return false
    }

    private func handleLine(_ line: [UInt8]) -> MboxEntry? {
        let content = Self.content(of: line)
        if Self.startsWithFrom(content) && (atFileStart || (previousLineBlank && Self.looksLikeSeparator(content))) {
            let finishedEntry = finishMessage()
            hasSeparator = true
            messageOffset = lineStartOffset
            envelope = String(decoding: content.dropFirst(5).prefix(1000), as: UTF8.self)
            atFileStart = false
            previousLineBlank = false
            return finishedEntry
        }
        atFileStart = false
        append(unquoted(line))
        previousLineBlank = content.isEmpty
        return nil
    }

    private func finishMessage() -> MboxEntry? {
        defer {
            message = []
            oversized = false
            hasSeparator = false
            envelope = ""
        }
        if !hasSeparator && !oversized && message.allSatisfy({ $0 == 0x0A || $0 == 0x0D || $0 == 0x20 || $0 == 0x09 }) {
            return nil
        }
        let index = nextIndex
        nextIndex += 1
        if oversized {
            return MboxEntry(
                index: index,
                offset: messageOffset,
                envelope: envelope,
                content: .failure(.messageTooLarge(limit: maxMessageBytes))
            )
        }
        var bytes = message
        if bytes.count >= 4 && bytes.suffix(4).elementsEqual([0x0D, 0x0A, 0x0D, 0x0A]) {
            bytes.removeLast(2)
        } else if bytes.count >= 2 && bytes.suffix(2).elementsEqual([0x0A, 0x0A]) {
            bytes.removeLast(1)
        }
        return MboxEntry(index: index, offset: messageOffset, envelope: envelope, content: .success(bytes))
    }
}
