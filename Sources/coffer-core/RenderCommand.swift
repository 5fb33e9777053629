import ArgumentParser
import CofferApp
import CofferAttachments
import CofferBlocking
import CofferCommandLine
import CofferContent
import CofferCrypto
import CofferMIME
import CofferReading
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Shows sanitized pages: `coffer render` writes its page here (`coffer show --html` asks the agent's dispatcher).
extension MessagePage {
    static func printReport(_ sanitized: SanitizedMessage, allowRemote: Bool) {
        for line in report(sanitized, allowRemote: allowRemote) { printStandardError(line) }
    }

    /// Writes the page to a fresh private folder (0700, random name) as a 0600 file, shows it, and deletes both.
    ///
    /// The viewer rules are those of attachment preview: `--viewer CMD` runs `CMD "<file>"` through `/bin/sh` and
    /// the page is deleted when it exits; otherwise `xdg-open` when it is on the path (it hands the file to a browser
    /// and returns at once, so coffer waits for Enter before deleting); otherwise coffer prints the path and waits
    /// for Enter.
    static func show(_ page: String, viewer: String?, under parent: String) async throws {
        try SecureFile.makePrivateDirectory(parent)
        CleartextCleanup.protect(parent: parent)
        let folder = try SecureFile.makeProcessFolder(under: parent)
        defer { SecureFile.removeTree(folder) }
        let file = "\(folder)/message.html"
        try SecureFile.writeNew(Array(page.utf8), to: file)
        let status = try await run(["/bin/sh", "-c", Viewer.script(viewer), "coffer-viewer", file])
        Viewer.waitIfNeeded(viewer, file: file)
        print("The viewer exited with status \(status); the page was deleted.")
    }

    /// Where pages are written: `$XDG_RUNTIME_DIR/coffer-previews` (memory on most systems), else `$TMPDIR` or
    /// `/tmp` under a per-user folder.
    static var defaultParent: String {
        let environment = ProcessInfo.processInfo.environment
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty { return "\(runtime)/coffer-previews" }
        let temporary = environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        return "\(temporary)/coffer-pages-\(getuid())"
    }

    static func printStandardError(_ line: String) {
        var text = line + "\n"
        text.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    }

    static func findOnPath(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        for folder in path.split(separator: ":") where !folder.isEmpty {
            let candidate = "\(folder)/\(name)"
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }

    private static func run(_ arguments: [String]) async throws -> Int32 {
        do {
            return try await ChildProcess.run(arguments[0], arguments: Array(arguments.dropFirst()))
        } catch {
            throw CLIError("Cannot run the viewer \(arguments[0]).")
        }
    }

}

struct RenderCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "render",
        abstract: "Sanitize an .eml or .html file from disk and show it as a safe page, without the store.",
        discussion: """
            The page carries its Content Security Policy as its first <meta>; remote content is blocked (and counted \
            on standard error) unless --allow-remote, which still blocks tracking pixels. Embedded cid: images of an \
            .eml are inlined as data: URLs. Files ending in .html or .htm are read as HTML, others as a message.
            """
    )

    @Argument(help: "The .eml or .html file.") var file: String
    @Flag(name: .long, help: "Load remote images, fonts and media (tracking pixels stay blocked).")
    var allowRemote = false
    @Option(name: .long, help: "The viewer command (run through /bin/sh with the file as its argument).")
    var viewer: String?
    @Option(name: .long, help: "Write the page here (mode 0600, or - for standard output) instead of showing it.")
    var output: String?

    func run() async throws {
        try await runReportingErrors {
            guard let bytes = FileManager.default.contents(atPath: file).map(Array.init) else {
                throw CLIError("Cannot read \(file).")
            }
            let lower = file.lowercased()
            let rendered: MessagePage.Rendered
            if lower.hasSuffix(".html") || lower.hasSuffix(".htm") {
                rendered = MessagePage.render(
                    html: bytes,
                    text: nil,
                    title: (file as NSString).lastPathComponent,
                    allowRemote: allowRemote,
                    resolver: nil
                )
            } else {
                let message = try MIMEParser.parse(bytes)
                let parts = message.root.allParts.compactMap { part in
                    part.contentID.map { (contentID: $0, mediaType: part.contentType.mimeType, data: part.body) }
                }
                rendered = MessagePage.render(
                    html: message.htmlBody.map { Array($0.utf8) },
                    text: message.textBody,
                    title: message.subject ?? "",
                    allowRemote: allowRemote,
                    resolver: MessagePage.resolver(parts)
                )
            }
            MessagePage.printReport(rendered.sanitized, allowRemote: allowRemote)
            if let output {
                if output == "-" {
                    FileHandle.standardOutput.write(Data(rendered.page.utf8))
                } else {
                    try SecureFile.writeNew(Array(rendered.page.utf8), to: output)
                }
            } else {
                try await MessagePage.show(rendered.page, viewer: viewer, under: MessagePage.defaultParent)
            }
        }
    }
}

/// The viewer rules shared by attachment preview and HTML pages. The viewer is a `/bin/sh -c` script that gets the
/// file as `$1`: with `--viewer CMD` it runs `CMD "$1"` and the file is deleted when that returns. Without, `xdg-open`
/// when it is on the path: it hands the file to a desktop program and returns at once, so coffer then waits for
/// Enter before the file is deleted; without `xdg-open`, coffer prints the path and waits for Enter.
///
/// Coffer itself reads the Enter, not the script: the viewer runs in its own process group, which may not read the
/// terminal (a background read fails at once, and the file would be deleted before anyone saw it).
enum Viewer {
    static func script(_ viewer: String?) -> String {
        if let viewer { return "\(viewer) \"$1\"" }
        if MessagePage.findOnPath("xdg-open") != nil { return "xdg-open \"$1\"" }
        return ":"
    }

    /// After the viewer returned: waits for Enter when no `--viewer` was given (end of input counts as Enter, but a
    /// hung-up terminal ends the command as its SIGHUP does, whichever of the two reached this process first).
    static func waitIfNeeded(_ viewer: String?, file: String) {
        guard viewer == nil else { return }
        if MessagePage.findOnPath("xdg-open") != nil {
            Terminal.writeString("Opened with xdg-open; press Enter when you are done to delete it. ", to: 1)
        } else {
            Terminal.writeString("The file is at \(file); press Enter when you are done to delete it. ", to: 1)
        }
        if Terminal.readLine(fd: 0) == nil, Terminal.isHungUp(fd: 0) {
            // CleartextCleanup's handler deletes the preview and ends the process by the signal.
            raise(SIGHUP)
            while true { pause() }
        }
    }
}
