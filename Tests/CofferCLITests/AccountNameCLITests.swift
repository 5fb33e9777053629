import CofferAgentProtocol
import CofferApp
import CofferTesting
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Hostile account names against every command that takes `--account`, one-shot and through the agent: each is
/// refused with one clear sentence, and nothing in the home (nor outside it) changes, so no other account loses data.
@Suite(.serialized) struct AccountNameCLITests {
    /// Names a process can receive as an argument (an argument cannot hold NUL; the agent test sends that one).
    static let hostile: [String] = [
        ".", "..", "../x", "../../outside", "a/b", "/abs", "-rf", "a\u{1B}[31mb", "a\nb", "tab\tname",
        String(repeating: "n", count: 1000), "", " padded", "padded ", "\u{202E}evil", "zero\u{200B}width", ".hidden",
        "back\\slash", "e\u{0301}",
    ]

    /// Every command that takes `--account`, with what else it needs.
    static let commands: [[String]] = [
        ["init"], ["unlock"], ["lock"], ["status"], ["protect", "pin", "--pin-stdin"], ["autolock", "5m"],
        ["logout", "--yes"], ["import", "/dev/null"], ["list"], ["search", "word"], ["show", "1"],
        ["attachments", "1"],
        ["attachment", "open", "1", "--viewer", "true"], ["attachment", "save", "1", "--to", "/tmp/coffer-never"],
    ]

    /// A home with two accounts that each hold a message, and a folder beside it that must stay untouched.
    static func twoAccounts(_ cli: CLIRunner) async throws -> TemporaryDirectory {
        for account in ["alice", "bob"] {
            #expect(try await cli.run(["init", "--account", account]).status == 0)
            let eml = "\(cli.home.path)/\(account).eml"
            try messageWithAttachment(canary: "C-\(account)").write(toFile: eml, atomically: true, encoding: .utf8)
            let imported = try await cli.run(["import", eml, "--account", account])
            #expect(imported.stdout.contains("Imported 1 messages"), "\(imported.stderr)")
        }
        let outside = TemporaryDirectory(prefix: "coffer-outside")
        try "keep me".write(toFile: "\(outside.path)/keep.txt", atomically: true, encoding: .utf8)
        return outside
    }

