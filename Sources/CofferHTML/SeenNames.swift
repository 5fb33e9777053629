/// The names seen so far in one list (an element's attributes), to find a repeat.
///
/// Names are compared one by one while there are few, which is cheaper than hashing them, and through a set once
/// there are ``setAt``: a tag with thousands of attributes is checked in linear time, not by comparing each name with
/// every earlier one. The tokenizer, the tree builder, the sanitizer and its stability proof all check repeats here.
package struct SeenNames {
    /// How many names are compared one by one before a set takes over.
    package static let setAt = 16
    private var few: [String] = []
    private var many: Set<String> = []

    /// Room for the first `count` names (at most ``setAt``) in one allocation.
    package init(expecting count: Int = 0) {
        few.reserveCapacity(min(count, Self.setAt))
    }

    /// Adds `name`; false when it was seen already.
    package mutating func insert(_ name: String) -> Bool {
        guard few.count == Self.setAt else {
            // Comparing the lengths first (constant time) spares most of the string comparisons.
            let length = name.utf8.count
            for seen in few where seen.utf8.count == length && seen == name { return false }
            few.append(name)
            if few.count == Self.setAt { many = Set(few) }
            return true
        }
        return many.insert(name).inserted
    }

    /// Forgets every name, keeping the storage for the next list.
    package mutating func removeAll() {
        few.removeAll(keepingCapacity: true)
        if !many.isEmpty { many.removeAll() }
    }
}
