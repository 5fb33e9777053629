import CofferAttachments
import CofferBlocking
import CofferCrypto
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Runs the person's editor on the text of a message being written, with the cleartext file in a private folder
/// that is deleted whatever happens.
///
/// The editor is `$VISUAL`, else `$EDITOR`, else `vi`, split into words as a shell would split them (quotes and
/// backslashes understood; no expansion, no pipes, no shell: a command that needs one is refused). It runs on the
/// terminal (standard input, output and error inherited) in this process's group, through
/// `ChildProcess.runOnTerminal` on the blocking pool (Foundation's `Process` would put it in a group of its own, where
/// reading the terminal stops it). The file is
/// `<parent>/<pid>-<random>/<fileName>`: one folder (0700) per session under a memory-backed parent
/// (`PreviewFolder.chooseCompose(fallback:)`), so the editor's swap, backup and undo files land beside it and go
/// with it. The folder is deleted when ``edit(_:)`` returns or throws, and by `CleartextCleanup` on SIGTERM or
/// SIGHUP (SIGINT belongs to the editor while it runs, as in `git commit`); folders left by a process that was
/// killed are swept when a session starts. docs/COMPOSE.md, "The editor's file".
public struct EditorSession: Sendable {
    /// The folder under which each session makes its own folder.
    public let parent: String
    /// The editor's program (a path) and its arguments; the file's path is added as the last argument.
    public let command: [String]
    /// The name of the file the editor opens.
    public let fileName: String

