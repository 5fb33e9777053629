#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Writes an `OutgoingMessage` as RFC 5322 / MIME bytes, a chunk at a time.
///
/// Every field is checked when the writer is made, so a message with a header injection, a bad address or a bad
/// message ID is refused before a byte is written. The bytes then come from `nextChunk()` in pieces of about
/// 64 KiB: header fields folded at 78 columns, text as 7bit or quoted-printable, attachments as base64 read from
/// their chunk readers as the output is asked for, so memory stays flat whatever the attachments' size. Lines end
/// in CRLF. An attached message (`message/rfc822`) is written as it is, 7bit or 8bit, never base64 or
/// quoted-printable (RFC 2046 5.2.1): it is read once when the writer is made to check that it can travel so (see
/// ``EnclosedMessageCheck``), and checked again as it is written. `bytes(of:)` and `write(_:to:)` are built on
/// `nextChunk()`. docs/COMPOSE.md describes the output.
///
/// - Warning: The writer does not dot-stuff; SMTP's `DATA` framing is the transport's job.
public struct MessageWriter {
    /// The envelope: the From address and every To, Cc and Bcc address once (Bcc is never in the bytes).
    public let envelope: MailEnvelope
    /// The message's `Message-ID` without angle brackets (the given one, or the one generated).
    public let messageID: String

    /// The most bytes `nextChunk()` returns at once, give or take a header block, a base64 line or a line break.
    static let chunkSize = 64 * 1024

    private enum Segment {
        case raw([UInt8])
        case text([UInt8], sevenBit: Bool)
        case attachment(Int)
        case enclosed(Int, eightBit: Bool)
    }

    private var segments: [Segment] = []
    private var segmentIndex = 0
    private let attachments: [OutgoingAttachment]
    private var textOffset = 0
    private var quotedPrintable = TextBodyEncoding.QuotedPrintableEncoder()
    private var reader: (any AttachmentChunkReader)?
    private var readerInput: [UInt8] = []
    private var readerOffset = 0
    private var base64 = Base64Encoding.LineEncoder()
    private var enclosedCheck = EnclosedMessageCheck()

    /// Checks `message` and prepares to write it, with a Message-ID (when the message has none) and multipart
    /// boundaries drawn from the operating system's random generator.
    ///
    /// - Throws: `ComposeError` naming the first field that cannot be written.
    public init(_ message: OutgoingMessage) throws(ComposeError) {
        var generator = SystemRandomNumberGenerator()
        try self.init(message, random: &generator)
    }

