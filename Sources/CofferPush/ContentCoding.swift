import Crypto
import Foundation

/// The `aes128gcm` HTTP content coding of RFC 8188: a header (salt, record size, key id) and AES-128-GCM records.
///
/// Each record's plaintext ends in a delimiter, 0x01 when more records follow and 0x02 in the last one, then any
/// number of zero octets of padding. The decoder checks all of it, so a body cut at a record boundary, a record moved
/// or changed, or non-zero padding is an error, never a shorter plaintext.
public enum ContentCoding {
    /// The length of the salt in the header.
    public static let saltLength = 16
    /// The length of a header with an empty key id: salt (16), record size (4), key id length (1).
    public static let minimumHeaderLength = 21
    /// The smallest valid record size: a 16-octet tag, the delimiter and one octet (RFC 8188 section 2).
    public static let minimumRecordSize: UInt32 = 18
    /// The length of the AES-GCM tag at the end of each record.
    public static let tagLength = 16

    /// The header that starts every `aes128gcm` body.
    public struct Header: Sendable, Equatable {
        /// The 16-octet salt; with the input key it derives this body's content key and nonce.
        public var salt: [UInt8]
        /// The record size: every record but the last is exactly this long, tag included.
        public var recordSize: UInt32
        /// The key id (0 to 255 octets); Web Push puts the sender's public key here.
        public var keyID: [UInt8]

        /// Makes a header.
        ///
        /// - Throws: `CofferPushError.invalidLength` for a salt that is not 16 octets, `.invalidRecordSize` below 18,
        ///   `.invalidParameter` for a key id longer than 255 octets.
        public init(salt: [UInt8], recordSize: UInt32, keyID: [UInt8] = []) throws(CofferPushError) {
            guard salt.count == ContentCoding.saltLength else {
                throw .invalidLength(what: "salt", expected: ContentCoding.saltLength, actual: salt.count)
            }
            guard recordSize >= ContentCoding.minimumRecordSize else { throw .invalidRecordSize(recordSize) }
            guard keyID.count <= 255 else { throw .invalidParameter("the key id is longer than 255 octets") }
            self.salt = salt
            self.recordSize = recordSize
            self.keyID = keyID
        }

        /// The header's wire form.
        public var encoded: [UInt8] {
            var bytes = salt
            withUnsafeBytes(of: recordSize.bigEndian) { bytes.append(contentsOf: $0) }
            bytes.append(UInt8(keyID.count))
            bytes.append(contentsOf: keyID)
            return bytes
        }

        /// Reads the header at the start of `body`, returning it and its length.
        ///
        /// - Throws: `CofferPushError.truncated` when the body is shorter than the header, `.invalidRecordSize` for a
        ///   record size below 18.
        public static func parse(
            _ body: some Collection<UInt8>
        ) throws(CofferPushError) -> (header: Header, length: Int) {
            let bytes = Array(body.prefix(ContentCoding.minimumHeaderLength + 255))
            guard bytes.count >= ContentCoding.minimumHeaderLength else { throw .truncated }
            let recordSize = bytes[16..<20].reduce(UInt32(0)) { ($0 << 8) | UInt32($1) }
            let keyIDLength = Int(bytes[20])
            let length = ContentCoding.minimumHeaderLength + keyIDLength
            guard bytes.count >= length else { throw .truncated }
            let header = try Header(
                salt: Array(bytes[0..<16]),
                recordSize: recordSize,
                keyID: Array(bytes[21..<length])
            )
            return (header, length)
        }
    }

    /// Encrypts `plaintext` into an `aes128gcm` body.
    ///
    /// Padding is placed first: the earliest records carry the zero octets, then the data follows (this reproduces
    /// RFC 8188's section 3.2 example). The number of records is the smallest that holds data, padding and one
    /// delimiter per record.
    /// - Parameters:
    ///   - plaintext: the content to encrypt.
    ///   - key: the input keying material (IKM); RFC 8188 takes 16 octets, any length is accepted.
    ///   - salt: 16 random octets; `nil` draws fresh ones.
    ///   - recordSize: the record size, at least 18.
    ///   - keyID: the key id to put in the header, at most 255 octets.
    ///   - padding: how many zero octets of padding to add in all.
    /// - Throws: `CofferPushError.invalidParameter`, `.invalidRecordSize` or `.invalidLength` for bad parameters.
    /// - Warning: never pass the same salt twice with the same key: the content key and nonces would repeat.
    public static func seal(
        _ plaintext: some Collection<UInt8>,
        key: SymmetricKey,
        salt: [UInt8]? = nil,
        recordSize: UInt32 = 4096,
        keyID: [UInt8] = [],
        padding: Int = 0
    ) throws(CofferPushError) -> [UInt8] {
        let salt = salt ?? randomSalt()
        let header = try Header(salt: salt, recordSize: recordSize, keyID: keyID)
        guard padding >= 0 else { throw .invalidParameter("padding cannot be negative") }
        let data = Array(plaintext)
        let (total, overflow) = data.count.addingReportingOverflow(padding)
        // A bound far above any push or HTTP body, so the record arithmetic below cannot overflow.
        guard !overflow, total <= Int(Int32.max) else { throw .invalidParameter("padding is too large") }
        // Each record holds recordSize - 16 octets of plaintext: data or padding, and one delimiter.
        let perRecord = Int(recordSize) - tagLength - 1
        let recordCount = max(1, (total + perRecord - 1) / perRecord)
        let (cek, nonceBase) = deriveKeys(key: key, salt: salt)

        var body = header.encoded
        body.reserveCapacity(body.count + total + recordCount * (tagLength + 1))
        var dataOffset = 0
        var paddingLeft = padding
        for index in 0..<recordCount {
            let isLast = index == recordCount - 1
            let padHere = min(paddingLeft, perRecord)
            let dataHere = min(data.count - dataOffset, perRecord - padHere)
            var content = Array(data[dataOffset..<(dataOffset + dataHere)])
            content.append(isLast ? 0x02 : 0x01)
            content.append(contentsOf: repeatElement(0, count: padHere))
            dataOffset += dataHere
            paddingLeft -= padHere
            try sealRecord(content, key: cek, nonce: nonce(nonceBase, index), into: &body)
        }
        return body
    }

