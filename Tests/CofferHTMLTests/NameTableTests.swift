import Testing

@testable import CofferHTML

/// ``NameTable``: every name it was built from is found with its value, and any other name, however it is spelled,
/// is not.
@Suite struct NameTableTests {
    @Test func everyTagNameFindsItsIDAndNoOtherNameDoes() {
        for id in HTMLTagID.allCases where id != .other {
            #expect(HTMLTagID(name: id.name) == id)
            // Case matters (names are stored lowercased or SVG-adjusted), and a prefix or an extension is another name.
            #expect(HTMLTagID(name: id.name.uppercased()) == (id.name.uppercased() == id.name ? id : .other))
            #expect(HTMLTagID(name: id.name + "x") == .other)
            #expect(HTMLTagID(name: String(id.name.dropLast())) != id)
        }
        #expect(HTMLTagID(name: "") == .other)
        #expect(HTMLTagID(name: "foreignobject") == .other)
        #expect(HTMLTagID(name: "div\u{0}") == .other)
        #expect(HTMLTagID(name: "dív") == .other)
    }

    @Test func aTableAgreesWithADictionaryOnNamesInAndOut() {
        var dictionary: [String: Int] = [:]
        for number in 0..<500 { dictionary["name-\(number)"] = number }
        dictionary[""] = -1
        dictionary["é"] = -2
        let table = NameTable(dictionary)
        for (name, value) in dictionary { #expect(table[name] == value) }
        for probe in ["name-500", "name-", "Name-1", "name-01", "é\u{301}", "e", String(repeating: "a", count: 10_000)]
        {
            #expect(table[probe] == dictionary[probe])
        }
        // A name built from a slice (not a native string of its own) is found the same way.
        let long = "xxname-42yy"
        #expect(table[String(long.dropFirst(2).dropLast(2))] == 42)
    }

    @Test func aNameGivenTwiceKeepsItsLastValue() {
        let table = NameTable([("a", 1), ("b", 2), ("a", 3)])
        #expect(table["a"] == 3)
        #expect(table["b"] == 2)
        #expect(table["c"] == nil)
        #expect(NameTable<Int>([])["a"] == nil)
    }
}
