import GRDB

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The account's privacy settings, sealed in the store.
///
/// A setting that is missing, fails to open (changed, moved from another setting, damaged) or fails to decode
/// reads as its most private value, and (except when missing) is reported on ``MailStore/events`` and rewritten
/// sealed with that value: a setting never silently becomes less private.
public struct StoreSettings: Sendable, Hashable {
    /// Load remote images in HTML mail. Most private: `false`.
    public var remoteImages: Bool
    /// Strip metadata (EXIF, document properties) from outgoing attachments. Most private: `true`.
    public var stripMetadata: Bool

    /// The most private values, which are also the defaults.
    public static let mostPrivate = StoreSettings(remoteImages: false, stripMetadata: true)

    /// Creates settings.
    public init(remoteImages: Bool, stripMetadata: Bool) {
        self.remoteImages = remoteImages
        self.stripMetadata = stripMetadata
    }

    /// The stored names, each with its most private value.
    static let names: [(name: String, mostPrivate: Bool)] = [("remoteImages", false), ("stripMetadata", true)]

    func value(_ name: String) -> Bool { name == "remoteImages" ? remoteImages : stripMetadata }

    mutating func set(_ name: String, _ value: Bool) {
        if name == "remoteImages" { remoteImages = value } else { stripMetadata = value }
    }
}

extension MailStore {
    /// The current settings; see ``StoreSettings`` for how damaged values are handled.
    public func settings() async throws(StoreError) -> StoreSettings {
        let keys = try await keys()
        // Read column by column: a value of the wrong type (a number, text, NULL) counts as a value that failed
        // to open, instead of trapping in row decoding.
        let rows: [(name: String, value: Data?)] = try await read { db in
            try Row.fetchAll(db, sql: "SELECT name, value FROM settings").compactMap { row in
                var name: String?
                var value: Data?
                for (column, stored) in row {
                    switch (column, stored.storage) {
                    case ("name", .string(let text)): name = text
                    case ("value", .blob(let data)): value = data
                    default: break
                    }
                }
                return name.map { ($0, value) }
            }
        }
        var settings = StoreSettings.mostPrivate
        var reverted: [String] = []
        for (name, mostPrivate) in StoreSettings.names {
            guard let row = rows.first(where: { $0.name == name }) else { continue }
            if let value = Self.flag(keys.open(row.value, .settingValue, row: 0, extra: name)) {
                settings.set(name, value)
            } else {
                settings.set(name, mostPrivate)
                reverted.append(name)
            }
        }
        if !reverted.isEmpty {
            let repaired = settings
            let names = reverted
            try await write { db in
                for name in names { try Self.writeSetting(name, repaired.value(name), keys: keys, db: db) }
            }
            for name in reverted { eventSink.yield(.settingReverted(name)) }
        }
        return settings
    }

    /// Stores new settings (each sealed on its own, bound to its name).
    public func updateSettings(_ settings: StoreSettings) async throws(StoreError) {
        let keys = try await keys()
        try await write { db in
            for (name, _) in StoreSettings.names {
                try Self.writeSetting(name, settings.value(name), keys: keys, db: db)
            }
        }
    }

    static func flag(_ plain: [UInt8]?) -> Bool? {
        guard let plain else { return nil }
        do {
            var reader = try CellReader(plain)
            let value = try reader.flag()
            try reader.finish()
            return value
        } catch {
            return nil
        }
    }

    static func writeSetting(_ name: String, _ value: Bool, keys: StoreKeys, db: Database) throws {
        var writer = CellWriter(capacity: 2)
        writer.flag(value)
        try SettingRecord(name: name, value: try keys.seal(writer.bytes, .settingValue, row: 0, extra: name)).save(db)
    }
}
