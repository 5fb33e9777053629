import CofferCrypto
import CofferKeychain
import CofferKeymaker
import CofferSampleMail
import CofferTesting
import Foundation
import GRDB
import Testing

@testable import CofferStore

#if canImport(Glibc)
import Glibc
#endif

/// What the parent test hands the child process.
enum CrashEnvironment {
    static let child = "COFFER_STORE_CRASH_CHILD"
    static let key = "COFFER_STORE_CRASH_KEY"
    static let store = "COFFER_STORE_CRASH_STORE"
    static let source = "COFFER_STORE_CRASH_SOURCE"
    static let batch = 50

    static var isChild: Bool { ProcessInfo.processInfo.environment[child] == "1" }

    /// A Keymaker holding the given MainKey (the child and the parent use the same key).
    static func keymaker(key: [UInt8]) async throws -> Keymaker {
        try await Fixtures.unlockedKeymaker(account: "crash", mainKey: key)
    }
}

/// The child side: only runs inside the process that the crash test starts (and kills).
@Suite("Store crash child")
struct StoreCrashChild {
    @Test(
        "import the source given by the parent",
        .enabled(if: CrashEnvironment.isChild, "runs only inside the child process that the SIGKILL crash test starts")
    )
    func importForParent() async throws {
        let environment = ProcessInfo.processInfo.environment
        let key = try #require(environment[CrashEnvironment.key].flatMap { [UInt8](hexString: $0) })
        let store = try MailStore(
            folder: try #require(environment[CrashEnvironment.store]),
            keys: try await CrashEnvironment.keymaker(key: key)
        )
        _ = try await store.importSource(
            at: try #require(environment[CrashEnvironment.source]),
            batchSize: CrashEnvironment.batch
        )
        try store.close()
    }
}

@Suite("Store crash safety")
struct StoreCrashTests {
    static let total = 800

    /// Runs the child import; kills it with SIGKILL after `killAfter` milliseconds unless it finished first.
    func runChild(environment: [String: String], killAfter: Int?) throws -> (status: Int32, killed: Bool) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        process.arguments = ["--testing-library", "swift-testing", "--filter", "StoreCrashChild"]
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        if let killAfter {
            usleep(useconds_t(killAfter * 1000))
            kill(process.processIdentifier, SIGKILL)
        }
        process.waitUntilExit()
        return (process.terminationStatus, process.terminationReason == .uncaughtSignal)
    }

    /// Opens the store and checks that every committed message is whole.
    func check(folder: String, keymaker: Keymaker) async throws -> Int {
        let store = try MailStore(folder: folder, keys: keymaker)
        let count = try await store.count()
        #expect(count % CrashEnvironment.batch == 0 || count == Self.total, "only whole batches are committed")
        let problems = try await store.database.read { db in
            try Int.fetchOne(
                db,
                sql: """
                    SELECT
                      (SELECT count(*) FROM messages m WHERE NOT EXISTS
                          (SELECT 1 FROM messageLabels l WHERE l.messageID = m.id))
                    + (SELECT count(*) FROM messages m WHERE NOT EXISTS
                          (SELECT 1 FROM searchIndex t WHERE t.rowid = m.id))
                    + (SELECT count(*) FROM messages m WHERE (m.flags & 16) != 0 AND NOT EXISTS
                          (SELECT 1 FROM attachments a WHERE a.messageID = m.id))
                    """
            )
        }
        #expect(problems == 0)
        let integrity = try await store.database.read { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") }
        #expect(integrity == "ok")
        // The blind index's own check (FTS5 segments against its rows); it throws SQLITE_CORRUPT_VTAB if they differ.
        try await store.database.write { db in
            try db.execute(sql: "INSERT INTO searchIndex (searchIndex) VALUES ('integrity-check')")
        }
        if count > 0 {
            let page = try await store.list(limit: 50)
            #expect(page.allSatisfy { !$0.isCorrupt })
            for summary in page.prefix(10) {
                let detail = try await store.message(summary.id)
                #expect(detail.textBody?.isEmpty == false)
            }
        }
        try store.close()
        return count
    }

    @Test("an import killed with SIGKILL at random points never leaves a half-written message and completes on rerun")
    func killedImports() async throws {
        let root = TemporaryDirectory(prefix: "coffer-store-crash")
        let source = TemporaryDirectory(prefix: "coffer-store-crash-source")
        let mbox = "\(source.path)/mail.mbox"
        try SecureFile.writeAtomically(SyntheticMail(seed: 5).mbox(count: Self.total), to: mbox)
        let key = (0..<32).map { _ in UInt8.random(in: 0...255) }
        let folder = "\(root.path)/store"
        let environment = [
            CrashEnvironment.child: "1",
            CrashEnvironment.key: key.hexString,
            CrashEnvironment.store: folder,
            CrashEnvironment.source: mbox,
        ]
        let keymaker = try await CrashEnvironment.keymaker(key: key)
        var counts: [Int] = []
        var killed = 0
        for _ in 0..<20 {
            if try runChild(environment: environment, killAfter: Int.random(in: 150...1500)).killed { killed += 1 }
            counts.append(try await check(folder: folder, keymaker: keymaker))
        }
        #expect(killed > 0, "the child must have been killed mid-run at least once")
        #expect(zip(counts, counts.dropFirst()).allSatisfy { $0 <= $1 }, "committed batches are never lost")
        #expect(try runChild(environment: environment, killAfter: nil).status == 0)
        #expect(try await check(folder: folder, keymaker: keymaker) == Self.total)
        let store = try MailStore(folder: folder, keys: keymaker)
        let again = try await store.importSource(at: mbox)
        #expect(again.duplicates == Self.total && again.imported == 0)
        try store.close()
    }
}
