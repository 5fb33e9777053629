import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// libFuzzer target for CofferMIME's writer, compiled with the module's files (see Fuzz/mime.sh):
///
///     parse(input) -> outgoing message -> write -> parse -> write -> parse
///
/// For each input the parser's view of the message becomes an `OutgoingMessage` (fields the writer would refuse
/// are dropped or cleaned with `OutgoingMessage.headerSafe`, as a reply or forward would), which is written. The
/// harness traps when the written bytes have a bare CR or LF, a byte above 0x7F, a header line that is neither a
/// field nor a continuation, or a multipart the parser finds unclosed or defective; when the fields read back
/// differ from those written (subject, addresses, message IDs, extra fields, text, HTML, attachments' names, types
/// and bytes); or when a second round changes them again. Display names are compared without their spaces: a name
/// too long for one encoded word is split into several, and this module's and Python's address parsers read a
/// space at each split that RFC 2047 readers drop (see docs/COMPOSE.md). The input is also read as a `mailto:` link
/// (see `checkMailto`).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = size > 0 ? Array(UnsafeBufferPointer(start: data, count: size)) : []
    checkMailto(input)
    let limits = MIMELimits(maxHeaderSectionBytes: 16_384, maxHeaderFields: 200, maxNestingDepth: 8, maxParts: 64)
    guard let parsed = try? MIMEParser.parse(input, limits: limits) else {
        return 0
    }
    let first = outgoing(from: parsed)
    var generator = XorShift(seed: UInt64(size) &+ 0x9E37_79B9)
    guard let written = writeChecked(first, &generator, input: input) else {
        return 0
    }
    guard let reread = try? MIMEParser.parse(written) else {
        fail("the parser refused the written message", input: input)
    }
    if !reread.defects.isEmpty {
        fail("the written message has defects: \(reread.defects)", input: input)
    }
    let second = outgoing(from: reread)
    let expected = Snapshot(first)
    let seen = Snapshot(second)
    if expected != seen {
        fail("fields changed in a write and read:\n\(expected.differences(seen))", input: input)
    }
    guard let rewritten = writeChecked(second, &generator, input: input), let third = try? MIMEParser.parse(rewritten)
    else {
        fail("the second round failed", input: input)
    }
    let again = Snapshot(outgoing(from: third))
    if again != seen {
        fail("fields changed in the second round:\n\(seen.differences(again))", input: input)
    }
    return 0
}

/// The input as the rest of a `mailto:` link: a link the parser accepts must make a message the writer accepts,
/// and the message must read back with the link's recipients, subject and body and no Bcc field.
private func checkMailto(_ input: [UInt8]) {
    guard let link = try? MailtoLink(parsing: "mailto:" + String(decoding: input, as: UTF8.self)) else {
        return
    }
    var message = OutgoingMessage(
        from: MailAddress(name: nil, address: "fuzz@example.com"),
        date: Date(timeIntervalSince1970: 0),
        messageID: "fuzz@example.com"
    )
    link.apply(to: &message)
    var generator = XorShift(seed: 7)
    guard let bytes = writeChecked(message, &generator, input: input),
        let parsed = try? MIMEParser.parse(bytes)
    else {
        fail("a message from an accepted mailto: link was not written and read", input: input)
    }
    let written = Snapshot(message)
    let read = Snapshot(outgoing(from: parsed))
    if written.to != read.to || written.cc != read.cc || written.subject != read.subject || written.text != read.text
        || written.inReplyTo != read.inReplyTo || parsed.header("Bcc") != nil
    {
        fail("a mailto: link's fields changed in a write and read:\n\(written.differences(read))", input: input)
    }
}

