import CofferMIME

/// The plaintext layout of a sealed cell, v1: a version byte `0x01`, then fields. A string is `0x00` (absent) or
/// `0x01`, a big-endian u32 length and UTF-8 bytes; a count is a big-endian u32; a flag is one byte.
package struct CellWriter {
    /// The version byte every cell starts with.
    package static let version: UInt8 = 1

    package private(set) var bytes: [UInt8]

    package init(capacity: Int = 64) {
        bytes = []
        bytes.reserveCapacity(capacity)
        bytes.append(Self.version)
    }

    package mutating func count(_ value: Int) {
        let value = UInt32(truncatingIfNeeded: value)
        bytes.append(UInt8(truncatingIfNeeded: value >> 24))
        bytes.append(UInt8(truncatingIfNeeded: value >> 16))
        bytes.append(UInt8(truncatingIfNeeded: value >> 8))
        bytes.append(UInt8(truncatingIfNeeded: value))
    }

    package mutating func string(_ value: String?) {
        guard let value else {
            bytes.append(0)
            return
        }
        bytes.append(1)
        var text = value
        text.withUTF8 { utf8 in
            count(utf8.count)
            bytes.append(contentsOf: utf8)
        }
    }

    package mutating func flag(_ value: Bool) { bytes.append(value ? 1 : 0) }

    package mutating func raw(_ value: [UInt8]) {
        count(value.count)
        bytes.append(contentsOf: value)
    }

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
    private var position = 1

    package init(_ bytes: [UInt8]) throws(Malformed) {
        guard bytes.first == CellWriter.version else { throw Malformed() }
        self.bytes = bytes
    }

    package var isAtEnd: Bool { position == bytes.count }

    package mutating func count() throws(Malformed) -> Int {
        guard bytes.count - position >= 4 else { throw Malformed() }
        var value = 0
        for _ in 0..<4 {
            value = value << 8 | Int(bytes[position])
            position += 1
        }
        return value
    }

    package mutating func string() throws(Malformed) -> String? {
        guard position < bytes.count else { throw Malformed() }
        let tag = bytes[position]
        position += 1
        switch tag {
        case 0: return nil
        case 1:
            let length = try count()
            guard bytes.count - position >= length else { throw Malformed() }
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
        guard position < bytes.count, bytes[position] <= 1 else { throw Malformed() }
        defer { position += 1 }
        return bytes[position] == 1
    }

    package mutating func raw() throws(Malformed) -> [UInt8] {
        let length = try count()
        guard bytes.count - position >= length else { throw Malformed() }
        defer { position += length }
        return Array(bytes[position..<position + length])
    }

    package mutating func addresses() throws(Malformed) -> [MailAddress] {
        let total = try count()
        guard total <= bytes.count else { throw Malformed() }
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
