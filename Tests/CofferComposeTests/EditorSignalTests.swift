import Foundation
import Testing

@testable import CofferCompose

#if canImport(Glibc)
import Glibc
#endif

/// What the parent test hands the child process.
enum EditorChildEnvironment {
    static let child = "COFFER_COMPOSE_EDITOR_CHILD"
    static let parent = "COFFER_COMPOSE_EDITOR_PARENT"
    static let editor = "COFFER_COMPOSE_EDITOR_SCRIPT"
    static let expected = "COFFER_COMPOSE_EDITOR_EXPECT"

    static var isChild: Bool { ProcessInfo.processInfo.environment[child] == "1" }
}

/// The child side: runs only inside the process that the signal tests start (and signal).
@Suite("Editor session child")
struct EditorSessionChild {
    @Test(
        "edit with the parent's editor script",
        .enabled(if: EditorChildEnvironment.isChild, "runs only inside the child process the signal tests start")
    )
    func editForParent() async throws {
        let environment = ProcessInfo.processInfo.environment
        let session = try EditorSession(
            parent: try #require(environment[EditorChildEnvironment.parent]),
            environment: ["EDITOR": try #require(environment[EditorChildEnvironment.editor])]
        )
        let outcome = try await session.edit("To: b@example.org\n\nhello\n")
        let expected = environment[EditorChildEnvironment.expected] ?? "hello\nedited after the interrupt\n"
        #expect(outcome.text == "To: b@example.org\n\n" + expected)
    }
}

/// A session ended by a signal leaves no cleartext: SIGTERM and SIGHUP delete the folder and end the process by that
/// signal; SIGINT (Ctrl-C, which the editor on the terminal receives too) is left to the editor, and the session goes
/// on.
@Suite(.serialized) struct EditorSignalTests {
    /// An editor that tells the parent where its file is and waits, in the foreground, until told to finish.
    static let waitingScript = """
        cp "$1" "$1~"
        printf '%s' "$1" > "$OUT/file"
        printf '%s' "$$" > "$OUT/pid.tmp" && mv "$OUT/pid.tmp" "$OUT/pid"
        while [ ! -e "$OUT/go" ] && [ -d "$OUT" ]; do sleep 0.05; done
        printf 'edited after the interrupt\\n' >> "$1"

        """

    struct Child {
        let process: Process
        let file: String
        let editorPID: pid_t
    }

    /// Starts the child test process and waits until its editor runs.
    static func startChild(scratch: ScratchFolder, parent: String, out: String) async throws -> Child {
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        let editor = try scratch.script("wait.sh", "OUT=\(out)\n" + waitingScript)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        process.arguments = ["--testing-library", "swift-testing", "--filter", "EditorSessionChild"]
        process.environment = ProcessInfo.processInfo.environment.merging([
            EditorChildEnvironment.child: "1",
            EditorChildEnvironment.parent: parent,
            EditorChildEnvironment.editor: editor,
        ]) { $1 }
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Wait (up to a minute; the child test binary starts slowly on a busy machine) for the editor to run.
        var waited = 0
        while !FileManager.default.fileExists(atPath: "\(out)/pid") && process.isRunning && waited < 1200 {
            try await Task.sleep(for: .milliseconds(50))
            waited += 1
        }
        let file = try String(contentsOfFile: "\(out)/file", encoding: .utf8)
        let pid = pid_t(try String(contentsOfFile: "\(out)/pid", encoding: .utf8)) ?? 0
        return Child(process: process, file: file, editorPID: pid)
    }

    @Test(arguments: [SIGTERM, SIGHUP])
    func aSessionEndedBySignalLeavesNothing(signal: Int32) async throws {
        let scratch = ScratchFolder()
        let parent = "\(scratch.path)/compose"
        let child = try await Self.startChild(scratch: scratch, parent: parent, out: "\(scratch.path)/out")
        defer { if child.editorPID > 0 { kill(child.editorPID, SIGKILL) } }
        #expect(FileManager.default.fileExists(atPath: child.file), "the editor's file must exist while it runs")
        #expect(FileManager.default.fileExists(atPath: child.file + "~"))
        kill(child.process.processIdentifier, signal)
        child.process.waitUntilExit()
        #expect(child.process.terminationReason == .uncaughtSignal)
        #expect(child.process.terminationStatus == signal)
        #expect(!FileManager.default.fileExists(atPath: child.file))
        #expect(ScratchFolder.contents(parent).isEmpty, "\(ScratchFolder.contents(parent))")
    }