/// Writes `message` with a seeded writer and checks the bytes' shape; `nil` when the writer refuses the message.
private func writeChecked(_ message: OutgoingMessage, _ generator: inout XorShift, input: [UInt8]) -> [UInt8]? {
    let writer: MessageWriter
    do {
        writer = try MessageWriter(message, random: &generator)
    } catch {
        // The conversion drops what the writer refuses, so a refusal is a bug in one or the other.
        fail("the writer refused a cleaned message: \(error)", input: input)
    }
    var copy = writer
    var bytes: [UInt8] = []
    do {
        while let chunk = try copy.nextChunk() {
            bytes += chunk
        }
    } catch {
        fail("writing failed: \(error)", input: input)
    }
    checkShape(bytes, input: input)
    return bytes
}

private func checkShape(_ bytes: [UInt8], input: [UInt8]) {
    for (index, byte) in bytes.enumerated() {
        if byte >= 0x80 {
            fail("8-bit byte in the output", input: input)
        }
        if byte == 0x0D && (index + 1 == bytes.count || bytes[index + 1] != 0x0A) {
            fail("bare CR in the output", input: input)
        }
        if byte == 0x0A && (index == 0 || bytes[index - 1] != 0x0D) {
            fail("bare LF in the output", input: input)
        }
    }
    // Every header line of the message and of each part is a field or a continuation.
    let text = String(decoding: bytes, as: UTF8.self)
    var inHeaders = true
    var previousBlank = false
    for line in text.components(separatedBy: "\r\n") {
        if line.hasPrefix("--=_") {
            inHeaders = !line.hasSuffix("--")
            previousBlank = false
            continue
        }
        if inHeaders {
            if line.isEmpty {
                inHeaders = false
            } else if line.first == " " || line.first == "\t" {
                if previousBlank || line.allSatisfy({ $0 == " " || $0 == "\t" }) {
                    fail("an empty continuation line in a header", input: input)
                }
            } else {
                let name = line.prefix { $0 != ":" }
                if name.count == line.count || name.isEmpty || name.contains(" ") {
                    fail("a header line that is not a field: \(line)", input: input)
                }
            }
        }
        previousBlank = line.isEmpty
    }
}

private let ownFields: Set<String> = [
    "date", "from", "sender", "reply-to", "to", "cc", "bcc", "subject", "message-id", "in-reply-to", "references",
    "mime-version", "return-path", "received",
]

/// The parser's view of a message as a message to send, keeping only what the writer accepts.
private func outgoing(from message: MIMEMessage) -> OutgoingMessage {
    func valid(_ addresses: [MailAddress], _ limit: Int) -> [MailAddress] {
        var result: [MailAddress] = []
        for address in addresses.prefix(limit) {
            let cleaned = MailAddress(name: address.name.map(OutgoingMessage.headerSafe), address: address.address)
            if (try? HeaderEncoding.mailbox(cleaned, field: .from)) != nil {
                result.append(cleaned)
            }
        }
        return result
    }
    func ids(_ values: [String]) -> [String] {
        values.prefix(20).compactMap { try? HeaderEncoding.messageID($0, field: .messageID) }
    }
    let from = valid(message.from, 1).first ?? MailAddress(name: nil, address: "fuzz@example.com")
    var extra: [OutgoingHeader] = []
    for header in message.headers where extra.count < 5 {
        let lowered = header.name.lowercased()
        let validName =
            !header.name.isEmpty && header.name.utf8.count <= 76
            && header.name.unicodeScalars.allSatisfy { $0.value > 0x20 && $0.value < 0x7F && $0 != ":" }
        if validName && !ownFields.contains(lowered) && !lowered.hasPrefix("content-") {
            extra.append(OutgoingHeader(name: header.name, value: OutgoingMessage.headerSafe(header.value)))
        }
    }
    var attachments: [OutgoingAttachment] = []
    for part in message.attachments.prefix(8) {
        var filename = part.filename.map(OutgoingMessage.headerSafe)
        // A file name that holds an encoded word is read back decoded (by Python's reader too): not a round trip.
        if filename?.contains("=?") == true {
            filename = nil
        }
        let type = part.contentType
        let tokens = [type.type, type.subtype].allSatisfy {
            !$0.isEmpty && $0.unicodeScalars.allSatisfy(HeaderEncoding.isTokenCharacter)
        }
        // The writer's rule: two tokens, 127 bytes at most together (RFC 6838's longest name), not a container.
        let usable =
            tokens && type.mimeType.utf8.count <= 127 && type.type != "multipart" && type.type != "message"
        attachments.append(
            OutgoingAttachment(
                filename: filename,
                contentType: usable ? type.mimeType : "application/octet-stream",
                bytes: part.body
            )
        )
    }
    let messageID = message.messageID.flatMap { try? HeaderEncoding.messageID($0, field: .messageID) }
    return OutgoingMessage(
        from: from,
        to: valid(message.to, 20),
        cc: valid(message.cc, 20),
        replyTo: valid(message.replyTo, 5),
        subject: OutgoingMessage.headerSafe(message.subject ?? ""),
        inReplyTo: ids(message.inReplyTo),
        references: ids(message.references),
        extraHeaders: extra,
        text: message.textBody ?? "",
        html: message.htmlBody,
        attachments: attachments,
        date: message.date ?? Date(timeIntervalSince1970: 0),
        messageID: messageID ?? "fuzz@example.com"
    )
}

