import GRDB

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A row whose columns do not hold what the schema says (a number where a sealed cell belongs, text or NULL in an
/// integer column): the database file was changed outside Coffer. Carries where, never a value.
struct DamagedRow: Error, Sendable, Equatable {
    /// The table of the row.
    var table: String
    /// The row's id (0 when even the id could not be read).
    var id: Int64
}

/// Strict, throwing decoding of one fetched row: every column must have exactly the storage class the schema gives
/// it. GRDB's subscripts trap on a NULL or an impossible conversion, and its fast paths let SQLite convert text to
/// numbers silently; a tampered file must do neither, so the store reads every row through this.
struct StrictRow {
    private let values: [String: DatabaseValue]
    /// The table, for errors.
    let table: String
    /// The row id.
    let id: Int64

    /// Reads the row id from `idColumn` (an `INTEGER PRIMARY KEY`, so SQLite keeps it an integer; checked anyway).
    init(_ row: Row, table: String, idColumn: String = "id") throws(DamagedRow) {
        var values: [String: DatabaseValue] = [:]
        for (name, value) in row where values[name] == nil { values[name] = value }
        self.values = values
        self.table = table
        guard case .int64(let id) = values[idColumn]?.storage else { throw DamagedRow(table: table, id: 0) }
        self.id = id
    }

    /// An integer column.
    func int64(_ column: String) throws(DamagedRow) -> Int64 {
        guard case .int64(let number) = values[column]?.storage else { throw DamagedRow(table: table, id: id) }
        return number
    }

    /// A text column.
    func text(_ column: String) throws(DamagedRow) -> String {
        guard case .string(let text) = values[column]?.storage else { throw DamagedRow(table: table, id: id) }
        return text
    }

    /// A BLOB column (a sealed cell or a keyed hash).
    func blob(_ column: String) throws(DamagedRow) -> Data {
        guard case .blob(let data) = values[column]?.storage else { throw DamagedRow(table: table, id: id) }
        return data
    }

    /// A nullable text column.
    func optionalText(_ column: String) throws(DamagedRow) -> String? {
        switch values[column]?.storage {
        case .null: return nil
        case .string(let text): return text
        default: throw DamagedRow(table: table, id: id)
        }
    }

    /// A nullable BLOB column.
    func optionalBlob(_ column: String) throws(DamagedRow) -> Data? {
        switch values[column]?.storage {
        case .null: return nil
        case .blob(let data): return data
        default: throw DamagedRow(table: table, id: id)
        }
    }
}
