#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A message body written elsewhere, sent in place of an ``OutgoingMessage``'s text, HTML and attachments: the
/// RFC 3156 (PGP/MIME) wrapping of a signed or encrypted message, made by ``PGPMIME``. Its content header and body
/// are 7-bit text in CRLF lines, so it travels unchanged.
public struct PreparedBody: Sendable, Equatable {
    /// The body's `Content-Type` header field, folded, ending in CRLF.
    public let header: [UInt8]
    /// The body after the blank line, ending in CRLF.
    public let body: [UInt8]

    init(header: [UInt8], body: [UInt8]) {
        self.header = header
        self.body = body
    }
}

/// RFC 3156 (PGP/MIME) message bodies around what an OpenPGP implementation made: the entity to sign or encrypt,
/// `multipart/signed` with a detached signature, `multipart/encrypted` with the ciphertext. No cryptography here.
public enum PGPMIME {
    /// The MIME entity of `message`'s content as ``MessageWriter`` writes it (its `Content-*` fields, a blank line,
    /// the body), in CRLF lines and 7-bit (quoted-printable or base64 where the content is not): the canonical form
    /// RFC 3156 signs and encrypts. The caller zeroes it after use.
    ///
    /// - Throws: the writer's ``ComposeError`` for a message it refuses; ``ComposeError/notSevenBit`` when the
    ///   content holds an attached message that needs 8bit (it could be changed on the way and break a signature).
    public static func entity(of message: OutgoingMessage) throws(ComposeError) -> [UInt8] {
        var plain = message
        plain.preparedBody = nil
        var written = try MessageWriter.bytes(of: plain).bytes
        defer { zero(&written) }
        // The writer's own header fields end with its MIME-Version line; what follows is the content.
        let marker = Array("\r\nMIME-Version: 1.0\r\n".utf8)
        guard let found = written.firstRange(of: marker) else { throw .notSevenBit }
        let entity = Array(written[found.upperBound...])
        guard entity.allSatisfy({ $0 < 0x80 && $0 != 0 }) else {
            var copy = entity
            zero(&copy)
            throw .notSevenBit
        }
        return entity
    }

    /// A `multipart/signed` body (RFC 3156 section 5): `entity` exactly as signed, then the armored detached
    /// `signature` as `application/pgp-signature`.
    ///
    /// - Parameter micalg: The hash the signature used, as `pgp-sha256`.
    public static func signed(entity: [UInt8], signature: [UInt8], micalg: String) -> PreparedBody {
        let boundary = boundary(avoiding: [entity, signature])
        let header =
            "Content-Type: multipart/signed; micalg=\(micalg);\r\n protocol=\"application/pgp-signature\";"
            + " boundary=\"\(boundary)\"\r\n"
        var body = Array("This is an OpenPGP/MIME signed message (RFC 4880 and 3156)\r\n--\(boundary)\r\n".utf8)
        body += entity
        body += Array(
            ("\r\n--\(boundary)\r\nContent-Type: application/pgp-signature; name=\"signature.asc\"\r\n"
                + "Content-Description: OpenPGP digital signature\r\n"
                + "Content-Disposition: attachment; filename=\"signature.asc\"\r\n\r\n").utf8
        )
        body += crlf(signature)
        body += Array("\r\n--\(boundary)--\r\n".utf8)
        return PreparedBody(header: Array(header.utf8), body: body)
    }

    /// A `multipart/encrypted` body (RFC 3156 section 4): the `application/pgp-encrypted` part with `Version: 1`,
    /// then the ASCII-armored OpenPGP message as `application/octet-stream`.
    public static func encrypted(_ armored: [UInt8]) -> PreparedBody {
        let boundary = boundary(avoiding: [armored])
        let header =
            "Content-Type: multipart/encrypted;\r\n protocol=\"application/pgp-encrypted\";"
            + " boundary=\"\(boundary)\"\r\n"
        var body = Array(
            ("This is an OpenPGP/MIME encrypted message (RFC 4880 and 3156)\r\n--\(boundary)\r\n"
                + "Content-Type: application/pgp-encrypted\r\n"
                + "Content-Description: PGP/MIME version identification\r\n\r\nVersion: 1\r\n\r\n"
                + "--\(boundary)\r\nContent-Type: application/octet-stream; name=\"encrypted.asc\"\r\n"
                + "Content-Description: OpenPGP encrypted message\r\n"
                + "Content-Disposition: inline; filename=\"encrypted.asc\"\r\n\r\n").utf8
        )
        body += crlf(armored)
        body += Array("\r\n--\(boundary)--\r\n".utf8)
        return PreparedBody(header: Array(header.utf8), body: body)
    }

    /// Zeroes `bytes` in place (plaintext a caller is done with).
    public static func zero(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { raw in
            guard let base = raw.baseAddress else { return }
            // A volatile-enough write: the buffer is read back below, so the stores are not elided.
            memset(base, 0, raw.count)
        }
        _ = bytes.withUnsafeBytes { raw in raw.reduce(0, |) }
    }

    /// Armor with every line ending in CRLF and no line break at the end (the delimiter's CRLF follows).
    static func crlf(_ armored: [UInt8]) -> [UInt8] {
        var result: [UInt8] = []
        result.reserveCapacity(armored.count + armored.count / 64 + 2)
        var previous: UInt8 = 0
        for byte in armored {
            if byte == 0x0A && previous != 0x0D { result.append(0x0D) }
            result.append(byte)
            previous = byte
        }
        while result.last == 0x0A || result.last == 0x0D { result.removeLast() }
        return result
    }

    /// A random boundary that occurs in none of `parts`.
    static func boundary(avoiding parts: [[UInt8]]) -> String {
        var generator = SystemRandomNumberGenerator()
        while true {
            let candidate = MessageWriter.boundary(using: &generator)
            let bytes = Array(candidate.utf8)
            if !parts.contains(where: { $0.firstRange(of: bytes) != nil }) { return candidate }
        }
    }
}