    /// Checks `message` and prepares to write it, drawing the Message-ID and boundaries from `random` (tests pass a
    /// seeded generator).
    package init(_ message: OutgoingMessage, random: inout some RandomNumberGenerator) throws(ComposeError) {
        let from = try HeaderEncoding.mailbox(message.from, field: .from)
        let to = try Self.mailboxes(message.to, ComposeField.to)
        let cc = try Self.mailboxes(message.cc, ComposeField.cc)
        let bcc = try Self.mailboxes(message.bcc, ComposeField.bcc)
        let replyTo = try Self.mailboxes(message.replyTo, ComposeField.replyTo)
        try HeaderEncoding.check(message.subject, .subject)
        let inReplyTo = try Self.messageIDs(message.inReplyTo, ComposeField.inReplyTo)
        let references = try Self.messageIDs(message.references, ComposeField.references)
        let domain = String(from.spec[from.spec.index(after: from.spec.lastIndex(of: "@")!)...])
        if let given = message.messageID {
            messageID = try HeaderEncoding.messageID(given, field: .messageID)
        } else {
            messageID = Self.randomToken(26, using: &random) + "@" + domain
        }
        var seen = Set<String>()
        var recipients: [String] = []
        for mailbox in to + cc + bcc where seen.insert(mailbox.spec).inserted {
            recipients.append(mailbox.spec)
        }
        envelope = MailEnvelope(sender: from.spec, recipients: recipients)

        var head: [UInt8] = []
        head += Self.field("Date", Self.dateText(message.date))
        head += Self.addressField("From", [from])
        if !replyTo.isEmpty {
            head += Self.addressField("Reply-To", replyTo)
        }
        if !to.isEmpty {
            head += Self.addressField("To", to)
        }
        if !cc.isEmpty {
            head += Self.addressField("Cc", cc)
        }
        let subject = HeaderEncoding.trimmed(message.subject)
        if !subject.isEmpty {
            var field = HeaderEncoding.Field(name: "Subject")
            HeaderEncoding.appendUnstructured(subject, to: &field)
            head += field.finished()
        }
        head += Self.idField("Message-ID", [messageID])
        if !inReplyTo.isEmpty {
            head += Self.idField("In-Reply-To", inReplyTo)
        }
        if !references.isEmpty {
            head += Self.idField("References", references)
        }
        for (index, header) in message.extraHeaders.enumerated() {
            head += try Self.extraField(header, .extraHeader(index + 1))
        }
        if let autocrypt = message.autocrypt {
            guard !autocrypt.keyData.isEmpty, autocrypt.keyData.count <= AutocryptHeader.maximumKeyDataSize else {
                throw .invalidAutocryptKey
            }
            head += autocrypt.field(address: from.spec.lowercased())
        }
        head += Array("MIME-Version: 1.0\r\n".utf8)
        if let prepared = message.preparedBody {
            attachments = []
            segments = [.raw(head + prepared.header + [0x0D, 0x0A]), .raw(prepared.body)]
            return
        }
        attachments = message.attachments

        var attachmentHeads: [(head: [UInt8], segment: Segment)] = []
        for (index, attachment) in message.attachments.enumerated() {
            let eightBit = try Self.enclosedMessageEncoding(attachment, number: index + 1)
            attachmentHeads.append(
                (
                    try Self.attachmentHeader(attachment, number: index + 1, enclosed: eightBit),
                    eightBit.map { .enclosed(index, eightBit: $0) } ?? .attachment(index)
                )
            )
        }

        // The body: text, or text and HTML as alternatives, inside multipart/mixed when there are attachments.
        var body: [Segment] = []
        var bodyHead: [UInt8]
        var innerBoundary: String?
        let text = TextBodyEncoding.normalized(message.text)
        let textSevenBit = TextBodyEncoding.isSevenBitSafe(text)
        if let html = message.html {
            let htmlBytes = TextBodyEncoding.normalized(html)
            let htmlSevenBit = TextBodyEncoding.isSevenBitSafe(htmlBytes)
            let boundary = Self.boundary(using: &random)
            innerBoundary = boundary
            bodyHead = Self.multipartHeader("alternative", boundary)
            body.append(.raw(Self.delimiter(boundary, first: true) + Self.textHeader("plain", textSevenBit)))
            body.append(.text(text, sevenBit: textSevenBit))
            body.append(.raw(Self.delimiter(boundary, first: false) + Self.textHeader("html", htmlSevenBit)))
            body.append(.text(htmlBytes, sevenBit: htmlSevenBit))
            body.append(.raw(Self.closeDelimiter(boundary)))
        } else {
            bodyHead = Self.textHeader("plain", textSevenBit)
            body.append(.text(text, sevenBit: textSevenBit))
        }
        if attachmentHeads.isEmpty {
            segments.append(.raw(head + bodyHead))
            segments += body
            if message.html != nil {
                segments.append(.raw([0x0D, 0x0A]))
            }
        } else {
            var boundary = Self.boundary(using: &random)
            while boundary == innerBoundary {
                boundary = Self.boundary(using: &random)
            }
            segments.append(
                .raw(head + Self.multipartHeader("mixed", boundary) + Self.delimiter(boundary, first: true))
            )
            segments.append(.raw(bodyHead))
            segments += body
            for (attachmentHead, segment) in attachmentHeads {
                segments.append(.raw(Self.delimiter(boundary, first: false) + attachmentHead))
                segments.append(segment)
            }
            segments.append(.raw(Self.closeDelimiter(boundary) + [0x0D, 0x0A]))
        }
    }

    /// The next piece of the message, or `nil` when it is all written.
    ///
    /// - Throws: `ComposeError.attachmentUnreadable` when an attachment's reader fails.
    public mutating func nextChunk() throws(ComposeError) -> [UInt8]? {
        var output: [UInt8] = []
        while output.count < Self.chunkSize && segmentIndex < segments.count {
            switch segments[segmentIndex] {
            case .raw(let bytes):
                output += bytes
                segmentIndex += 1
            case .text(let bytes, let sevenBit):
                // Quoted-printable writes under 4 bytes per byte (an escape, and a soft break every 25 escapes at
                // least): take what fits the chunk.
                let room = Self.chunkSize - output.count
                var end = min(bytes.count, textOffset + max(1, sevenBit ? room : room / 4))
                if end < bytes.count && bytes[end - 1] == 0x0D {
                    end += 1
                }
                if sevenBit {
                    output += bytes[textOffset..<end]
                } else {
                    quotedPrintable.encode(bytes, range: textOffset..<end, into: &output)
                }
                textOffset = end
                if end == bytes.count {
                    textOffset = 0
                    quotedPrintable = TextBodyEncoding.QuotedPrintableEncoder()
                    segmentIndex += 1
                }
            case .attachment(let index):
                try readAttachment(index, into: &output)
            case .enclosed(let index, let eightBit):
                try readEnclosed(index, eightBit: eightBit, into: &output)
            }
        }
        return output.isEmpty ? nil : output
    }

