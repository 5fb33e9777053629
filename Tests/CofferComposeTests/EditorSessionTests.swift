import CofferAttachments
import Foundation
import Testing

@testable import CofferCompose

#if canImport(Glibc)
import Glibc
#endif

/// A folder of the test's own, deleted at the end.
final class ScratchFolder: Sendable {
    let path: String

    init() {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("coffer-compose-\(UUID().uuidString)").path
        try? FileManager.default.createDirectory(
            atPath: path,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// Writes an executable shell script and returns its path.
    func script(_ name: String, _ body: String) throws -> String {
        let file = "\(path)/\(name)"
        try ("#!/bin/sh\n" + body).write(toFile: file, atomically: true, encoding: .utf8)
        chmod(file, 0o700)
        return file
    }

    /// Everything below `folder`, recursively (names relative to it).
    static func contents(_ folder: String) -> [String] {
        (FileManager.default.enumerator(atPath: folder)?.allObjects as? [String]) ?? []
    }
}

/// The editor's file lives in a private folder of its own that is gone after the session, however it ends.
@Suite(.serialized) struct EditorSessionTests {
    /// An editor that records its folder's listing, edits the file, and leaves backup and swap files beside it.
    static let editingScript = """
        file="$1"
        dir=$(dirname "$file")
        cp "$file" "$file~"
        printf 'swap' > "$dir/.$(basename "$file").swp"
        printf 'undo' > "$dir/.$(basename "$file").un~"
        printf '%s' "$dir" > "$OUT/folder"
        stat -c '%a %U' "$dir" > "$OUT/mode"
        ps -o pgid= -p $$ | tr -d ' ' > "$OUT/group"
        sed -i 's/hello/goodbye/' "$file"
        ls -a "$dir" > "$OUT/listing"

        """

    @Test func anEditorScriptEditsTheFileAndEverythingItLeftIsDeleted() async throws {
        let scratch = ScratchFolder()
        let parent = "\(scratch.path)/compose"
        let out = "\(scratch.path)/out"
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        let editor = try scratch.script("editor.sh", "OUT=\(out)\n" + Self.editingScript)
        let session = try EditorSession(parent: parent, environment: ["EDITOR": editor, "PATH": "/usr/bin:/bin"])
        let outcome = try await session.edit("To: bob@example.org\n\nhello world\n")
        #expect(outcome.text == "To: bob@example.org\n\ngoodbye world\n")
        #expect(outcome.changed && !outcome.isAbandoned)

        let folder = try String(contentsOfFile: "\(out)/folder", encoding: .utf8)
        #expect(folder.hasPrefix("\(parent)/\(getpid())-"))
        #expect(try String(contentsOfFile: "\(out)/mode", encoding: .utf8).hasPrefix("700 "))
        // The editor is in this process's group, the terminal's foreground group when run from a shell, so it can
        // read the terminal (a child in a group of its own would be stopped by SIGTTIN).
        let group = try String(contentsOfFile: "\(out)/group", encoding: .utf8).trimmingCharacters(
            in: .whitespacesAndNewlines
        )
        #expect(group == String(getpgrp()))
        let listing = try String(contentsOfFile: "\(out)/listing", encoding: .utf8).split(separator: "\n")
        #expect(Set(listing) == [".", "..", "message.txt", "message.txt~", ".message.txt.swp", ".message.txt.un~"])
        #expect(!FileManager.default.fileExists(atPath: folder), "the session folder survived")
        #expect(ScratchFolder.contents(parent).isEmpty, "\(ScratchFolder.contents(parent))")
    }

    @Test func anUnchangedOrEmptiedFileIsAnAbandonedMessage() async throws {
        let scratch = ScratchFolder()
        let parent = "\(scratch.path)/compose"
        let unchanged = try EditorSession(parent: parent, environment: ["EDITOR": "/bin/true"])
        let kept = try await unchanged.edit("To: b@example.org\n\nhello\n")
        #expect(!kept.changed && kept.isAbandoned && kept.text == "To: b@example.org\n\nhello\n")

        let emptier = try scratch.script("empty.sh", ": > \"$1\"\n")
        let emptied = try await EditorSession(parent: parent, environment: ["VISUAL": emptier]).edit("x\n")
        #expect(emptied.changed && emptied.isAbandoned && emptied.text.isEmpty)

        let commenter = try scratch.script("comment.sh", "printf '# only\\n\\n  \\n' > \"$1\"\n")
        #expect(try await EditorSession(parent: parent, environment: ["EDITOR": commenter]).edit("x\n").isAbandoned)

        let deleter = try scratch.script("delete.sh", "rm \"$1\"\n")
        let deleted = try await EditorSession(parent: parent, environment: ["EDITOR": deleter]).edit("x\n")
        #expect(deleted.isAbandoned && deleted.text.isEmpty)
        #expect(ScratchFolder.contents(parent).isEmpty)
    }

    @Test func anEditorThatFailsLeavesNothingAndGivesNoText() async throws {
        let scratch = ScratchFolder()
        let parent = "\(scratch.path)/compose"
        let failing = try scratch.script("fail.sh", "echo changed > \"$1\"; cp \"$1\" \"$1~\"; exit 3\n")
        await #expect(throws: CompositionError.editorFailed(status: 3)) {
            try await EditorSession(parent: parent, environment: ["EDITOR": failing]).edit("x\n")
        }
        #expect(ScratchFolder.contents(parent).isEmpty)
        let huge = try scratch.script("huge.sh", "head -c \(ComposeTemplate.maxLength + 10) /dev/zero > \"$1\"\n")
        await #expect(throws: CompositionError.tooLong(limit: ComposeTemplate.maxLength)) {
            try await EditorSession(parent: parent, environment: ["EDITOR": huge]).edit("x\n")
        }
        #expect(ScratchFolder.contents(parent).isEmpty)
    }

