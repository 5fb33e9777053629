import CofferTesting
import Foundation
import Testing

/// `coffer render` and `coffer show --html`: the sanitized page, its policy, the report, the private file.
@Suite(.serialized) struct RenderCLITests {
    static let htmlBody = """
        <p>Hello <img src="https://tracker.example/p.gif" width="1" height="1">\
        <img src="http://images.example/banner.png" alt="banner"><script>alert(1)</script>\
        <a href="javascript:alert(2)" onclick="alert(3)">link</a></p>
        """

    static let message = [
        "From: Shop <news@shop.example>",
        "To: alice@example.com",
        "Subject: Weekly <deals>",
        "Date: Sat, 21 Nov 2026 10:00:00 +0000",
        "Message-ID: <weekly-1@shop.example>",
        "MIME-Version: 1.0",
        "Content-Type: multipart/related; boundary=\"XX\"",
        "",
        "--XX",
        "Content-Type: text/html; charset=utf-8",
        "",
        "<p>Logo <img src=\"cid:Logo@shop\"> and <img src=\"https://images.example/hero.jpg\"></p>",
        "<img src=\"https://pixel.example/open.gif\" width=\"1\" height=\"1\">",
        "--XX",
        "Content-Type: image/png",
        "Content-ID: <logo@shop>",
        "Content-Transfer-Encoding: base64",
        "",
        "iVBORw0KGgo=",
        "--XX--",
        "",
    ].joined(separator: "\r\n")

    static let policyMeta = "<html><head><meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none';"

    func write(_ text: String, named name: String, in folder: TemporaryDirectory) throws -> String {
        let path = folder.path + "/" + name
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test func anHTMLFileBecomesASafePageWithItsPolicyFirst() async throws {
        let files = TemporaryDirectory(prefix: "coffer-render")
        let input = try write(Self.htmlBody, named: "body.html", in: files)
        let result = try await CLIRunner().run(["render", input, "--output", "-"], withHome: false)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.hasPrefix("<!DOCTYPE html>\n" + Self.policyMeta))
        #expect(result.stdout.contains("img-src data:;"))
        for forbidden in ["<script", "alert", "javascript:", "onclick", "tracker.example", "images.example"] {
            #expect(!result.stdout.contains(forbidden), "\(forbidden) survived")
        }
        #expect(result.stdout.contains("<a>link</a>"))
        #expect(result.stderr == "2 remote resources blocked (1 tracker)\n")
    }

    @Test func anEmlHasItsEmbeddedImagesInlinedAndRemoteOnesBlocked() async throws {
        let files = TemporaryDirectory(prefix: "coffer-render")
        let input = try write(Self.message, named: "weekly.eml", in: files)
        let output = files.path + "/page.html"
        let result = try await CLIRunner().run(["render", input, "--output", output], withHome: false)
        #expect(result.status == 0, "\(result.stderr)")
        let page = try String(contentsOfFile: output, encoding: .utf8)
        #expect(page.hasPrefix("<!DOCTYPE html>\n" + Self.policyMeta))
        #expect(page.contains("<title>Weekly &lt;deals&gt;</title>"))
        #expect(page.contains("<img src=\"data:image/png;base64,iVBORw0KGgo=\">"))
        #expect(!page.contains("images.example") && !page.contains("pixel.example") && !page.contains("cid:"))
        #expect(result.stderr.contains("2 remote resources blocked (1 tracker)\n"))
        #expect(result.stderr.contains("1 embedded image\n"))
        let attributes = try FileManager.default.attributesOfItem(atPath: output)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
    }