    /// Opens attachment `index`; a failure names it (1-based) and why.
    private func openAttachment(_ index: Int) throws(ComposeError) -> any AttachmentChunkReader {
        do {
            return try attachments[index].open()
        } catch {
            throw .attachmentUnreadable(index: index + 1, reason: String(describing: error))
        }
    }

    /// The open reader's next chunk of attachment `index`, or nil at its end.
    private mutating func nextChunk(of index: Int) throws(ComposeError) -> [UInt8]? {
        do {
            return try reader?.nextChunk()
        } catch {
            throw .attachmentUnreadable(index: index + 1, reason: String(describing: error))
        }
    }

    /// Adds base64 of the attachment's next bytes to `output`, moving to the next segment at its end.
    private mutating func readAttachment(_ index: Int, into output: inout [UInt8]) throws(ComposeError) {
        if reader == nil {
            reader = try openAttachment(index)
        }
        if readerOffset >= readerInput.count {
            let chunk = try nextChunk(of: index)
            guard let chunk else {
                base64.finish(into: &output)
                reader = nil
                readerInput = []
                readerOffset = 0
                segmentIndex += 1
                return
            }
            readerInput = chunk
            readerOffset = 0
        }
        // A reader may return a huge chunk: encode it a slice at a time so each output chunk stays bounded.
        let room = Self.chunkSize - output.count
        let end = min(readerInput.count, readerOffset + max(1, room / 78) * Base64Encoding.bytesPerLine)
        base64.encode(readerInput[readerOffset..<end], into: &output)
        readerOffset = end
    }

    /// Adds the attached message's next bytes to `output` as they are, checked again as they go (the reader could
    /// give other bytes the second time), moving to the next segment at its end.
    private mutating func readEnclosed(_ index: Int, eightBit: Bool, into output: inout [UInt8]) throws(ComposeError) {
        if reader == nil {
            reader = try openAttachment(index)
            enclosedCheck = EnclosedMessageCheck()
        }
        let chunk = try nextChunk(of: index)
        guard let chunk else {
            reader = nil
            segmentIndex += 1
            guard enclosedCheck.finish() == nil else {
                throw .attachmentUnreadable(index: index + 1, reason: "it changed after it was checked")
            }
            return
        }
        if enclosedCheck.feed(chunk) != nil || (enclosedCheck.eightBit && !eightBit) {
            throw .attachmentUnreadable(index: index + 1, reason: "it changed after it was checked")
        }
        output += chunk
    }

    /// For a `message/rfc822` attachment, whether it needs `8bit` (`false`: `7bit`), after reading it all once;
    /// `nil` for any other attachment.
    private static func enclosedMessageEncoding(
        _ attachment: OutgoingAttachment,
        number: Int
    ) throws(ComposeError) -> Bool? {
        guard HeaderEncoding.trimmed(attachment.contentType).lowercased() == "message/rfc822" else { return nil }
        var check = EnclosedMessageCheck()
        do {
            var reader = try attachment.open()
            while let chunk = try reader.nextChunk() {
                if let problem = check.feed(chunk) {
                    throw ComposeError.enclosedMessageNotSendable(index: number, reason: problem)
                }
            }
        } catch let error as ComposeError {
            throw error
        } catch {
            throw .attachmentUnreadable(index: number, reason: String(describing: error))
        }
        if let problem = check.finish() { throw .enclosedMessageNotSendable(index: number, reason: problem) }
        return check.eightBit
    }

    // MARK: Conveniences

    /// The whole message in memory, built from `nextChunk()`.
    ///
    /// - Returns: the bytes, the envelope and the Message-ID.
    public static func bytes(
        of message: OutgoingMessage
    ) throws(ComposeError) -> (
        bytes: [UInt8], envelope: MailEnvelope, messageID: String
    ) {
        var writer = try MessageWriter(message)
        var bytes: [UInt8] = []
        while let chunk = try writer.nextChunk() {
            bytes += chunk
        }
        return (bytes, writer.envelope, writer.messageID)
    }