    @Test func vimEditsTheFileAndItsBackupSwapAndUndoFilesGoWithTheFolder() async throws {
        let candidates = ["/usr/bin/vim", "/bin/vim", "/usr/local/bin/vim"]
        guard let vim = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            print("EditorSessionTests: vim is not installed; the vim case is skipped (the $EDITOR script cases ran).")
            return
        }
        let scratch = ScratchFolder()
        let parent = "\(scratch.path)/compose"
        let listing = "\(scratch.path)/listing"
        // Swap on (no -n) in the first, backup and undo files on: each lands in the session folder ('.' first in
        // vim's default directory, backupdir and undodir). -es runs the commands without a screen. backupskip is
        // emptied because its default skips /tmp/*, where the test's folder is.
        for flags in ["-es", "-n -es"] {
            let command =
                "\(vim) \(flags) -u NONE -i NONE -c 'set backup backupskip= undofile' -c '%s/hello/goodbye/' -c w "
                + "-c 's/goodbye/farewell/' -c w -c '!ls -a %:p:h > \(listing)' -c q"
            let session = try EditorSession(parent: parent, environment: ["VISUAL": command])
            let outcome = try await session.edit("To: b@example.org\n\nhello vim\n")
            #expect(outcome.text == "To: b@example.org\n\nfarewell vim\n")
            let files = Set(try String(contentsOfFile: listing, encoding: .utf8).split(separator: "\n"))
            #expect(files.isSuperset(of: ["message.txt", "message.txt~", ".message.txt.un~"]), "\(files)")
            if flags == "-es" { #expect(files.contains(".message.txt.swp"), "\(files)") }
            #expect(ScratchFolder.contents(parent).isEmpty, "\(ScratchFolder.contents(parent))")
        }
    }

