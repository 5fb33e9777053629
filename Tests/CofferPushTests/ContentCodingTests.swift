import Crypto
import Foundation
import Testing

@testable import CofferPush

@Suite("RFC 8188 aes128gcm content coding")
struct ContentCodingTests {
    static let file = "rfc8188.txt"

    @Test("RFC 8188 3.1: a single record, empty key id, opens and is reproduced byte for byte")
    func singleRecordKnownAnswer() throws {
        let ikm = SymmetricKey(data: try Vectors.bytes(Self.file, "s31_ikm"))
        let body = try Vectors.bytes(Self.file, "s31_body")
        #expect(try ContentCoding.open(body, key: ikm) == Array("I am the walrus".utf8))
        let resealed = try ContentCoding.seal(
            Array("I am the walrus".utf8),
            key: ikm,
            salt: try Vectors.bytes(Self.file, "s31_salt"),
            recordSize: 4096
        )
        #expect(resealed == body)
    }

    @Test("RFC 8188 3.2: two records with key id \"a1\" and one octet of padding, byte for byte")
    func multipleRecordsKnownAnswer() throws {
        let ikm = SymmetricKey(data: try Vectors.bytes(Self.file, "s32_ikm"))
        let body = try Vectors.bytes(Self.file, "s32_body")
        var seenKeyID: [UInt8] = []
        let plaintext = try ContentCoding.open(body) { (header: ContentCoding.Header) throws(CofferPushError) in
            seenKeyID = header.keyID
            return ikm
        }
        #expect(plaintext == Array("I am the walrus".utf8))
        #expect(seenKeyID == Array("a1".utf8))
        let resealed = try ContentCoding.seal(
            Array("I am the walrus".utf8),
            key: ikm,
            salt: Array(body[0..<16]),
            recordSize: 25,
            keyID: Array("a1".utf8),
            padding: 1
        )
        #expect(resealed == body)
    }

    @Test(
        "Round trip across record sizes, lengths and padding",
        arguments: [
            (18 as UInt32, 0, 0), (18, 1, 0), (18, 5, 7), (25, 100, 3), (64, 47, 0), (64, 48, 0), (4096, 0, 0),
            (4096, 5000, 200), (100, 0, 300),
        ]
    )
    func roundTrip(recordSize: UInt32, length: Int, padding: Int) throws {
        let key = SymmetricKey(size: .bits128)
        let plaintext = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        let body = try ContentCoding.seal(plaintext, key: key, recordSize: recordSize, padding: padding)
        #expect(try ContentCoding.open(body, key: key) == plaintext)
        let records = body.count - ContentCoding.minimumHeaderLength
        let perRecord = Int(recordSize) - 17
        #expect(records == length + padding + ((length + padding + perRecord - 1) / perRecord).clamped(1) * 17)
    }