    /// Writes the message to `sink` a chunk at a time.
    ///
    /// - Returns: the envelope and the Message-ID.
    /// - Throws: `ComposeError`, or whatever `sink` throws.
    public static func write(
        _ message: OutgoingMessage,
        to sink: ([UInt8]) throws -> Void
    ) throws -> (envelope: MailEnvelope, messageID: String) {
        var writer = try MessageWriter(message)
        while let chunk = try writer.nextChunk() {
            try sink(chunk)
        }
        return (writer.envelope, writer.messageID)
    }

    // MARK: Header fields

    private static func mailboxes(
        _ addresses: [MailAddress],
        _ field: (Int) -> ComposeField
    ) throws(ComposeError) -> [HeaderEncoding.Mailbox] {
        var result: [HeaderEncoding.Mailbox] = []
        for (index, address) in addresses.enumerated() {
            result.append(try HeaderEncoding.mailbox(address, field: field(index + 1)))
        }
        return result
    }

    private static func messageIDs(_ ids: [String], _ field: (Int) -> ComposeField) throws(ComposeError) -> [String] {
        var result: [String] = []
        for (index, id) in ids.enumerated() {
            result.append(try HeaderEncoding.messageID(id, field: field(index + 1)))
        }
        return result
    }

    private static func field(_ name: String, _ value: String) -> [UInt8] {
        Array("\(name): \(value)\r\n".utf8)
    }

    private static func addressField(_ name: String, _ mailboxes: [HeaderEncoding.Mailbox]) -> [UInt8] {
        var field = HeaderEncoding.Field(name: name)
        HeaderEncoding.appendAddressList(mailboxes, to: &field)
        return field.finished()
    }

    private static func idField(_ name: String, _ ids: [String]) -> [UInt8] {
        var field = HeaderEncoding.Field(name: name)
        for id in ids {
            field.append("<" + id + ">", after: " ")
        }
        return field.finished()
    }

    /// Fields the writer writes itself; an extra header may not set them.
    private static let reserved = [
        "Date", "From", "Sender", "Reply-To", "To", "Cc", "Bcc", "Subject", "Message-ID", "In-Reply-To",
        "References", "MIME-Version", "Return-Path", "Received", "Autocrypt",
    ]

    private static func extraField(_ header: OutgoingHeader, _ field: ComposeField) throws(ComposeError) -> [UInt8] {
        let name = header.name
        let validName =
            !name.isEmpty && name.utf8.count <= 76
            && name.unicodeScalars.allSatisfy { $0.value > 0x20 && $0.value < 0x7F && $0 != ":" }
        guard validName else {
            throw .invalidHeaderName(field)
        }
        // The name is ASCII (checked above), so lower-casing compares it as RFC 5322 does.
        if let taken = reserved.first(where: { $0.lowercased() == name.lowercased() }) {
            throw .reservedHeader(field, name: taken)
        }
        if name.lowercased().hasPrefix("content-") {
            throw .reservedHeader(field, name: "Content-*")
        }
        try HeaderEncoding.check(header.value, field)
        var written = HeaderEncoding.Field(name: name)
        HeaderEncoding.appendUnstructured(header.value, to: &written)
        return written.finished()
    }

    private static func textHeader(_ subtype: String, _ sevenBit: Bool) -> [UInt8] {
        let encoding = sevenBit ? "7bit" : "quoted-printable"
        return Array(
            "Content-Type: text/\(subtype); charset=utf-8\r\nContent-Transfer-Encoding: \(encoding)\r\n\r\n".utf8
        )
    }

    private static func multipartHeader(_ subtype: String, _ boundary: String) -> [UInt8] {
        var field = HeaderEncoding.Field(name: "Content-Type")
        field.append("multipart/\(subtype)", after: " ")
        HeaderEncoding.appendParameter("boundary", boundary, to: &field)
        return field.finished() + [0x0D, 0x0A]
    }

    /// The part header of an attachment; `enclosed` is `nil` but for `message/rfc822`, where it says whether the
    /// message needs `8bit`.
    private static func attachmentHeader(
        _ attachment: OutgoingAttachment,
        number: Int,
        enclosed: Bool?
    ) throws(ComposeError) -> [UInt8] {
        let type = HeaderEncoding.trimmed(attachment.contentType).lowercased()
        let pieces = type.split(separator: "/", omittingEmptySubsequences: false)
        guard pieces.count == 2, type.utf8.count <= 127,
            pieces.allSatisfy({ !$0.isEmpty && $0.unicodeScalars.allSatisfy(HeaderEncoding.isTokenCharacter) })
        else {
            try HeaderEncoding.check(attachment.contentType, .attachmentType(number))
            throw .invalidContentType(.attachmentType(number))
        }
        if pieces[0] == "multipart" || (pieces[0] == "message" && enclosed == nil) {
            throw .unsupportedAttachmentType(.attachmentType(number))
        }
        var filename: String?
        if let raw = attachment.filename {
            try HeaderEncoding.check(raw, .attachmentFilename(number))
            let cleaned = HeaderEncoding.trimmed(raw)
            filename = cleaned.isEmpty ? nil : cleaned
        }
        var contentType = HeaderEncoding.Field(name: "Content-Type")
        contentType.append(type, after: " ")
        var disposition = HeaderEncoding.Field(name: "Content-Disposition")
        disposition.append("attachment", after: " ")
        if let filename {
            HeaderEncoding.appendParameter("name", filename, to: &contentType)
            HeaderEncoding.appendParameter("filename", filename, to: &disposition)
        }
        let encoding = enclosed.map { $0 ? "8bit" : "7bit" } ?? "base64"
        return contentType.finished() + disposition.finished()
            + Array("Content-Transfer-Encoding: \(encoding)\r\n\r\n".utf8)
    }

