import CofferTesting
import Foundation
import Testing

/// `coffer attachment open`, one-shot and through the agent: the viewer's failure is the command's failure.
@Suite(.serialized) struct AttachmentOpenCLITests {
    /// Files (not folders) left under `path`.
    static func files(under path: String) -> [String] {
        var found: [String] = []
        let enumerator = FileManager.default.enumerator(atPath: path)
        while let item = enumerator?.nextObject() as? String {
            var isFolder: ObjCBool = false
            if FileManager.default.fileExists(atPath: "\(path)/\(item)", isDirectory: &isFolder), !isFolder.boolValue {
                found.append(item)
            }
        }
        return found
    }

    @Test(arguments: [("false", Int32(1)), ("exit 3 #", 1), ("test -f", 0), ("true", 0)])
    func aFailingViewerExitsNonZeroAndTheCopyIsDeleted(viewer: String, expected: Int32) async throws {
        var cli = CLIRunner()
        let runtime = TemporaryDirectory(prefix: "coffer-runtime")
        cli.extraEnvironment["XDG_RUNTIME_DIR"] = runtime.path
        #expect(try await cli.run(["init", "--account", "alice"]).status == 0)
        let source = "\(cli.home.path)/one.eml"
        try Data(messageWithAttachment(canary: "ViewerCanary").utf8).write(to: URL(fileURLWithPath: source))
        #expect(try await cli.run(["import", source]).status == 0)

        let opened = try await cli.run(
            ["attachment", "open", "1", "--home", cli.home.path, "--viewer", viewer],
            withHome: false
        )
        #expect(opened.status == expected, "\(opened.stderr)")
        if expected == 0 {
            #expect(opened.stdout.contains("the decrypted copy was deleted"))
        } else {
            #expect(opened.stderr.contains("The viewer failed (exit status"))
            #expect(opened.stderr.contains("the decrypted copy was deleted"))
        }
        #expect(Self.files(under: runtime.path).isEmpty)
    }

    @Test(arguments: [("false", Int32(1)), ("true", 0)])
    func throughTheAgentAFailingViewerAlsoExitsNonZero(viewer: String, expected: Int32) async throws {
        let (cli, runtime) = AgentProcess.runner()
        #expect(try await cli.run(["init", "--account", "alice"]).status == 0)
        let agent = try await AgentProcess(cli, runtime: runtime)
        defer { _ = agent.stop() }
        #expect(try await cli.run(["unlock"]).status == 0)
        let source = "\(cli.home.path)/one.eml"
        try Data(messageWithAttachment(canary: "AgentViewerCanary").utf8).write(to: URL(fileURLWithPath: source))
        #expect(try await cli.run(["import", source]).status == 0)

        let opened = try await cli.run(
            ["attachment", "open", "1", "--home", cli.home.path, "--viewer", viewer],
            withHome: false
        )
        #expect(opened.status == expected, "\(opened.stderr)")
        if expected != 0 { #expect(opened.stderr.contains("The viewer failed (exit status 1)")) }
        let leftovers = Self.files(under: runtime.path).filter { $0.contains("preview") }
        #expect(leftovers.isEmpty, "\(leftovers)")
    }

    @Test func aDamagedCacheFileIsRefilledFromTheStore() async throws {
        let cli = CLIRunner()
        #expect(try await cli.run(["init", "--account", "alice"]).status == 0)
        let source = "\(cli.home.path)/one.eml"
        try Data(messageWithAttachment(canary: "RefillCanary").utf8).write(to: URL(fileURLWithPath: source))
        #expect(try await cli.run(["import", source]).status == 0)
        let outside = TemporaryDirectory(prefix: "coffer-refill")
        func save(_ name: String) async throws -> CLIRunner.Result {
            try await cli.run(
                ["attachment", "save", "1", "--home", cli.home.path, "--to", "\(outside.path)/\(name)"],
                withHome: false
            )
        }
        #expect(try await save("first").status == 0)
        let entries = Self.files(under: cli.home.path).filter { $0.hasSuffix(".cfa") }
        #expect(entries.count == 1)
        for entry in entries {
            let path = "\(cli.home.path)/\(entry)"
            var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
            bytes[bytes.count - 3] ^= 0x01
            try Data(bytes).write(to: URL(fileURLWithPath: path))
        }
        let second = try await save("second")
        #expect(second.status == 0, "\(second.stderr)")
        let saved = try String(contentsOfFile: "\(outside.path)/second", encoding: .utf8)
        #expect(saved == "attachment body RefillCanary\n")
    }
}
