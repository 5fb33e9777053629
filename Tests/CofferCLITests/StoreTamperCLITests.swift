import CofferTesting
import Foundation
import Testing

/// A database changed outside Coffer (wrong types, extreme values in clear columns) through the real commands.
@Suite(.serialized) struct StoreTamperCLITests {
    /// Four messages as an mbox file.
    static func mbox() -> String {
        (1...4).map { index in
            """
            From sender@example.org Mon Jan  1 00:00:00 2024
            From: Sender \(index) <sender\(index)@example.org>
            To: Alice <alice@example.org>
            Subject: subject number \(index)
            Date: Mon, \(index) Jan 2024 10:00:00 +0000
            Message-ID: <\(index)@tamper.example>

            body \(index) sharedword

            """
        }.joined(separator: "\n")
    }

    /// Runs `sqlite3 FILE SQL` (the attacker's tool).
    static func sqlite(_ database: String, _ sql: String) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["sqlite3", database, sql]
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// The account's database file, wherever the per-account layout puts it.
    static func database(under home: String) throws -> String {
        let enumerator = FileManager.default.enumerator(atPath: home)
        while let path = enumerator?.nextObject() as? String {
            if path.hasSuffix("/mail.sqlite") || path == "mail.sqlite" { return "\(home)/\(path)" }
        }
        throw CocoaError(.fileNoSuchFile)
    }

    @Test func listSearchAndShowSurviveWrongTypesAndExtremeValues() async throws {
        let cli = CLIRunner()
        #expect(try await cli.run(["init", "--account", "alice"]).status == 0)
        let source = "\(cli.home.path)/tamper.mbox"
        try Data(Self.mbox().utf8).write(to: URL(fileURLWithPath: source))
        let imported = try await cli.run(["import", source])
        #expect(imported.status == 0, "\(imported.stderr)")
        let database = try Self.database(under: cli.home.path)
        let sql = """
            UPDATE messages SET time = 9223372036854775807 WHERE id = 1;
            UPDATE messages SET time = 'yesterday' WHERE id = 2;
            UPDATE messages SET subject = 42 WHERE id = 3;
            UPDATE messages SET conversationID = x'00ff' WHERE id = 4;
            """
        #expect(try Self.sqlite(database, sql) == 0)

        let list = try await cli.run(["list"])
        #expect(list.status == 0, "\(list.stderr)")
        let lines = list.stdout.split(separator: "\n")
        #expect(lines.count == 4)
        // Message 1 holds a valid (if absurd) time: it shows, with a date that cannot be printed.
        #expect(lines.contains { $0.hasPrefix("1\t????-??-?? ??:??") && $0.contains("subject number 1") })
        for id in [2, 4] {
            #expect(lines.contains { $0.hasPrefix("\(id)\t") && $0.hasSuffix("(damaged message)") })
        }
        // The list reads only the cells it shows: message 3's summary cell is intact, so it is listed from it; the
        // damaged subject cell is found when the message is opened (below).
        #expect(lines.contains { $0.hasPrefix("3\t") && $0.contains("subject number 3") })

        let search = try await cli.run(["search", "sharedword"])
        #expect(search.status == 0, "\(search.stderr)")
        #expect(search.stdout.split(separator: "\n").count == 4)

        let shown = try await cli.run(["show", "1"])
        #expect(shown.status == 0, "\(shown.stderr)")
        #expect(shown.stdout.contains("Subject: subject number 1"))
        for id in ["2", "3", "4"] {
            let damaged = try await cli.run(["show", id])
            #expect(damaged.status == 1)
            #expect(damaged.stderr.contains("Message \(id) is damaged"))
        }
    }
}