    @Test func allowRemoteLoadsContentButStillBlocksTrackers() async throws {
        let files = TemporaryDirectory(prefix: "coffer-render")
        let input = try write(Self.message, named: "weekly.eml", in: files)
        let result = try await CLIRunner().run(["render", input, "--allow-remote", "--output", "-"], withHome: false)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("img-src data: https: http:;"))
        #expect(result.stdout.contains("src=\"https://images.example/hero.jpg\""))
        #expect(!result.stdout.contains("pixel.example"))
        #expect(result.stderr.contains("1 remote resource allowed\n1 tracker blocked\n"))
    }

    @Test func theViewerGetsAPrivateFileThatIsDeletedAfterwards() async throws {
        let files = TemporaryDirectory(prefix: "coffer-render")
        let input = try write(Self.htmlBody, named: "body.html", in: files)
        let record = files.path + "/seen"
        let viewer = "stat -c %a \"$1\" \"$(dirname \"$1\")\" > \(record); echo \"$1\" >> \(record); head -c 200 "
        let result = try await CLIRunner().run(["render", input, "--viewer", viewer], withHome: false)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.hasPrefix("<!DOCTYPE html>\n" + Self.policyMeta))
        #expect(result.stdout.contains("The viewer exited with status 0; the page was deleted."))
        let seen = try String(contentsOfFile: record, encoding: .utf8).split(separator: "\n").map(String.init)
        #expect(seen.count == 3)
        #expect(seen.first == "600")
        #expect(seen.dropFirst().first == "700")
        if let path = seen.last {
            #expect(path.hasSuffix("/message.html"))
            #expect(!FileManager.default.fileExists(atPath: path))
            #expect(!FileManager.default.fileExists(atPath: (path as NSString).deletingLastPathComponent))
        }
    }

    @Test func withoutAViewerThePathIsPrintedAndTheFileDeletedOnEnter() throws {
        let files = TemporaryDirectory(prefix: "coffer-render")
        let input = try write(Self.htmlBody, named: "body.html", in: files)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CLIRunner.binary)
        process.arguments = ["render", input]
        process.environment = ["PATH": files.path + "/no-such-folder", "TMPDIR": files.path]
        let stdin = Pipe()
        let stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = Pipe()
        try process.run()
        stdin.fileHandleForWriting.write(Data("\n".utf8))
        try stdin.fileHandleForWriting.close()
        let out = String(decoding: stdout.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        #expect(out.contains("The file is at \(files.path)/coffer-pages-"))
        #expect(out.contains("press Enter when you are done to delete it."))
        #expect(out.contains("the page was deleted."))
        let pages = try FileManager.default.contentsOfDirectory(atPath: files.path).filter {
            $0.hasPrefix("coffer-pages-")
        }
        #expect(pages.count == 1)
        for folder in pages {
            #expect(try FileManager.default.contentsOfDirectory(atPath: files.path + "/" + folder).isEmpty)
        }
    }

    @Test func showHTMLRendersAStoredMessageWithItsEmbeddedImage() async throws {
        let cli = CLIRunner()
        let files = TemporaryDirectory(prefix: "coffer-render")
        let input = try write(Self.message, named: "weekly.eml", in: files)
        #expect(try await cli.run(["init", "--account", "alice@example.com"]).status == 0)
        let imported = try await cli.run(["import", input])
        #expect(imported.status == 0, "\(imported.stderr)")
        let page = files.path + "/copy.html"
        let viewer = "cp \"$1\" \(page); true"
        let shown = try await cli.run(["show", "1", "--html", "--viewer", viewer])
        #expect(shown.status == 0, "\(shown.stderr)")
        #expect(shown.stderr.contains("2 remote resources blocked (1 tracker)\n"))
        #expect(shown.stdout.contains("the page was deleted"))
        let text = try String(contentsOfFile: page, encoding: .utf8)
        #expect(text.hasPrefix("<!DOCTYPE html>\n" + Self.policyMeta))
        #expect(text.contains("<img src=\"data:image/png;base64,iVBORw0KGgo=\">"))
        #expect(!text.contains("images.example"))

        let remote = try await cli.run([
            "show", "1", "--html", "--allow-remote", "--viewer", viewer + "; rm -f \(page)",
        ])
        #expect(remote.status == 0, "\(remote.stderr)")
        #expect(remote.stderr.contains("1 tracker blocked"))
        let plain = try await cli.run(["show", "1"])
        #expect(plain.stdout.contains("(HTML only; no plain text part)"))
    }

    @Test func aMissingFileIsOneSentence() async throws {
        let result = try await CLIRunner().run(
            ["render", "/nonexistent/message.eml", "--output", "-"],
            withHome: false
        )
        #expect(result.status == 1)
        #expect(result.stderr == "coffer: Cannot read /nonexistent/message.eml.\n")
    }
}
