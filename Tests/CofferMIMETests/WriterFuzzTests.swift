import CofferSampleMail
import Foundation
import Testing

@testable import CofferMIME

/// The libFuzzer target's invariant (Fuzz/MIMEFuzzer.swift) on random mutations of the generated corpus, so
/// `swift test` checks it too: what the parser reads of a mutated message, written and read again, gives the same
/// fields; the output has CRLF lines and ASCII only, and no defect. Bounded by a count and a wall-clock budget,
/// reproducible from the seed.
@Suite struct WriterFuzzTests {
    static let iterations = 1_500
    static let budget = Duration.seconds(10)

    /// The parsed message as a message to send, keeping what the writer accepts (as a reply or forward would).
    static func outgoing(from message: MIMEMessage) -> OutgoingMessage {
        func valid(_ addresses: [MailAddress]) -> [MailAddress] {
            addresses.prefix(20).map {
                MailAddress(name: $0.name.map(OutgoingMessage.headerSafe), address: $0.address)
            }.filter { (try? HeaderEncoding.mailbox($0, field: .from)) != nil }
        }
        func ids(_ values: [String]) -> [String] {
            values.prefix(20).compactMap { try? HeaderEncoding.messageID($0, field: .messageID) }
        }
        let attachments = message.attachments.prefix(8).map { part in
            let type = part.contentType
            let usable =
                [type.type, type.subtype].allSatisfy {
                    !$0.isEmpty && $0.unicodeScalars.allSatisfy(HeaderEncoding.isTokenCharacter)
                } && type.type != "multipart" && type.type != "message"
            let filename = part.filename.map(OutgoingMessage.headerSafe)
            return OutgoingAttachment(
                filename: filename?.contains("=?") == true ? nil : filename,
                contentType: usable ? type.mimeType : "application/octet-stream",
                bytes: part.body
            )
        }
        return OutgoingMessage(
            from: valid(message.from).first ?? MailAddress(name: nil, address: "fuzz@example.com"),
            to: valid(message.to),
            cc: valid(message.cc),
            replyTo: valid(message.replyTo),
            subject: OutgoingMessage.headerSafe(message.subject ?? ""),
            inReplyTo: ids(message.inReplyTo),
            references: ids(message.references),
            text: message.textBody ?? "",
            html: message.htmlBody,
            attachments: Array(attachments),
            date: message.date ?? Date(timeIntervalSince1970: 0),
            messageID: message.messageID.flatMap { try? HeaderEncoding.messageID($0, field: .messageID) }
                ?? "fuzz@example.com"
        )
    }

    /// What survives a write, normalised as the writer writes it (names without spaces: see docs/COMPOSE.md).
    static func snapshot(_ message: OutgoingMessage) throws -> [String] {
        func list(_ addresses: [MailAddress]) -> String {
            addresses.map {
                String(String.UnicodeScalarView(($0.name ?? "").unicodeScalars.filter { $0 != " " && $0 != "\t" }))
                    + " <" + ((try? HeaderEncoding.addrSpec($0.address, field: .from)) ?? "?") + ">"
            }.joined(separator: ", ")
        }
        let attachments = try message.attachments.map {
            "\($0.filename.map(HeaderEncoding.trimmed) ?? "") \($0.contentType) "
                + Data(try ComposeShapes.attachmentBytes($0)).base64EncodedString()
        }
        return [
            list([message.from]), list(message.to), list(message.cc), list(message.replyTo),
            HeaderEncoding.trimmed(message.subject), message.messageID ?? "", message.inReplyTo.joined(separator: " "),
            message.references.joined(separator: " "),
            String(decoding: TextBodyEncoding.normalized(message.text), as: UTF8.self),
            message.html.map { String(decoding: TextBodyEncoding.normalized($0), as: UTF8.self) } ?? "-",
            String(Int(message.date.timeIntervalSince1970.rounded(.down))),
        ] + attachments
    }

    @Test func mutatedMessagesSurviveAWriteAndARead() throws {
        let folder = try TemporaryFolder()
        let seeds = try FuzzTests.corpus(folder)
        var generator = SplitMix(seed: 0xC0FF_EE26)
        let clock = ContinuousClock()
        let start = clock.now
        var written = 0
        for _ in 0..<Self.iterations where clock.now - start < Self.budget {
            let input = FuzzTests.mutate(seeds.randomElement(using: &generator)!, using: &generator)
            guard let parsed = try? MIMEParser.parse(input) else {
                continue
            }
            let first = Self.outgoing(from: parsed)
            var writer = try MessageWriter(first, random: &generator)
            var bytes: [UInt8] = []
            while let chunk = try writer.nextChunk() {
                bytes += chunk
            }
            written += 1
            #expect(bytes.allSatisfy { $0 < 0x80 })
            #expect(
                !String(decoding: bytes, as: UTF8.self).replacingOccurrences(of: "\r\n", with: "").contains {
                    $0 == "\r" || $0 == "\n"
                }
            )
            let reread = try MIMEParser.parse(bytes)
            #expect(reread.defects.isEmpty)
            let expected = try Self.snapshot(first)
            let seen = try Self.snapshot(Self.outgoing(from: reread))
            if expected != seen {
                let changed = zip(expected, seen).filter { $0 != $1 }.map { "- \($0.prefix(300))\n+ \($1.prefix(300))" }
                Issue.record("fields changed in a write and read:\n\(changed.joined(separator: "\n"))")
                break
            }
        }
        print("CofferMIME writer fuzz: \(written) mutated messages written and read back")
        #expect(written > 0)
    }
}
