import CofferMIME

/// The plaintext layout of a sealed cell, v2 (`docs/STORE.md`, "Sealed cells"): a version byte `0x02`, then fields,
/// then padding `0x80 00 … 00` up to the cell's bucket. A string is `0x00` (absent) or `0x01`, a big-endian u32
/// length and UTF-8 bytes; a count is a big-endian u32; a flag is one byte. v1 (`0x01`, no padding) is still read.
package struct CellWriter {
    /// The version byte every new cell starts with.
    package static let version: UInt8 = 2
    /// The version of unpadded cells written before v2; still readable.
    package static let unpaddedVersion: UInt8 = 1
    /// The smallest padded size.
    package static let minimumBucket = 32
    /// Up to this size buckets are powers of two; above it, multiples of it.
    package static let largeBucket = 1 << 20

    /// The version byte and fields, unpadded.
    private var body: [UInt8]

    /// The padded plaintext to seal: the fields, `0x80`, then zeros up to ``bucket(for:)``.
    package var bytes: [UInt8] {
        var padded = body
        let target = Self.bucket(for: body.count + 1)
        padded.reserveCapacity(target)
        padded.append(0x80)
        padded.append(contentsOf: repeatElement(0, count: target - padded.count))
        return padded
    }

    /// The padded size for `length` bytes (fields and the `0x80` marker): at least 32, the next power of two up to
    /// 1 MiB, then the next multiple of 1 MiB.
    package static func bucket(for length: Int) -> Int {
        if length <= minimumBucket { return minimumBucket }
        if length > largeBucket {
            let (quotient, remainder) = length.quotientAndRemainder(dividingBy: largeBucket)
            return (quotient + (remainder == 0 ? 0 : 1)) * largeBucket
        }
        var size = minimumBucket
        while size < length { size <<= 1 }
        return size
    }

    package init(capacity: Int = 64) {
        body = []
        body.reserveCapacity(capacity)
        body.append(Self.version)
    }

    package mutating func count(_ value: Int) {
        let value = UInt32(truncatingIfNeeded: value)
        body.append(UInt8(truncatingIfNeeded: value >> 24))
        body.append(UInt8(truncatingIfNeeded: value >> 16))
        body.append(UInt8(truncatingIfNeeded: value >> 8))
        body.append(UInt8(truncatingIfNeeded: value))
    }

    package mutating func string(_ value: String?) {
        guard let value else {
            body.append(0)
            return
        }
        body.append(1)
        var text = value
        text.withUTF8 { utf8 in
            count(utf8.count)
            body.append(contentsOf: utf8)
        }
    }

    package mutating func flag(_ value: Bool) { body.append(value ? 1 : 0) }

    /// A signed 64-bit integer, big-endian (two's complement).
    package mutating func int64(_ value: Int64) {
        let bits = UInt64(bitPattern: value)
        for shift in stride(from: 56, through: 0, by: -8) {
            body.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift)))
        }
    }

    /// A list of present strings: a count, then each string.
    package mutating func strings(_ values: [String]) {
        count(values.count)
        for value in values { string(value) }
    }

    package mutating func raw(_ value: [UInt8]) {
        count(value.count)
        body.append(contentsOf: value)
    }

    /// Bytes read in place (a secret's storage), without an intermediate array.
    package mutating func raw(_ value: UnsafeRawBufferPointer) {
        count(value.count)
        body.append(contentsOf: value)
    }

    /// Overwrites the fields written so far with zeros (a cell that held a secret, once its ``bytes`` were taken).
    package mutating func wipe() { StoreKeys.zero(&body) }

    package mutating func addresses(_ list: [MailAddress]) {
        count(list.count)
        for address in list {
            string(address.name)
            string(address.address)
            string(address.group)
        }
    }

    package static func text(_ value: String?) -> [UInt8] {
        var writer = CellWriter(capacity: (value?.utf8.count ?? 0) + 6)
        writer.string(value)
        return writer.bytes
    }

    package static func addressList(_ list: [MailAddress]) -> [UInt8] {
        var writer = CellWriter(capacity: 16 + list.count * 48)
        writer.addresses(list)
        return writer.bytes
    }

    /// The summary cell: the subject, then the From addresses (what a list row shows).
    package static func summary(subject: String?, from: [MailAddress]) -> [UInt8] {
        var writer = CellWriter(capacity: (subject?.utf8.count ?? 0) + 16 + from.count * 48)
        writer.string(subject)
        writer.addresses(from)
        return writer.bytes
    }

    package static func headers(_ fields: [HeaderField]) -> [UInt8] {
        var writer = CellWriter(capacity: 1024)
        writer.count(fields.count)
        for field in fields {
            writer.string(field.name)
            writer.string(field.rawValue)
            writer.string(field.value)
        }
        return writer.bytes
    }
}

