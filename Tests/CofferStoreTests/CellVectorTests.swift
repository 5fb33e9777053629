import CofferCrypto
import CofferKeychain
import CofferKeymaker
import CofferMIME
import CofferTesting
import Foundation
import Testing

@testable import CofferStore

/// `Fixtures/cell_vectors.json`, made by `Fixtures/make_cell_vectors.py` (Python `cryptography`, from the documents).
struct CellVector: Decodable, Sendable, CustomTestStringConvertible {
    struct Value: Decodable, Sendable {
        var text: String?
        var addresses: [[String?]]?
        var bytes: String?
        var flag: Bool?
    }

    var table: String
    var column: String
    var row: [String]
    var kind: String
    var value: Value
    var mainKey: String
    var nonce: String
    var plaintext: String
    var envelope: String

    var testDescription: String { "\(table).\(column) \(row) \(kind) v\(plaintext.prefix(2))" }

    var sealedColumn: SealedColumn? { SealedColumn(rawValue: "\(table).\(column)") }

    static func all(file: String = #filePath) throws -> [CellVector] {
        struct Root: Decodable { var cells: [CellVector] }
        return try Fixtures.json(Root.self, "Fixtures/cell_vectors.json", besideFile: file).cells
    }
}

/// The vector's hex as bytes (no bytes for bad hex, which then fails every comparison).
func hexBytes(_ text: String) -> [UInt8] { [UInt8](hexString: text) ?? [] }

@Suite("Store cell known answers")
struct CellVectorTests {
    static let vectors = (try? CellVector.all()) ?? []

    @Test("the vectors are there") func loaded() { #expect(Self.vectors.count == 7) }

    /// The column keys the store derives from a MainKey with the vectors' bytes.
    static func keys(_ vector: CellVector) async throws -> StoreKeys {
        let keymaker = try await Fixtures.unlockedKeymaker(account: "vectors", mainKey: hexBytes(vector.mainKey))
        return try StoreKeys(mainKey: try await keymaker.mainKey(for: .userRequest))
    }

    @Test("the store opens the Python-sealed cell to exactly the vector's plaintext", arguments: vectors)
    func opens(vector: CellVector) async throws {
        let column = try #require(vector.sealedColumn)
        let keys = try await Self.keys(vector)
        let row = try #require(Int64(vector.row[0]))
        let extra = vector.row.count > 1 ? vector.row[1] : nil
        let opened = try #require(keys.open(Data(hexBytes(vector.envelope)), column, row: row, extra: extra))
        #expect(opened == hexBytes(vector.plaintext))
        // Bound to its place: the next row does not open it.
        #expect(keys.open(Data(hexBytes(vector.envelope)), column, row: row + 1, extra: extra) == nil)
    }

    @Test(
        "the writer produces the vector's padded plaintext byte for byte, and the reader decodes it",
        arguments: vectors
    )
    func encodes(vector: CellVector) throws {
        let plaintext = hexBytes(vector.plaintext)
        var writer = CellWriter()
        switch vector.kind {
        case "text":
            #expect(try CellReader.text(plaintext) == vector.value.text)
            writer.string(vector.value.text)
        case "addresses":
            let expected = (vector.value.addresses ?? []).map {
                MailAddress(name: $0[0], address: $0[1] ?? "", group: $0[2])
            }
            #expect(try CellReader.addressList(plaintext) == expected)
            writer.addresses(expected)
        case "bytes":
            var reader = try CellReader(plaintext)
            #expect(try reader.raw() == hexBytes(vector.value.bytes ?? ""))
            try reader.finish()
            writer.raw(hexBytes(vector.value.bytes ?? ""))
        case "flag":
            var reader = try CellReader(plaintext)
            #expect(try reader.flag() == vector.value.flag)
            try reader.finish()
            writer.flag(vector.value.flag ?? false)
        default:
            Issue.record("unknown kind \(vector.kind)")
        }
        // New cells are v2; the v1 vector is only read.
        if plaintext.first == CellWriter.version { #expect(writer.bytes == plaintext) }
    }

    @Test(
        "buckets: 32, powers of two to 1 MiB, then multiples of 1 MiB",
        arguments: [
            (0, 32), (1, 32), (32, 32), (33, 64), (64, 64), (65, 128), (1000, 1024), (1 << 20, 1 << 20),
            ((1 << 20) + 1, 2 << 20), ((3 << 20) - 1, 3 << 20),
        ]
    )
    func buckets(length: Int, bucket: Int) { #expect(CellWriter.bucket(for: length) == bucket) }

    @Test(
        "padding is unambiguous: a wrong marker, a non-zero pad byte, a size that is not a bucket or a v3 byte is refused",
        arguments: [
            "02010000000161" + "80" + String(repeating: "00", count: 23) + "01",  // non-zero after the marker
            "02010000000161" + "81" + String(repeating: "00", count: 24),  // no 0x80 marker
            "02010000000161" + "80" + String(repeating: "00", count: 23),  // 31 bytes: not a bucket
            "02" + String(repeating: "00", count: 31),  // no marker at all
            "80" + String(repeating: "00", count: 31),  // the marker where the version belongs
            "03010000000161" + "80" + String(repeating: "00", count: 24),  // unknown version
        ]
    )
    func badPadding(hex: String) {
        #expect(throws: CellReader.Malformed.self) { try CellReader.text(hexBytes(hex)) }
    }

    @Test("sealed lengths no longer give field lengths: subjects of 1 to 25 bytes seal to the same size")
    func sameBucketSameSize() async throws {
        let world = try await StoreWorld()
        let subjects = (1...25).map { String(repeating: "s", count: $0) }
        let outcomes = try await world.store.importMessages(
            subjects.enumerated().map { index, subject in
                rawMessage(id: "\(index)@pad", subject: subject, body: "b")
            }
        )
        #expect(outcomes.compactMap(\.id).count == subjects.count)
        let sizes = try await world.rawQueue().read { db in
            try Int.fetchAll(db, sql: "SELECT DISTINCT length(subject) FROM messages")
        }
        #expect(sizes == [32 + 50])
    }
}