    @Test func anInterruptIsLeftToTheEditorAndTheSessionGoesOn() async throws {
        let scratch = ScratchFolder()
        let parent = "\(scratch.path)/compose"
        let out = "\(scratch.path)/out"
        let child = try await Self.startChild(scratch: scratch, parent: parent, out: out)
        defer {
            // Only when the test failed: the session still runs, and so does its editor.
            if child.process.isRunning {
                kill(child.process.processIdentifier, SIGKILL)
                if child.editorPID > 0 { kill(child.editorPID, SIGKILL) }
            }
        }
        // SIGINT to the session's process alone (the editor script would end on it, as a real terminal's Ctrl-C
        // reaches both; vim takes it as "cancel").
        kill(child.process.processIdentifier, SIGINT)
        try await Task.sleep(for: .milliseconds(300))
        #expect(child.process.isRunning, "SIGINT ended the session while its editor ran")
        #expect(FileManager.default.fileExists(atPath: child.file), "SIGINT deleted the file under the editor")
        _ = FileManager.default.createFile(atPath: "\(out)/go", contents: nil)
        child.process.waitUntilExit()
        #expect(child.process.terminationReason == .exit)
        #expect(child.process.terminationStatus == 0, "the child's session must return the edited text")
        #expect(ScratchFolder.contents(parent).isEmpty, "\(ScratchFolder.contents(parent))")
    }

    /// Drives the child test process on a pseudo-terminal: waits for vim to show the file's name (its first screen),
    /// substitutes a word, writes and quits, as a person would. Prints the child's exit code last.
    static let ptyDriver = """
        import os, pty, select, sys, time
        pid, fd = pty.fork()
        if pid == 0:
            os.execv(sys.argv[1], sys.argv[1:])
        seen = b""
        def drain(seconds):
            global seen
            end = time.time() + seconds
            while time.time() < end:
                ready, _, _ = select.select([fd], [], [], 0.1)
                if ready:
                    try:
                        data = os.read(fd, 4096)
                    except OSError:
                        return False
                    if not data:
                        return False
                    seen += data
            return True
        deadline = time.time() + 120
        while b"message.txt" not in seen and time.time() < deadline and drain(0.2):
            pass
        print("screen:", b"message.txt" in seen)
        drain(0.5)
        os.write(fd, b":%s/hello/typed on a terminal/\\r")
        drain(0.5)
        os.write(fd, b":wq\\r")
        while time.time() < deadline and drain(0.5):
            pass
        for _ in range(100):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.1)
        else:
            os.kill(pid, 9)
            _, status = os.waitpid(pid, 0)
        print("exit:", os.waitstatus_to_exitcode(status))
        """

    @Test func vimOnATerminalReadsTheKeysAndTheSessionGetsTheText() throws {
        let candidates = ["/usr/bin/vim", "/bin/vim", "/usr/local/bin/vim"]
        guard let vim = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            print("EditorSignalTests: vim is not installed; the terminal case is skipped.")
            return
        }
        let scratch = ScratchFolder()
        let parent = "\(scratch.path)/compose"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "python3", "-c", Self.ptyDriver, URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path,
            "--testing-library", "swift-testing", "--filter", "EditorSessionChild",
        ]
        process.environment = ProcessInfo.processInfo.environment.merging([
            EditorChildEnvironment.child: "1",
            EditorChildEnvironment.parent: parent,
            EditorChildEnvironment.editor: "\(vim) -n -u NONE -i NONE",
            EditorChildEnvironment.expected: "typed on a terminal\n",
            "TERM": "xterm",
        ]) { $1 }
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let lines = text.split(separator: "\n")
        #expect(lines.contains("screen: True"), "vim never showed the file: \(text)")
        // The child test passes only when the session returned the text typed into vim.
        #expect(lines.last == "exit: 0", "\(text.suffix(2000))")
        #expect(ScratchFolder.contents(parent).isEmpty, "\(ScratchFolder.contents(parent))")
    }

    @Test func aKilledSessionsFolderIsSweptByTheNext() async throws {
        let scratch = ScratchFolder()
        let parent = "\(scratch.path)/compose"
        let child = try await Self.startChild(scratch: scratch, parent: parent, out: "\(scratch.path)/out")
        kill(child.process.processIdentifier, SIGKILL)
        child.process.waitUntilExit()
        if child.editorPID > 0 { kill(child.editorPID, SIGKILL) }
        #expect(FileManager.default.fileExists(atPath: child.file), "SIGKILL cannot be caught: the file stays")
        _ = try await EditorSession(parent: parent, environment: ["EDITOR": "/bin/true"]).edit("x")
        #expect(ScratchFolder.contents(parent).isEmpty, "\(ScratchFolder.contents(parent))")
    }
}
