import Foundation
import Testing

@testable import CofferMIME

/// An attached message (`message/rfc822`, a forward with the original attached): written as it is, 7bit or 8bit and
/// never base64 or quoted-printable (RFC 2046 5.2.1), read back whole by Python's `email` package and by CofferMIME,
/// and refused before a byte is written when it could not travel unencoded.
@Suite struct EnclosedMessageTests {
    private struct PythonEnclosed: Codable {
        var filename: String?
        var disposition: String?
        var encoding: String?
        var subject: String?
        var text: String?
        var innerAttachments: [String?]
    }

    private struct PythonReading: Codable {
        var enclosed: [PythonEnclosed]
        var rawBodies: [String]
        var defects: [String]
    }

    static let me = MailAddress(name: "Bob", address: "bob@example.org")

    /// A received message in CRLF form: UTF-8 text sent 8bit when `eightBit`, and a base64 attachment.
    static func original(eightBit: Bool) -> [UInt8] {
        let text = eightBit ? "Grüße aus Köln.\r\n" : "Greetings from Cologne.\r\n"
        return Array(
            ("Received: from mx.example.net by mail.example.org; Wed, 25 Nov 2026 10:00:00 +0000\r\n"
                + "From: Alice <alice@example.net>\r\nTo: bob@example.org\r\nSubject: Quarterly figures\r\n"
                + "Date: Wed, 25 Nov 2026 10:00:00 +0000\r\nMessage-ID: <q3@example.net>\r\nMIME-Version: 1.0\r\n"
                + "Content-Type: multipart/mixed; boundary=\"outer-of-the-original\"\r\n\r\n"
                + "--outer-of-the-original\r\nContent-Type: text/plain; charset=utf-8\r\n"
                + "Content-Transfer-Encoding: \(eightBit ? "8bit" : "7bit")\r\n\r\n\(text)"
                + "--outer-of-the-original\r\nContent-Type: application/octet-stream\r\n"
                + "Content-Disposition: attachment; filename=figures.bin\r\nContent-Transfer-Encoding: base64\r\n\r\n"
                + "AAECAwQFBgcICQ==\r\n--outer-of-the-original--\r\n").utf8
        )
    }

    static func forward(_ original: [UInt8], filename: String = "Quarterly figures.eml") -> OutgoingMessage {
        OutgoingMessage(
            from: me,
            to: [MailAddress(name: nil, address: "carol@example.com")],
            subject: "Fwd: Quarterly figures",
            text: "See below.\n",
            attachments: [OutgoingAttachment(filename: filename, contentType: "message/rfc822", bytes: original)]
        )
    }

    @Test(arguments: [false, true])
    func pythonReadsTheAttachedMessageWithItsBytesUnchanged(eightBit: Bool) throws {
        let original = Self.original(eightBit: eightBit)
        let written = try MessageWriter.bytes(of: Self.forward(original, filename: "Grüße/figures.eml")).bytes
        let folder = try TemporaryFolder()
        let path = try folder.file("forward.eml", written)
        let output = (folder.path as NSString).appendingPathComponent("python.json")
        let run = try PythonScripts.run("enclosed_oracle.py", [path, output])
        try #require(run.status == 0, "enclosed_oracle.py failed: \(run.stderr)")
        let python = try JSONDecoder().decode(PythonReading.self, from: Data(contentsOf: URL(fileURLWithPath: output)))
        #expect(python.defects.isEmpty, "\(python.defects)")
        let enclosed = try #require(python.enclosed.first)
        #expect(python.enclosed.count == 1)
        #expect(enclosed.filename == "Grüße/figures.eml")
        #expect(enclosed.disposition == "attachment")
        #expect(enclosed.encoding == (eightBit ? "8bit" : "7bit"))
        #expect(enclosed.subject == "Quarterly figures")
        // The line break before the original's own boundary belongs to that delimiter (RFC 2046 5.1.1).
        #expect(enclosed.text == (eightBit ? "Grüße aus Köln." : "Greetings from Cologne."))
        #expect(enclosed.innerAttachments == ["figures.bin"])
        // Byte for byte: the part's body as it stands in the written message is the original.
        #expect(python.rawBodies == [original.map { String(format: "%02x", $0) }.joined()])
        // CofferMIME reads it back the same way.
        let parsed = try MIMEParser.parse(written)
        let part = try #require(parsed.attachments.first)
        #expect(part.contentType.mimeType == "message/rfc822")
        #expect(part.transferEncoding == (eightBit ? "8bit" : "7bit"))
        #expect(part.body == original)
        #expect(parsed.textBody == "See below.\r\n" || parsed.textBody == "See below.\n")
    }

    static let longest = Array(("Subject: " + String(repeating: "x", count: 989) + "\r\n\r\nbody\r\n").utf8)

    @Test(arguments: [
        (Array("Subject: a\nbody\r\n".utf8), "a line feed without a carriage return"),
        (Array("Subject: a\r\n\r\nbo\rdy\r\n".utf8), "a carriage return not followed by a line feed"),
        (Array("Subject: a\r\n\r\nbody\r".utf8), "a carriage return not followed by a line feed"),
        (Array("Subject: a\r\n\r\nbo\u{0}dy\r\n".utf8), "a NUL octet"),
        (
            Array(("Subject: " + String(repeating: "x", count: 990) + "\r\n\r\nbody\r\n").utf8),
            "a line longer than 998 octets"
        ),
    ])
    func aMessageThatCannotTravelUnencodedIsRefusedBeforeAByteIsWritten(bytes: [UInt8], reason: String) {
        #expect(throws: ComposeError.enclosedMessageNotSendable(index: 1, reason: reason)) {
            try MessageWriter(Self.forward(bytes))
        }
    }

    @Test func aLineOf998OctetsIsSent() throws {
        #expect(Self.longest.firstIndex(of: 0x0D) == 998)
        let written = try MessageWriter.bytes(of: Self.forward(Self.longest)).bytes
        #expect(try MIMEParser.parse(written).attachments.first?.body == Self.longest)
    }

    /// A reader that gives other bytes the second time (the writer reads an attached message once to check it and
    /// once to write it): the change is caught, the write fails.
    @Test func bytesThatChangeAfterTheCheckFailTheWrite() throws {
        final class Count: @unchecked Sendable { var opened = 0 }
        let count = Count()
        let attachment = OutgoingAttachment(filename: "m.eml", contentType: "message/rfc822") {
            count.opened += 1
            return ByteChunkReader(
                count.opened == 1 ? Array("Subject: a\r\n\r\nok\r\n".utf8) : Array("Subject: a\n\nbare\n".utf8)
            )
        }
        var message = Self.forward([])
        message.attachments = [attachment]
        #expect(throws: ComposeError.attachmentUnreadable(index: 1, reason: "it changed after it was checked")) {
            _ = try MessageWriter.bytes(of: message)
        }
    }
}