    private static func delimiter(_ boundary: String, first: Bool) -> [UInt8] {
        Array(((first ? "" : "\r\n") + "--" + boundary + "\r\n").utf8)
    }

    private static func closeDelimiter(_ boundary: String) -> [UInt8] {
        Array(("\r\n--" + boundary + "--").utf8)
    }

    // MARK: Random tokens and the date

    private static let tokenAlphabet = Array("abcdefghijklmnopqrstuvwxyz234567".unicodeScalars)

    /// `count` random characters from a 32-letter alphabet (5 bits each: 26 make 130 bits).
    static func randomToken(_ count: Int, using random: inout some RandomNumberGenerator) -> String {
        var result = String.UnicodeScalarView()
        for _ in 0..<count {
            result.append(tokenAlphabet[Int(random.next() & 31)])
        }
        return String(result)
    }

    /// A boundary: `=_` then 24 random characters. Quoted-printable output never holds `=_`, base64 never holds
    /// `-`, and 7bit text is only chosen when no line starts with `--=_`, so no body line can be a delimiter.
    static func boundary(using random: inout some RandomNumberGenerator) -> String {
        "=_" + randomToken(24, using: &random)
    }

    private static let dayNames = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]
    private static let monthNames = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]

    /// The RFC 5322 date-time of `date` in UTC, such as `Thu, 26 Nov 2026 00:09:55 +0000`.
    static func dateText(_ date: Date) -> String {
        let seconds = Int(date.timeIntervalSince1970.rounded(.down))
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = seconds - days * 86_400
        // Howard Hinnant's days-to-civil conversion.
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        let weekday = dayNames[((days % 7) + 7) % 7]
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let time = "\(two(secondOfDay / 3600)):\(two(secondOfDay / 60 % 60)):\(two(secondOfDay % 60))"
        return "\(weekday), \(day) \(monthNames[month - 1]) \(year) \(time) +0000"
    }
}

/// Checks, chunk by chunk, that a message can be attached as `message/rfc822` without a transfer encoding
/// (RFC 2046 5.2.1 allows only 7bit, 8bit and binary, and SMTP without BINARYMIME carries only the first two): every
/// line at most 998 octets before its CRLF, no CR or LF but as a CRLF pair, no NUL. It does not repair: the caller
/// gives the message in canonical form (docs/COMPOSE.md, "Attached messages").
public struct EnclosedMessageCheck: Sendable {
    /// Whether an octet above 127 was seen (the part is then `8bit`, else `7bit`).
    public private(set) var eightBit = false
    private var lineLength = 0
    private var afterCR = false
    private var problem: String?

    /// Starts a check.
    public init() {}

    /// Reads the next bytes; returns the first problem found (the same one on every later call), or `nil`.
    public mutating func feed(_ bytes: [UInt8]) -> String? {
        guard problem == nil else { return problem }
        for byte in bytes {
            if afterCR {
                guard byte == 0x0A else { return fail("a carriage return not followed by a line feed") }
                afterCR = false
                lineLength = 0
                continue
            }
            switch byte {
            case 0x0D: afterCR = true
            case 0x0A: return fail("a line feed without a carriage return")
            case 0x00: return fail("a NUL octet")
            default:
                if byte > 0x7F { eightBit = true }
                lineLength += 1
                if lineLength > 998 { return fail("a line longer than 998 octets") }
            }
        }
        return nil
    }

    /// Ends the check: the problem found, or `nil`.
    public mutating func finish() -> String? {
        if problem == nil && afterCR { return fail("a carriage return not followed by a line feed") }
        return problem
    }

    private mutating func fail(_ reason: String) -> String {
        problem = reason
        return reason
    }
}
