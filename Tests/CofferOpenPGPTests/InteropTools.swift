import CofferTesting
import Foundation
import Testing

/// What a tool run left behind.
struct ToolResult {
    var status: Int32
    var output: [UInt8]
    var errors: String

    var text: String { String(decoding: output, as: UTF8.self) }
}

/// Runs the interop oracles (GnuPG's `gpg`, Sequoia's `sq`) as child processes on files in a private folder.
///
/// A missing tool fails the test with the reason (scripts/setup.sh installs both); nothing is skipped.
final class InteropTools {
    let folder = TemporaryDirectory(prefix: "coffer-openpgp")
    /// GnuPG's home for this test only: its keyring, trust database and agent socket.
    let gnupgHome: String
    private var counter = 0

    init() throws {
        for tool in ["gpg", "gpgconf", "sq"] {
            try #require(Self.path(of: tool) != nil, "\(tool) is not installed: run scripts/setup.sh")
        }
        gnupgHome = folder.path + "/gnupg"
        try FileManager.default.createDirectory(
            atPath: gnupgHome,
            withIntermediateDirectories: false,
            attributes: [.posixPermissions: 0o700]
        )
    }

    deinit {
        // The agent gpg started for this home; the folder itself goes with `folder`.
        _ = try? run("gpgconf", ["--homedir", gnupgHome, "--kill", "all"])
    }

    static func path(of tool: String) -> String? {
        ["/usr/bin", "/usr/local/bin", "/bin"].map { "\($0)/\(tool)" }.first {
            FileManager.default.isExecutableFile(atPath: $0)
        }
    }

    /// A new file in the folder holding `bytes`.
    func file(_ bytes: [UInt8], name: String = "input") throws -> String {
        counter += 1
        let path = "\(folder.path)/\(counter)-\(name)"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// A new file name in the folder (not created).
    func newPath(_ name: String) -> String {
        counter += 1
        return "\(folder.path)/\(counter)-\(name)"
    }

    /// Runs `tool` with `arguments` and `input` on standard input; standard output and error are collected.
    @discardableResult
    func run(_ tool: String, _ arguments: [String], input: [UInt8] = []) throws -> ToolResult {
        let executable = try #require(Self.path(of: tool), "\(tool) is not installed: run scripts/setup.sh")
        let stdinPath = try file(input, name: "stdin")
        let stdoutPath = newPath("stdout")
        let stderrPath = newPath("stderr")
        FileManager.default.createFile(atPath: stdoutPath, contents: nil)
        FileManager.default.createFile(atPath: stderrPath, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = [
            "GNUPGHOME": gnupgHome, "HOME": folder.path, "PATH": "/usr/bin:/bin", "LANG": "C",
        ]
        process.standardInput = FileHandle(forReadingAtPath: stdinPath)
        process.standardOutput = FileHandle(forWritingAtPath: stdoutPath)
        process.standardError = FileHandle(forWritingAtPath: stderrPath)
        try process.run()
        process.waitUntilExit()
        let output = try [UInt8](Data(contentsOf: URL(fileURLWithPath: stdoutPath)))
        let errors = String(decoding: try Data(contentsOf: URL(fileURLWithPath: stderrPath)), as: UTF8.self)
        return ToolResult(status: process.terminationStatus, output: output, errors: errors)
    }

    /// `gpg --batch` in this test's home, failing the test (with gpg's own words) when it fails.
    @discardableResult
    func gpg(_ arguments: [String], input: [UInt8] = [], expectSuccess: Bool = true) throws -> ToolResult {
        let result = try run(
            "gpg",
            ["--batch", "--no-tty", "--pinentry-mode", "loopback", "--trust-model", "always"] + arguments,
            input: input
        )
        if expectSuccess { try #require(result.status == 0, "gpg \(arguments) failed: \(result.errors)") }
        return result
    }

    /// `sq`, failing the test (with sq's own words) when it fails.
    @discardableResult
    func sq(_ arguments: [String], input: [UInt8] = [], expectSuccess: Bool = true) throws -> ToolResult {
        let result = try run("sq", arguments, input: input)
        if expectSuccess { try #require(result.status == 0, "sq \(arguments) failed: \(result.errors)") }
        return result
    }

    /// Makes a GnuPG key (Ed25519 + Curve25519, gpg's "future-default"), with `passphrase` or none; its fingerprint.
    func gpgGenerateKey(userID: String, passphrase: String = "") throws -> String {
        try gpg(["--passphrase", passphrase, "--quick-gen-key", userID, "future-default", "default", "never"])
        let listing = try gpg(["--with-colons", "--list-keys", userID]).text
        let line = try #require(listing.split(separator: "\n").first { $0.hasPrefix("fpr:") })
        return String(try #require(line.split(separator: ":", omittingEmptySubsequences: false).dropFirst(9).first))
    }

    /// Makes a Sequoia key; the secret key file and the certificate file.
    func sqGenerateKey(userID: String) throws -> (key: String, cert: String) {
        let key = newPath("sq-key.pgp")
        let cert = newPath("sq-cert.pgp")
        try sq(["key", "generate", "--userid", userID, "--export", key])
        try sq(["key", "extract-cert", "--output", cert, key])
        return (key, cert)
    }
}