/// Reads what ``CellWriter`` wrote; any inconsistency throws, and the caller treats the cell as corrupt.
package struct CellReader {
    package struct Malformed: Error {}

    private let bytes: [UInt8]
    /// Where the fields end (before a v2 cell's padding): the reader shares the caller's buffer, copying nothing.
    private let end: Int
    private var position = 1

    /// Reads a v2 cell (padding checked and removed) or a v1 cell (no padding).
    package init(_ bytes: [UInt8]) throws(Malformed) {
        switch bytes.first {
        case CellWriter.version:
            // Unambiguous: the last non-zero byte must be the 0x80 marker, and the size a bucket.
            guard CellWriter.bucket(for: bytes.count) == bytes.count,
                let marker = bytes.lastIndex(where: { $0 != 0 }), bytes[marker] == 0x80, marker >= 1
            else { throw Malformed() }
            self.bytes = bytes
            end = marker
        case CellWriter.unpaddedVersion:
            self.bytes = bytes
            end = bytes.count
        default:
            throw Malformed()
        }
    }

    package var isAtEnd: Bool { position == end }

    package mutating func count() throws(Malformed) -> Int {
        guard end - position >= 4 else { throw Malformed() }
        var value = 0
        for _ in 0..<4 {
            value = value << 8 | Int(bytes[position])
            position += 1
        }
        return value
    }

    package mutating func string() throws(Malformed) -> String? {
        guard position < end else { throw Malformed() }
        let tag = bytes[position]
        position += 1
        switch tag {
        case 0: return nil
        case 1:
            let length = try count()
            guard end - position >= length else { throw Malformed() }
            defer { position += length }
            return String(decoding: bytes[position..<position + length], as: UTF8.self)
        default: throw Malformed()
        }
    }

    package mutating func requiredString() throws(Malformed) -> String {
        guard let value = try string() else { throw Malformed() }
        return value
    }

    package mutating func flag() throws(Malformed) -> Bool {
        guard position < end, bytes[position] <= 1 else { throw Malformed() }
        defer { position += 1 }
        return bytes[position] == 1
    }

    /// A signed 64-bit integer written by ``CellWriter/int64(_:)``.
    package mutating func int64() throws(Malformed) -> Int64 {
        guard end - position >= 8 else { throw Malformed() }
        var value: UInt64 = 0
        for _ in 0..<8 {
            value = value << 8 | UInt64(bytes[position])
            position += 1
        }
        return Int64(bitPattern: value)
    }

    /// A list written by ``CellWriter/strings(_:)``; every entry must be present.
    package mutating func strings() throws(Malformed) -> [String] {
        let total = try count()
        // Each entry takes at least five bytes, so a count the cell cannot hold is refused before allocating.
        guard total <= (end - position) / 5 else { throw Malformed() }
        var values: [String] = []
        values.reserveCapacity(total)
        for _ in 0..<total { values.append(try requiredString()) }
        return values
    }

    package mutating func raw() throws(Malformed) -> [UInt8] {
        let length = try count()
        guard end - position >= length else { throw Malformed() }
        defer { position += length }
        return Array(bytes[position..<position + length])
    }

    package mutating func addresses() throws(Malformed) -> [MailAddress] {
        let total = try count()
        guard total <= end else { throw Malformed() }
        var list: [MailAddress] = []
        list.reserveCapacity(total)
        for _ in 0..<total {
            let name = try string()
            let address = try requiredString()
            let group = try string()
            list.append(MailAddress(name: name, address: address, group: group))
        }
        return list
    }

    package mutating func finish() throws(Malformed) {
        guard isAtEnd else { throw Malformed() }
    }

    package static func text(_ bytes: [UInt8]) throws(Malformed) -> String? {
        var reader = try CellReader(bytes)
        let value = try reader.string()
        try reader.finish()
        return value
    }

    package static func addressList(_ bytes: [UInt8]) throws(Malformed) -> [MailAddress] {
        var reader = try CellReader(bytes)
        let value = try reader.addresses()
        try reader.finish()
        return value
    }

    /// Reads a cell of ``CellWriter/summary(subject:from:)``.
    package static func summary(_ bytes: [UInt8]) throws(Malformed) -> (subject: String?, from: [MailAddress]) {
        var reader = try CellReader(bytes)
        let subject = try reader.string()
        let from = try reader.addresses()
        try reader.finish()
        return (subject, from)
    }

    package static func headers(_ bytes: [UInt8]) throws(Malformed) -> [HeaderField] {
        var reader = try CellReader(bytes)
        let total = try reader.count()
        guard total <= bytes.count else { throw Malformed() }
        var fields: [HeaderField] = []
        fields.reserveCapacity(total)
        for _ in 0..<total {
            let name = try reader.requiredString()
            let rawValue = try reader.requiredString()
            let value = try reader.requiredString()
            fields.append(HeaderField(name: name, rawValue: rawValue, value: value))
        }
        try reader.finish()
        return fields
    }
}