    /// Decrypts an `aes128gcm` body with the key that `key` chooses from its header.
    ///
    /// - Parameters:
    ///   - body: the whole body, header first.
    ///   - key: returns the input keying material for the header (for example by its key id); it may throw.
    /// - Returns: the plaintext of all records, delimiters and padding removed.
    /// - Throws: `CofferPushError` for a short or malformed header, a record layout that does not match the record
    ///   size, a failed authentication, a bad delimiter or non-zero padding, or a body that stops before its last
    ///   record; or what `key` throws.
    public static func open(
        _ body: some Collection<UInt8>,
        key: (Header) throws(CofferPushError) -> SymmetricKey
    ) throws(CofferPushError) -> [UInt8] {
        let bytes = Array(body)
        let (header, headerLength) = try Header.parse(bytes)
        return try openRecords(bytes[headerLength...], header: header, ikm: try key(header))
    }

    /// Decrypts an `aes128gcm` body with one known key.
    ///
    /// - Throws: as ``open(_:key:)-swift.type.method``.
    public static func open(_ body: some Collection<UInt8>, key: SymmetricKey) throws(CofferPushError) -> [UInt8] {
        try open(body) { (_: Header) throws(CofferPushError) in key }
    }

    static func openRecords(
        _ records: ArraySlice<UInt8>,
        header: Header,
        ikm: SymmetricKey
    ) throws(CofferPushError)
        -> [UInt8]
    {
        guard !records.isEmpty else { throw .truncated }
        let (cek, nonceBase) = deriveKeys(key: ikm, salt: header.salt)
        let recordSize = Int(header.recordSize)
        var plaintext: [UInt8] = []
        plaintext.reserveCapacity(records.count)
        var offset = records.startIndex
        var index = 0
        while offset < records.endIndex {
            let length = min(recordSize, records.endIndex - offset)
            let isLast = offset + length == records.endIndex
            guard length > tagLength else {
                throw .malformedRecord("a record is too short to hold a tag and a delimiter")
            }
            let content = try openRecord(records[offset..<(offset + length)], key: cek, nonce: nonce(nonceBase, index))
            guard let delimiterIndex = content.lastIndex(where: { $0 != 0 }) else { throw .invalidPadding }
            switch (content[delimiterIndex], isLast) {
            case (0x02, true), (0x01, false): break
            case (0x01, true): throw .truncated
            case (0x02, false): throw .malformedRecord("records follow the last record")
            default: throw .invalidPadding
            }
            plaintext.append(contentsOf: content[..<delimiterIndex])
            offset += length
            index += 1
        }
        return plaintext
    }

    static func randomSalt() -> [UInt8] {
        SymmetricKey(size: .bits128).withUnsafeBytes { Array($0) }
    }

    /// RFC 8188 section 2.2 and 2.3: the content-encryption key and the nonce base, two expansions of one
    /// pseudorandom key (HKDF-Extract of `key` under `salt`, computed once).
    static func deriveKeys(key: SymmetricKey, salt: [UInt8]) -> (cek: SymmetricKey, nonceBase: [UInt8]) {
        let pseudorandomKey = HKDF<SHA256>.extract(inputKeyMaterial: key, salt: salt)
        let cek = HKDF<SHA256>.expand(
            pseudoRandomKey: pseudorandomKey,
            info: Array("Content-Encoding: aes128gcm\0".utf8),
            outputByteCount: 16
        )
        let nonceBase = HKDF<SHA256>.expand(
            pseudoRandomKey: pseudorandomKey,
            info: Array("Content-Encoding: nonce\0".utf8),
            outputByteCount: 12
        ).withUnsafeBytes { Array($0) }
        return (cek, nonceBase)
    }

    /// The record's nonce: the base XOR the record's sequence number as a 96-bit big-endian integer.
    static func nonce(_ base: [UInt8], _ index: Int) -> [UInt8] {
        var nonce = base
        var sequence = UInt64(index)
        for position in stride(from: 11, through: 4, by: -1) {
            nonce[position] ^= UInt8(truncatingIfNeeded: sequence)
            sequence >>= 8
        }
        return nonce
    }

    /// Appends the record (ciphertext, then tag) to `body`.
    static func sealRecord(
        _ content: [UInt8],
        key: SymmetricKey,
        nonce: [UInt8],
        into body: inout [UInt8]
    ) throws(CofferPushError) {
        do {
            let box = try AES.GCM.seal(content, using: key, nonce: AES.GCM.Nonce(data: nonce))
            body.append(contentsOf: box.ciphertext)
            body.append(contentsOf: box.tag)
        } catch {
            throw .invalidParameter("AES-GCM refused to encrypt a record")
        }
    }

    static func openRecord(
        _ record: ArraySlice<UInt8>,
        key: SymmetricKey,
        nonce: [UInt8]
    ) throws(CofferPushError)
        -> [UInt8]
    {
        do {
            let box = try AES.GCM.SealedBox(
                nonce: AES.GCM.Nonce(data: nonce),
                ciphertext: record.dropLast(tagLength),
                tag: record.suffix(tagLength)
            )
            return Array(try AES.GCM.open(box, using: key))
        } catch {
            throw .authenticationFailed
        }
    }
}