/// The fields that survive a write, normalised as the writer writes them.
private struct Snapshot: Equatable {
    var from: [String]
    var to: [[String]]
    var cc: [[String]]
    var replyTo: [[String]]
    var subject: String
    var messageID: String
    var inReplyTo: [String]
    var references: [String]
    var extra: [[String]]
    var text: String
    var html: String?
    var attachments: [[String]]
    var date: Int

    init(_ message: OutgoingMessage) {
        func name(_ address: MailAddress) -> String {
            (address.name ?? "").filter { $0 != " " && $0 != "\t" }
        }
        func list(_ addresses: [MailAddress]) -> [[String]] {
            addresses.map { [name($0), (try? HeaderEncoding.addrSpec($0.address, field: .from)) ?? "?"] }
        }
        func body(_ text: String) -> String {
            let bytes = TextBodyEncoding.normalized(text)
            return String(decoding: bytes, as: UTF8.self)
        }
        from = list([message.from])[0]
        to = list(message.to)
        cc = list(message.cc)
        replyTo = list(message.replyTo)
        subject = HeaderEncoding.trimmed(message.subject)
        messageID = message.messageID ?? ""
        inReplyTo = message.inReplyTo
        references = message.references
        extra = message.extraHeaders.map { [$0.name, HeaderEncoding.trimmed($0.value)] }
        text = body(message.text)
        html = message.html.map(body)
        attachments = message.attachments.map { attachment in
            var reader = try? attachment.open()
            var bytes: [UInt8] = []
            while let chunk = try? reader?.nextChunk() {
                bytes += chunk
            }
            let filename = attachment.filename.map(HeaderEncoding.trimmed) ?? ""
            return [filename, attachment.contentType, Data(bytes).base64EncodedString()]
        }
        date = Int(message.date.timeIntervalSince1970.rounded(.down))
    }

    func differences(_ other: Snapshot) -> String {
        let left = Mirror(reflecting: self).children.map {
            "\($0.label ?? "?"): \(String(describing: $0.value).prefix(300))"
        }
        let right = Mirror(reflecting: other).children.map {
            "\($0.label ?? "?"): \(String(describing: $0.value).prefix(300))"
        }
        return zip(left, right).filter { $0 != $1 }.map { "- \($0)\n+ \($1)" }.joined(separator: "\n")
    }
}

private struct XorShift: RandomNumberGenerator {
    var state: UInt64

    init(seed: UInt64) { state = seed == 0 ? 0x1234_5678 : seed }

    mutating func next() -> UInt64 {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return state
    }
}

private func fail(_ reason: String, input: [UInt8]) -> Never {
    var message = "MIMEFuzzer: \(reason)\n--- input (\(input.count) bytes)\n"
    message += String(decoding: input.prefix(2000), as: UTF8.self)
    message += "\n"
    message.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    abort()
}
