/// The names seen so far in one list (an element's attributes), to find a repeat.
///
/// Names are compared one by one while there are few, which is cheaper than hashing them, and through a set once
/// there are ``setAt``: a tag with thousands of attributes is checked in linear time, not by comparing each name with
/// every earlier one. The tokenizer, the sanitizer and its stability proof check repeats here; the tree builder
/// compares two elements' attributes through a set from the same count (``setAt``).
package struct SeenNames {
    /// How many names are compared one by one before a set takes over.
    package static let setAt = 16
    /// The names seen, while fewer than ``setAt``: the first `count` of `few` (the rest are left from an earlier list,
    /// to be overwritten rather than released and allocated again).
    private var few: [String] = []
    private var count = 0
    private var many: Set<String> = []

    /// No names yet.
    package init() {}

    /// Adds `name`; false when it was seen already.
    package mutating func insert(_ name: String) -> Bool {
        guard count == Self.setAt else {
            // Comparing the lengths first (constant time) spares most of the string comparisons.
            let length = name.utf8.count
            for index in 0..<count where few[index].utf8.count == length && few[index] == name { return false }
            if count < few.count { few[count] = name } else { few.append(name) }
            count += 1
            if count == Self.setAt { many = Set(few) }
            return true
        }
        return many.insert(name).inserted
    }

    /// Forgets every name, keeping the storage for the next list.
    package mutating func removeAll() {
        count = 0
        if !many.isEmpty { many.removeAll() }
    }
}