    @Test func aLeftoverFolderOfAnEndedProcessIsSweptAtStart() async throws {
        let scratch = ScratchFolder()
        let parent = "\(scratch.path)/compose"
        let ended = Process()
        ended.executableURL = URL(fileURLWithPath: "/bin/true")
        try ended.run()
        ended.waitUntilExit()
        let dead = "\(parent)/\(ended.processIdentifier)-00112233445566778899aabbccddeeff"
        let alive = "\(parent)/\(getpid())-ffeeddccbbaa99887766554433221100"
        for folder in [dead, alive] {
            try FileManager.default.createDirectory(
                atPath: folder,
                withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700]
            )
            try "cleartext draft".write(toFile: "\(folder)/message.txt", atomically: true, encoding: .utf8)
        }
        chmod(parent, 0o700)
        _ = try await EditorSession(parent: parent, environment: ["EDITOR": "/bin/true"]).edit("x")
        #expect(!FileManager.default.fileExists(atPath: dead), "a dead process's draft survived")
        #expect(FileManager.default.fileExists(atPath: "\(alive)/message.txt"), "a live process's draft was taken")
        try FileManager.default.createDirectory(atPath: dead, withIntermediateDirectories: true)
        #expect(await EditorSession.sweep(parent: parent) == 1)
        #expect(FileManager.default.fileExists(atPath: alive))
    }

    @Test func theComposeParentIsTheRuntimeFolder() {
        // The test process's own environment decides; both answers are memory-backed or the given fallback.
        let chosen = PreviewFolder.chooseCompose(fallback: "/fallback/compose")
        if let runtime = ProcessInfo.processInfo.environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") {
            #expect(chosen == "\(runtime)/coffer-compose")
        } else {
            #expect(chosen == "/dev/shm/coffer-compose-\(getuid())" || chosen == "/fallback/compose")
        }
    }

    // MARK: - The command

    @Test(arguments: [
        ("vim", ["vim"]),
        ("vim -n", ["vim", "-n"]),
        ("  code   --wait  ", ["code", "--wait"]),
        ("'/opt/my editor/ed' -x", ["/opt/my editor/ed", "-x"]),
        ("\"/opt/my editor/ed\" \"a\\\"b\"", ["/opt/my editor/ed", "a\"b"]),
        ("emacs\\ client -c", ["emacs client", "-c"]),
        ("vim -c 'set tw=72'", ["vim", "-c", "set tw=72"]),
        ("ed ''", ["ed", ""]),
        ("a~b", ["a~b"]),
    ])
    func anEditorCommandSplitsIntoWordsAsAShellWould(command: String, words: [String]) throws {
        #expect(try EditorSession.splitWords(command) == words)
    }

    @Test(arguments: [
        "vim $HOME/x", "vim `id`", "vim | tee", "vim; rm -rf /", "vim && x", "vim > /tmp/x", "vim < x", "(vim)",
        "vim \"$(id)\"", "~/bin/ed", "vim 'open", "vim \"open", "vim \\", "   ", "vim\nrm",
    ])
    func anEditorCommandThatNeedsAShellIsRefused(command: String) {
        #expect {
            try EditorSession.splitWords(command)
        } throws: { error in
            guard case CompositionError.unusableEditorCommand = error else { return false }
            return true
        }
    }

    @Test func visualComesBeforeEditorAndViIsTheLastResort() throws {
        #expect(try EditorSession.editorWords(environment: ["VISUAL": "a -x", "EDITOR": "b"]) == ["a", "-x"])
        #expect(try EditorSession.editorWords(environment: ["VISUAL": " ", "EDITOR": "b"]) == ["b"])
        #expect(try EditorSession.editorWords(environment: [:]) == ["vi"])
        let session = try EditorSession(parent: "/unused", environment: ["EDITOR": "sh -e", "PATH": "relative:/bin"])
        #expect(session.command == ["/bin/sh", "-e"])
        #expect(throws: CompositionError.editorNotFound(program: "no-such-editor-here")) {
            try EditorSession(parent: "/unused", environment: ["EDITOR": "no-such-editor-here", "PATH": "/bin"])
        }
        // A relative folder on $PATH is never searched (it would run a program from wherever the command runs).
        #expect(throws: CompositionError.editorNotFound(program: "sh")) {
            try EditorSession(parent: "/unused", environment: ["EDITOR": "sh", "PATH": ".:bin"])
        }
    }
}
