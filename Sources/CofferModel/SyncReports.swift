#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What one sync did.
public struct SyncSummary: Sendable, Equatable, Codable {
    /// Folders synced.
    public var folders = 0
    /// Messages fetched and stored (or located, when already stored).
    public var fetched = 0
    /// Messages deleted here because the server expunged them (or a folder was reset).
    public var deleted = 0
    /// Messages whose flags changed here from the server's.
    public var flagsPulled = 0
    /// Messages whose local flag changes were sent to the server.
    public var flagsPushed = 0
    /// Folders whose UIDVALIDITY changed, so they were forgotten and fetched again.
    public var resynced = 0
    /// Folders followed before that the server no longer lists (deleted, renamed or unsubscribed): their sync
    /// state was dropped, and the messages that were only there were deleted (counted in ``deleted``).
    public var forgotten = 0
    /// Messages among ``fetched`` that Coffer could not parse: each stored as a damaged message (its bytes kept
    /// sealed, listed as "(damaged message)" with why), never skipped.
    public var damaged = 0
    /// Folders that could not be synced, each with why; every other folder was synced.
    public var failures: [SyncFolderFailure] = []

    /// Empty counters.
    public init() {}

    private enum CodingKeys: String, CodingKey {
        case folders, fetched, deleted, flagsPulled, flagsPushed, resynced, forgotten, damaged, failures
    }

    /// Decodes a summary; counters added after the first version read as zero when absent.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        folders = try container.decode(Int.self, forKey: .folders)
        fetched = try container.decode(Int.self, forKey: .fetched)
        deleted = try container.decode(Int.self, forKey: .deleted)
        flagsPulled = try container.decode(Int.self, forKey: .flagsPulled)
        flagsPushed = try container.decode(Int.self, forKey: .flagsPushed)
        resynced = try container.decode(Int.self, forKey: .resynced)
        forgotten = try container.decodeIfPresent(Int.self, forKey: .forgotten) ?? 0
        damaged = try container.decodeIfPresent(Int.self, forKey: .damaged) ?? 0
        failures = try container.decodeIfPresent([SyncFolderFailure].self, forKey: .failures) ?? []
    }
}

/// A folder a sync could not bring up to date, and why (the error's sentence, which carries no message text).
///
/// A sync that brought at least one folder up to date returns its summary with the others' failures; one that
/// brought none throws the first folder's error.
public struct SyncFolderFailure: Sendable, Equatable, Codable {
    /// The folder's name.
    public var folder: String
    /// Why, as a sentence for people.
    public var reason: String

    /// Creates one.
    public init(folder: String, reason: String) {
        self.folder = folder
        self.reason = reason
    }
}

/// Where a sync is: folder, and messages fetched of those to fetch in it.
public struct SyncProgress: Sendable, Equatable, Codable {
    /// The folder being synced.
    public var folder: String
    /// Messages fetched so far in it.
    public var done: Int
    /// Messages to fetch in it.
    public var total: Int

    /// Creates one.
    package init(folder: String, done: Int, total: Int) {
        self.folder = folder
        self.done = done
        self.total = total
    }
}
