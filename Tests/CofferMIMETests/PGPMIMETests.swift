import Foundation
import Testing

@testable import CofferMIME

/// The PGP/MIME wrapping (RFC 3156) around what RNP makes: the entity signed or encrypted is exactly the content the
/// writer would have sent, in CRLF and 7-bit; a prepared body replaces the content without reading an attachment;
/// the `multipart/signed` and `multipart/encrypted` bodies parse back with the signed part byte for byte. The real
/// signatures and ciphertext are checked by gpg and sq in OpenPGPSendCLITests.
@Suite struct PGPMIMETests {
    static let from = MailAddress(name: "Alice", address: "alice@example.org")

    static func message(attachments: [OutgoingAttachment] = []) -> OutgoingMessage {
        OutgoingMessage(
            from: from,
            to: [MailAddress(name: nil, address: "bob@example.org")],
            subject: "Plans",
            text: "Grüße,\nFrom the start of a line, and a trailing space \nend",
            attachments: attachments,
            messageID: "fixed@example.org"
        )
    }

    @Test func theEntityIsTheContentTheWriterWritesInCRLFAndSevenBit() throws {
        let message = Self.message(attachments: [OutgoingAttachment(filename: "a.bin", bytes: Array(0...255))])
        let entity = try PGPMIME.entity(of: message)
        let written = try MessageWriter.bytes(of: message).bytes
        // Each write draws its own boundary: the same bytes once the boundaries are made the same.
        let ownBoundary = try #require(try MIMEParser.parse(entity).root.contentType.parameters["boundary"])
        let writtenBoundary = try #require(try MIMEParser.parse(written).root.contentType.parameters["boundary"])
        let same = Array(
            String(decoding: entity, as: UTF8.self).replacingOccurrences(of: ownBoundary, with: writtenBoundary).utf8
        )
        #expect(written.count > same.count && Array(written.suffix(same.count)) == same)
        let head = written.prefix(written.count - same.count)
        #expect(head.suffix(19).elementsEqual("MIME-Version: 1.0\r\n".utf8))
        #expect(entity.starts(with: "Content-Type: multipart/mixed;".utf8))
        #expect(entity.allSatisfy { $0 < 0x80 && $0 != 0 })
        for index in entity.indices where entity[index] == 0x0A { #expect(index > 0 && entity[index - 1] == 0x0D) }
    }

    @Test func anAttachedMessageThatNeedsEightBitCannotBeSignedOrEncrypted() throws {
        let enclosed = Array("Subject: hi\r\n\r\nGrüße\r\n".utf8)
        let message = Self.message(
            attachments: [OutgoingAttachment(filename: "m.eml", contentType: "message/rfc822", bytes: enclosed)]
        )
        #expect(throws: ComposeError.notSevenBit) { try PGPMIME.entity(of: message) }
    }

    @Test func aPreparedBodyReplacesTheContentAndNoAttachmentIsRead() throws {
        var message = Self.message(
            attachments: [
                OutgoingAttachment(filename: "never.bin") { throw CocoaError(.fileReadNoPermission) }
            ]
        )
        message.preparedBody = PGPMIME.encrypted(
            Array("-----BEGIN PGP MESSAGE-----\n\nwcBM\n-----END PGP MESSAGE-----\n".utf8)
        )
        let written = String(decoding: try MessageWriter.bytes(of: message).bytes, as: UTF8.self)
        #expect(written.components(separatedBy: "Content-Type:").count == 4, "\(written)")
        #expect(!written.contains("never.bin") && !written.contains("Grüße") && !written.contains("Gr=C3"))
        let parsed = try MIMEParser.parse(Array(written.utf8))
        #expect(parsed.root.contentType.mimeType == "multipart/encrypted")
        #expect(parsed.root.contentType.parameters["protocol"] == "application/pgp-encrypted")
        #expect(parsed.root.children.count == 2)
        #expect(parsed.root.children[0].contentType.mimeType == "application/pgp-encrypted")
        #expect(String(decoding: parsed.root.children[0].body, as: UTF8.self).hasPrefix("Version: 1"))
        #expect(
            String(decoding: parsed.root.children[1].body, as: UTF8.self)
                == "-----BEGIN PGP MESSAGE-----\r\n\r\nwcBM\r\n-----END PGP MESSAGE-----"
        )
    }

    @Test func theSignedPartIsTheEntityByteForByte() throws {
        let entity = try PGPMIME.entity(of: Self.message())
        var message = Self.message()
        let signature = Array("-----BEGIN PGP SIGNATURE-----\n\nwnUE\n-----END PGP SIGNATURE-----\n".utf8)
        message.preparedBody = PGPMIME.signed(entity: entity, signature: signature, micalg: "pgp-sha256")
        let written = try MessageWriter.bytes(of: message).bytes
        let parsed = try MIMEParser.parse(written)
        #expect(parsed.root.contentType.mimeType == "multipart/signed")
        #expect(parsed.root.contentType.parameters["micalg"] == "pgp-sha256")
        #expect(parsed.root.contentType.parameters["protocol"] == "application/pgp-signature")
        #expect(parsed.root.children.map(\.contentType.mimeType) == ["text/plain", "application/pgp-signature"])
        let boundary = try #require(parsed.root.contentType.parameters["boundary"])
        let open = Array("--\(boundary)\r\n".utf8)
        let close = Array("\r\n--\(boundary)\r\n".utf8)
        let start = try #require(written.firstRange(of: open)).upperBound
        let end = try #require(written[start...].firstRange(of: close)).lowerBound
        #expect(Array(written[start..<end]) == entity)
        #expect(entity.firstRange(of: Array(boundary.utf8)) == nil)
    }
}