    @Test("A body cut after a whole record is truncated, not a shorter plaintext")
    func droppedLastRecordIsTruncated() throws {
        let body = try Vectors.bytes(Self.file, "s32_body")
        let ikm = SymmetricKey(data: try Vectors.bytes(Self.file, "s32_ikm"))
        let headerLength = ContentCoding.minimumHeaderLength + 2
        #expect(throws: CofferPushError.truncated) {
            try ContentCoding.open(Array(body[..<(headerLength + 25)]), key: ikm)
        }
        #expect(throws: CofferPushError.truncated) { try ContentCoding.open(Array(body[..<headerLength]), key: ikm) }
    }

    @Test("Swapping two records fails authentication")
    func reorderedRecordsFail() throws {
        let key = SymmetricKey(size: .bits128)
        let body = try ContentCoding.seal(Array(repeating: 0x41, count: 40), key: key, recordSize: 30)
        let header = Array(body[..<21])
        let records = Array(body[21...])
        let swapped = header + Array(records[30..<60]) + Array(records[0..<30]) + Array(records[60...])
        #expect(throws: CofferPushError.authenticationFailed) { try ContentCoding.open(swapped, key: key) }
    }

    @Test("Every single flipped octet of the 3.2 body is a typed error", arguments: 0..<73)
    func flippedOctetFails(position: Int) throws {
        var body = try Vectors.bytes(Self.file, "s32_body")
        let ikm = SymmetricKey(data: try Vectors.bytes(Self.file, "s32_ikm"))
        body[position] ^= 0x80
        // The key id is not authenticated by itself: it only chooses the key, as a receiver's lookup does here.
        #expect(throws: CofferPushError.self) {
            try ContentCoding.open(body) { (header: ContentCoding.Header) throws(CofferPushError) in
                guard header.keyID == Array("a1".utf8) else { throw .invalidParameter("unknown key id") }
                return ikm
            }
        }
    }

    @Test("Headers: too short, key id longer than the body, record size below 18")
    func badHeaders() throws {
        let key = SymmetricKey(size: .bits128)
        #expect(throws: CofferPushError.truncated) {
            try ContentCoding.open([UInt8](repeating: 0, count: 20), key: key)
        }
        var header = [UInt8](repeating: 0, count: 16) + [0, 0, 16, 0, 5, 1, 2]
        #expect(throws: CofferPushError.truncated) { try ContentCoding.open(header, key: key) }
        header = [UInt8](repeating: 0, count: 16) + [0, 0, 0, 17, 0] + [UInt8](repeating: 0, count: 17)
        #expect(throws: CofferPushError.invalidRecordSize(17)) { try ContentCoding.open(header, key: key) }
        #expect(throws: CofferPushError.invalidRecordSize(17)) {
            try ContentCoding.seal([1], key: key, recordSize: 17)
        }
        #expect(throws: CofferPushError.invalidLength(what: "salt", expected: 16, actual: 3)) {
            try ContentCoding.seal([1], key: key, salt: [1, 2, 3])
        }
    }

    @Test("A record too short for a tag and a delimiter is malformed; octets after the last record are refused")
    func shortAndStrayRecords() throws {
        let key = SymmetricKey(size: .bits128)
        let header = try ContentCoding.Header(salt: [UInt8](repeating: 1, count: 16), recordSize: 30).encoded
        #expect(throws: CofferPushError.malformedRecord("a record is too short to hold a tag and a delimiter")) {
            try ContentCoding.open(header + [UInt8](repeating: 0, count: 16), key: key)
        }
        // 26 octets fill exactly two 30-octet records; 16 stray octets after them are refused.
        let body = try ContentCoding.seal(Array(repeating: 1, count: 26), key: key, recordSize: 30)
        #expect(body.count == ContentCoding.minimumHeaderLength + 60)
        #expect(throws: CofferPushError.malformedRecord("records follow the last record")) {
            try ContentCoding.open(body + [UInt8](repeating: 0, count: 16), key: key)
        }
    }

    /// Builds a body from hand-made record contents (delimiters and padding included), sealed correctly.
    func craft(_ contents: [[UInt8]], recordSize: UInt32, key: SymmetricKey) throws -> [UInt8] {
        let salt = [UInt8](repeating: 7, count: 16)
        var body = try ContentCoding.Header(salt: salt, recordSize: recordSize).encoded
        let (cek, base) = ContentCoding.deriveKeys(key: key, salt: salt)
        for (index, content) in contents.enumerated() {
            try ContentCoding.sealRecord(content, key: cek, nonce: ContentCoding.nonce(base, index), into: &body)
        }
        return body
    }

    @Test("Authentic records with bad delimiters or padding are refused")
    func badDelimitersAndPadding() throws {
        let key = SymmetricKey(size: .bits128)
        // Sanity: the crafting itself produces bodies that open.
        #expect(
            try ContentCoding.open(try craft([[9, 0x01, 0], [8, 0x02]], recordSize: 19, key: key), key: key) == [9, 8]
        )
        #expect(throws: CofferPushError.invalidPadding) {
            try ContentCoding.open(try craft([[1, 0x02, 0x05, 0]], recordSize: 4096, key: key), key: key)
        }
        #expect(throws: CofferPushError.invalidPadding) {
            try ContentCoding.open(try craft([[0, 0, 0]], recordSize: 4096, key: key), key: key)
        }
        #expect(throws: CofferPushError.invalidPadding) {
            try ContentCoding.open(try craft([[1, 0x03]], recordSize: 4096, key: key), key: key)
        }
        // 0x01 in the only record: the stream stops before its last record.
        #expect(throws: CofferPushError.truncated) {
            try ContentCoding.open(try craft([[1, 0x01]], recordSize: 4096, key: key), key: key)
        }
        // 0x02 in a record that is followed by another.
        #expect(throws: CofferPushError.malformedRecord("records follow the last record")) {
            try ContentCoding.open(try craft([[1, 0x02, 0], [2, 0x02]], recordSize: 19, key: key), key: key)
        }
    }

    @Test("Absurd padding is a typed error, not an arithmetic trap")
    func absurdPadding() {
        let key = SymmetricKey(size: .bits128)
        #expect(throws: CofferPushError.invalidParameter("padding is too large")) {
            try ContentCoding.seal([1, 2, 3], key: key, recordSize: 18, padding: Int.max - 1)
        }
        // No overflow in data + padding, but rounding up to whole 4096-octet records would overflow.
        #expect(throws: CofferPushError.invalidParameter("padding is too large")) {
            try ContentCoding.seal([1, 2, 3], key: key, recordSize: 4096, padding: Int.max - 3)
        }
        #expect(throws: CofferPushError.invalidParameter("padding cannot be negative")) {
            try ContentCoding.seal([1], key: key, padding: -1)
        }
    }

    @Test("The wrong key fails authentication")
    func wrongKey() throws {
        let body = try ContentCoding.seal(Array("secret subject".utf8), key: SymmetricKey(size: .bits128))
        #expect(throws: CofferPushError.authenticationFailed) {
            try ContentCoding.open(body, key: SymmetricKey(size: .bits128))
        }
    }
}

extension Int {
    fileprivate func clamped(_ minimum: Int) -> Int { Swift.max(self, minimum) }
}