    /// Every file and folder below `roots` with its type, mode, size, modification time and content.
    static func snapshot(_ roots: [String]) -> [String: String] {
        var result: [String: String] = [:]
        func walk(_ path: String) {
            var info = stat()
            guard lstat(path, &info) == 0 else { return }
            var entry = "\(info.st_mode) \(info.st_size) \(info.st_mtim.tv_sec).\(info.st_mtim.tv_nsec)"
            if info.st_mode & S_IFMT == S_IFREG, let data = FileManager.default.contents(atPath: path) {
                entry += " \(data.hashValue)"
            }
            result[path] = entry
            guard info.st_mode & S_IFMT == S_IFDIR else { return }
            for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] { walk("\(path)/\(name)") }
        }
        roots.forEach(walk)
        return result
    }

    static func assertBothAccountsIntact(_ cli: CLIRunner) async throws {
        for account in ["alice", "bob"] {
            let list = try await cli.run(["list", "--account", account])
            #expect(list.status == 0, "\(list.stderr)")
            #expect(list.stdout.contains("Quarterly numbers"), "\(account) lost its mail")
        }
    }

    @Test func everyCommandRefusesHostileNamesOneShotAndTouchesNothing() async throws {
        let cli = CLIRunner()
        let outside = try await Self.twoAccounts(cli)
        let before = Self.snapshot([cli.home.path, outside.path])
        for name in Self.hostile {
            for command in Self.commands {
                let arguments = command + ["--home", cli.home.path, "--account=\(name)"]
                let result = try await cli.run(arguments, input: "123456\n123456\n", withHome: false)
                #expect(result.status != 0, "\(command) accepted \(name.debugDescription)")
                // The argument parser itself refuses an empty value.
                let sentence = name.isEmpty ? "Missing value for '--account" : "That account name cannot be used"
                #expect(
                    result.stderr.contains(sentence),
                    "\(command) with \(name.debugDescription): \(result.stderr)"
                )
                if name.count > 3 {  // shorter ones, such as "..", occur in the usage text
                    #expect(!result.stderr.contains(name), "the refusal must not echo the name")
                }
            }
        }
        #expect(Self.snapshot([cli.home.path, outside.path]) == before, "a refused command changed a file")
        try await Self.assertBothAccountsIntact(cli)
    }

    @Test func theAgentRefusesHostileNamesFromAnyClient() async throws {
        let (cli, runtime) = AgentProcess.runner()
        let outside = try await Self.twoAccounts(cli)
        let agent = try await AgentProcess(cli, runtime: runtime)
        #expect(try await cli.run(["unlock", "--account", "alice"]).status == 0)
        #expect(try await cli.run(["unlock", "--account", "bob"]).status == 0)
        // An unlock wakes the outbox, which opens the account's store in the background, and every open writes the
        // store's empty write-ahead log (GRDB): a request that opens both stores first lets that settle.
        try await Self.assertBothAccountsIntact(cli)
        let before = Self.snapshot([cli.home.path, outside.path])
        let operations: [(String) -> AgentRequest] = [
            { .status(account: $0) }, { .account($0) }, { .create(account: $0) },
            { .unlock(account: $0, method: .none) }, { .lock(account: $0) }, { .autolock(account: $0, policy: "5m") },
            { .protect(account: $0, change: .removeAll, proof: .none) }, { .logout(account: $0, proof: .none) },
            { .erase(account: $0, confirmation: $0) }, { .list(account: $0, label: nil, limit: 5, offset: 0) },
            { .search(account: $0, words: "word", limit: 5, offset: 0) }, { .message(account: $0, id: 1) },
            { .attachments(account: $0, message: 1) }, { .attachmentContent(account: $0, id: 1) },
            { .preview(account: $0, source: .attachment(id: 1)) },
            { .save(account: $0, id: 1, path: "/tmp/coffer-never") },
            { .import(account: $0, path: "/tmp/coffer-never", label: "Inbox", batch: 1) },
            { .sync(account: $0, server: nil, folders: [], batch: nil) }, { .serverShow(account: $0) },
            { .serverRemove(account: $0, server: 1) },
        ]
        let client = try #require(try AgentClient.connect(socketPath: agent.socketPath))
        defer { client.close() }
        for name in Self.hostile + ["a\u{0}b", "\u{0}"] {
            for operation in operations {
                let request = operation(name)
                let outcome = await Self.refusal(client, request)
                #expect(outcome == .badRequest, "\(request.operation) for \(name.debugDescription)")
            }
        }
        #expect(Self.snapshot([cli.home.path, outside.path]) == before, "a refused request changed a file")
        try await Self.assertBothAccountsIntact(cli)
        #expect(agent.stop() == 0)
    }

    /// The code the agent answers `request` with (`nil` when it was served).
    static func refusal(_ client: AgentClient, _ request: AgentRequest) async -> AgentFailure.Code? {
        do {
            _ = try await client.call(request)
            return nil
        } catch {
            guard case AppError.remote(let code, let message) = error else { return .failed }
            return message.contains("That account name cannot be used") ? code : .failed
        }
    }

    @Test func aFolderNamedAfterTheRawNameIsMovedToTheHashedOne() async throws {
        let cli = CLIRunner()
        #expect(try await cli.run(["init", "--account", "alice"]).status == 0)
        let eml = "\(cli.home.path)/one.eml"
        try messageWithAttachment(canary: "C-1").write(toFile: eml, atomically: true, encoding: .utf8)
        #expect(try await cli.run(["import", eml]).status == 0)
        let paths = AppPaths(data: "\(cli.home.path)/data", keychain: "", state: "")
        // Put the home back in the layout of the first version: the folder named after the account.
        let legacy = "\(cli.home.path)/data/mail/alice"
        #expect(rename(paths.mail("alice"), legacy) == 0)
        let list = try await cli.run(["list"])
        #expect(list.stdout.contains("Quarterly numbers"), "\(list.stderr)")
        #expect(!FileManager.default.fileExists(atPath: legacy))
        #expect(FileManager.default.fileExists(atPath: paths.store("alice")))
        #expect(paths.mail("alice").hasSuffix("/data/mail/\(AccountName.folderName("alice"))"))
    }
}
