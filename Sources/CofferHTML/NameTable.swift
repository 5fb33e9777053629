/// A fixed table from names to values, looked up by the name's UTF-8 bytes.
///
/// The parser and the sanitizer look a name up for every tag and attribute they meet (its ``HTMLTagID``, an
/// element's policy, an attribute's role). A `Dictionary` keyed by `String` hashes each name with the standard
/// library's seeded SipHash, which cost more than the rest of the lookup together; this table hashes the bytes with
/// FNV-1a and compares them. Its names are fixed when it is built, so a hostile name cannot lengthen a probe: a
/// lookup ends at the first empty slot, and the table is at most a quarter full.
package struct NameTable<Value: Sendable>: Sendable {
    @usableFromInline let index: NameIndex
    @usableFromInline let values: [Value]

    /// A table of `pairs`; a name given twice keeps its last value.
    package init(_ pairs: some Sequence<(String, Value)>) {
        var positions: [String: Int] = [:]
        var names: [String] = []
        var values: [Value] = []
        for (name, value) in pairs {
            if let position = positions[name] {
                values[position] = value
            } else {
                positions[name] = names.count
                names.append(name)
                values.append(value)
            }
        }
        (index, self.values) = (NameIndex(names), values)
    }

    /// A table of a dictionary's entries.
    package init(_ dictionary: [String: Value]) {
        self.init(dictionary.map { ($0.key, $0.value) })
    }

    /// The value for `name`, if the table has it.
    @inlinable package subscript(name: String) -> Value? {
        guard let position = index.position(of: name) else { return nil }
        return values[position]
    }
}

/// The positions of a fixed list of names, found by hashing a name's bytes (``NameTable``'s lookup).
package final class NameIndex: Sendable {
    /// Every name's bytes, one after another.
    private let bytes: [UInt8]
    /// Where each name starts in `bytes`, and its length.
    private let starts: [Int32]
    private let counts: [Int32]
    /// Open addressing: a name's position, or -1 for an empty slot.
    private let slots: [Int32]
    private let mask: Int

    /// An index of `names`, which are distinct.
    init(_ names: [String]) {
        var capacity = 8
        while capacity < names.count * 4 { capacity *= 2 }
        var bytes: [UInt8] = []
        var starts: [Int32] = []
        var counts: [Int32] = []
        var slots = [Int32](repeating: -1, count: capacity)
        for (position, name) in names.enumerated() {
            let utf8 = Array(name.utf8)
            var slot = utf8.withUnsafeBufferPointer { Self.hash($0) } & (capacity - 1)
            while slots[slot] >= 0 { slot = (slot + 1) & (capacity - 1) }
            slots[slot] = Int32(position)
            starts.append(Int32(bytes.count))
            counts.append(Int32(utf8.count))
            bytes.append(contentsOf: utf8)
        }
        (self.bytes, self.starts, self.counts, self.slots) = (bytes, starts, counts, slots)
        mask = capacity - 1
    }

    /// The position of `name` in the list the index was built from, if it is there.
    package func position(of name: String) -> Int? {
        var name = name
        return name.withUTF8 { position(of: $0) }
    }

    /// The position of the name spelled by `name`'s bytes, if it is in the list.
    package func position(of name: UnsafeBufferPointer<UInt8>) -> Int? {
        var slot = Self.hash(name) & mask
        return bytes.withUnsafeBufferPointer { stored in
            while true {
                let entry = slots[slot]
                if entry < 0 { return nil }
                let position = Int(entry)
                if Int(counts[position]) == name.count {
                    let start = Int(starts[position])
                    var offset = 0
                    while offset < name.count && stored[start + offset] == name[offset] { offset += 1 }
                    if offset == name.count { return position }
                }
                slot = (slot + 1) & mask
            }
        }
    }

    /// FNV-1a over the bytes, folded so that the low bits depend on all of them.
    private static func hash(_ name: UnsafeBufferPointer<UInt8>) -> Int {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in name {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
        }
        return Int(truncatingIfNeeded: hash ^ (hash >> 32))
    }
}