    /// Prepares a session: finds the editor.
    ///
    /// - Parameters:
    ///   - parent: Where the session folders go: `PreviewFolder.chooseCompose(fallback:)`.
    ///   - fileName: The file's name (editors choose their syntax from it).
    ///   - environment: Where `VISUAL`, `EDITOR` and `PATH` are read.
    /// - Throws: ``CompositionError/unusableEditorCommand(reason:)`` or ``CompositionError/editorNotFound(program:)``.
    public init(
        parent: String,
        fileName: String = "message.txt",
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(CompositionError) {
        self.parent = parent
        self.fileName = fileName
        var words = try Self.editorWords(environment: environment)
        words[0] = try Self.locate(words[0], path: environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin")
        self.command = words
    }

    /// What the editor left.
    public struct Outcome: Sendable, Hashable {
        /// The file's text after the editor exited (empty when the editor deleted the file).
        public var text: String
        /// Whether the file differs from the text it was given.
        public var changed: Bool

        /// Whether the person abandoned the message: the file is unchanged, or holds nothing but blank and `#` lines.
        public var isAbandoned: Bool {
            !changed
                || textLines(text).allSatisfy { line in
                    line.hasPrefix("#") || line.allSatisfy { $0 == " " || $0 == "\t" }
                }
        }
    }

    /// Writes `text` to a fresh private file, runs the editor on it, reads it back and deletes the folder.
    ///
    /// - Throws: ``CompositionError/editorFailed(status:)`` when the editor exits with a failure status (vim's
    ///   `:cq`), ``CompositionError/editorNotFound(program:)`` when it cannot start, ``CompositionError/privateFolder(reason:)``
    ///   when the folder or file cannot be made or read, ``CompositionError/tooLong(limit:)`` for a file over
    ///   ``ComposeTemplate/maxLength``. The folder is gone in every case.
    public func edit(_ text: String) async throws(CompositionError) -> Outcome {
        let parent = self.parent
        let fileName = self.fileName
        let written = Array(text.utf8)
        let (folder, file) = try await BlockingPool.run { () throws(CompositionError) -> (String, String) in
            do throws(CofferCryptoError) {
                try SecureFile.makePrivateDirectory(parent)
                // Guarded before the folder exists, so no signal finds it unguarded.
                CleartextCleanup.protect(parent: parent)
                PreviewFolder.removeFoldersOfEndedProcesses(under: parent)
                let folder = try SecureFile.makeProcessFolder(under: parent)
                let file = "\(folder)/\(fileName)"
                do throws(CofferCryptoError) {
                    try SecureFile.writeNew(written, to: file)
                } catch {
                    SecureFile.removeTree(folder)
                    throw error
                }
                return (folder, file)
            } catch {
                throw Self.wrap(error)
            }
        }
        let status: Int32
        do {
            let command = self.command
            status = try await CleartextCleanup.leavingInterruptsToChild { () async throws(ChildProcess.Failure) in
                try await ChildProcess.runOnTerminal(command[0], arguments: Array(command.dropFirst()) + [file])
            }
        } catch {
            await Self.remove(folder)
            throw .editorNotFound(program: command[0])
        }
        let read = await BlockingPool.run { () -> Result<[UInt8]?, CompositionError> in
            defer { SecureFile.removeTree(folder) }
            guard status == 0 else { return .failure(.editorFailed(status: status)) }
            do throws(CofferCryptoError) {
                return .success(try SecureFile.read(file, maxBytes: ComposeTemplate.maxLength))
            } catch {
                if case .io(_, let number) = error, number == EFBIG {
                    return .failure(.tooLong(limit: ComposeTemplate.maxLength))
                }
                return .failure(Self.wrap(error))
            }
        }
        let bytes = try read.get() ?? []
        return Outcome(text: String(decoding: bytes, as: UTF8.self), changed: bytes != written)
    }

    /// Deletes what killed processes left under `parent` (their session folders); this process's are kept.
    ///
    /// - Returns: How many were deleted.
    @discardableResult
    public static func sweep(parent: String) async -> Int {
        await BlockingPool.run { PreviewFolder.removeFoldersOfEndedProcesses(under: parent) }
    }

    // MARK: - The command

    /// The editor's words: `$VISUAL`, else `$EDITOR` (each when not empty), else `vi`.
    public static func editorWords(environment: [String: String]) throws(CompositionError) -> [String] {
        for name in ["VISUAL", "EDITOR"] {
            if let value = environment[name], !value.allSatisfy({ $0 == " " || $0 == "\t" }) {
                return try splitWords(value)
            }
        }
        return ["vi"]
    }

    /// Splits a command into words as a POSIX shell does for plain words: blanks separate, `'…'` and `"…"` quote
    /// (a backslash escapes `"`, `\`, `$` and `` ` `` inside double quotes), a backslash outside quotes escapes the
    /// next character. No expansion is done, so a command that would need a shell (`$`, `` ` ``, `|`, `;`, `&`,
    /// `<`, `>`, `(`, `)`, a line break, a leading `~`, outside quotes) is refused rather than run differently.
    public static func splitWords(_ command: String) throws(CompositionError) -> [String] {
        enum Quote { case none, single, double }
        var words: [String] = []
        var current = ""
        var inWord = false
        var quote = Quote.none
        var escaped = false
        for character in command {
            if escaped {
                current.append(character)
                escaped = false
                continue
            }
            switch quote {
            case .single:
                if character == "'" { quote = .none } else { current.append(character) }
            case .double:
                if character == "\"" {
                    quote = .none
                } else if character == "\\" {
                    escaped = true
                } else if character == "$" || character == "`" {
                    throw .unusableEditorCommand(reason: "it uses shell expansion ($ or `)")
                } else {
                    current.append(character)
                }
            case .none:
                switch character {
                case " ", "\t":
                    if inWord { words.append(current) }
                    current = ""
                    inWord = false
                case "'":
                    quote = .single
                    inWord = true
                case "\"":
                    quote = .double
                    inWord = true
                case "\\":
                    escaped = true
                    inWord = true
                case "$", "`", "|", ";", "&", "<", ">", "(", ")", "\n", "\r":
                    throw .unusableEditorCommand(
                        reason: "it uses shell syntax (\(character == "\n" ? "a line break" : String(character)))"
                    )
                case "~" where !inWord:
                    throw .unusableEditorCommand(reason: "it starts a word with ~ (write the full path)")
                default:
                    current.append(character)
                    inWord = true
                }
            }
        }
        guard quote == .none, !escaped else {
            throw .unusableEditorCommand(reason: "a quote or backslash is not closed")
        }
        if inWord { words.append(current) }
        guard !words.isEmpty else { throw .unusableEditorCommand(reason: "it is empty") }
        return words
    }

    /// The program's path: `program` itself when it has a slash, else the first executable of that name on `path`.
    static func locate(_ program: String, path: String) throws(CompositionError) -> String {
        if program.contains("/") {
            guard access(program, X_OK) == 0 else { throw .editorNotFound(program: program) }
            return program
        }
        for folder in path.split(separator: ":") where folder.hasPrefix("/") {
            let candidate = "\(folder)/\(program)"
            var info = stat()
            if stat(candidate, &info) == 0, info.st_mode & S_IFMT == S_IFREG, access(candidate, X_OK) == 0 {
                return candidate
            }
        }
        throw .editorNotFound(program: program)
    }

    private static func remove(_ folder: String) async {
        await BlockingPool.run { SecureFile.removeTree(folder) }
    }

    private static func wrap(_ error: CofferCryptoError) -> CompositionError {
        .privateFolder(reason: error.description)
    }
}
