import Foundation
import Testing

@testable import CofferMIME

/// Helpers for running the Python scripts that live next to this file.
enum PythonScripts {
    static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()

    /// Runs `python3 script arguments...`, returning its exit status and standard error.
    static func run(_ script: String, _ arguments: [String]) throws -> (status: Int32, stderr: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", folder.appendingPathComponent(script).path] + arguments
        let errorPipe = Pipe()
        process.standardError = errorPipe
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let errorData = errorPipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: errorData, as: UTF8.self))
    }

    /// Generates the seeded corpus into `folder` and returns the message files, sorted.
    static func makeCorpus(in folder: String, count: Int, seed: Int) throws -> [String] {
        let result = try run("make_corpus.py", [folder, String(count), String(seed)])
        guard result.status == 0 else {
            throw CorpusError.scriptFailed(result.stderr)
        }
        return try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".eml") }.sorted()
    }
}

enum CorpusError: Error {
    case scriptFailed(String)
}

/// The per-message description that oracle.py writes with Python's `email` package (policy.default).
struct OracleMessage: Codable, Equatable {
    var subject: String?
    var from: [[String?]]
    var to: [[String?]]
    var cc: [[String?]]
    var date: Double?
    var messageID: String?
    var inReplyTo: [String]
    var references: [String]
    var headerNames: [String]
    var headers: [[String]]
    var parts: [OraclePart]
}

struct OraclePart: Codable, Equatable {
    var type: String
    var filename: String?
    var cid: String?
    var disposition: String?
    var text: String?
    var data: String?
}

struct OracleEntry: Codable {
    var ok: OracleMessage?
    var error: String?
}

/// Compares CofferMIME with Python's `email` package (policy.default) on a seeded corpus from make_corpus.py.
///
/// The corpus avoids the few inputs where CofferMIME deliberately departs from Python, each covered by its own unit
/// test instead: a transfer encoding with trailing whitespace is still honoured (Python skips decoding), an RFC 2231
/// `filename*` wins over a plain `filename` (Python takes the first), a text part without a charset is read as UTF-8
/// or Windows-1252 (Python assumes US-ASCII and replaces every 8-bit byte), and base64 of impossible length is
/// decoded as far as it goes (Python returns the undecoded text).
@Suite struct DifferentialTests {
    /// Messages on which CofferMIME may knowingly disagree with Python, with the reason. Keep this empty or tiny.
    static let allowList: [String: String] = [:]

    static let structured: Set<String> = [
        "from", "to", "cc", "bcc", "sender", "reply-to", "date", "message-id", "mime-version", "content-type",
        "content-disposition", "content-transfer-encoding", "in-reply-to", "references",
    ]

    static func describe(_ message: MIMEMessage) -> OracleMessage {
        func list(_ addresses: [MailAddress]) -> [[String?]] {
            addresses.map { [$0.name ?? "", $0.address, $0.group] }
        }
        let parts = message.root.allParts.map { part -> OraclePart in
            var entry = OraclePart(
                type: part.contentType.mimeType,
                filename: part.filename,
                cid: part.contentID,
                disposition: part.disposition?.type
            )
            if part.children.isEmpty {
                if part.contentType.type == "text" {
                    entry.text = part.text
                } else if part.contentType.type != "message" {
                    entry.data = Data(part.body).base64EncodedString()
                }
            }
            return entry
        }
        return OracleMessage(
            subject: message.subject,
            from: list(message.from),
            to: list(message.to),
            cc: list(message.cc),
            date: message.date?.timeIntervalSince1970,
            messageID: message.messageID,
            inReplyTo: message.inReplyTo,
            references: message.references,
            headerNames: message.headers.map(\.name),
            headers: message.headers.filter { !structured.contains($0.name.lowercased()) }.map { [$0.name, $0.value] },
            parts: parts
        )
    }

    static func differences(_ python: OracleMessage, _ swift: OracleMessage) -> [String] {
        var result: [String] = []
        func check<T: Equatable>(_ field: String, _ left: T, _ right: T) {
            if left != right {
                result.append("\(field): python \(left) / swift \(right)")
            }
        }
        check("subject", python.subject, swift.subject)
        check("from", python.from, swift.from)
        check("to", python.to, swift.to)
        check("cc", python.cc, swift.cc)
        check("date", python.date, swift.date)
        check("messageID", python.messageID, swift.messageID)
        check("inReplyTo", python.inReplyTo, swift.inReplyTo)
        check("references", python.references, swift.references)
        check("headerNames", python.headerNames, swift.headerNames)
        check("headers", python.headers, swift.headers)
        check("part types", python.parts.map(\.type), swift.parts.map(\.type))
        for (index, (left, right)) in zip(python.parts, swift.parts).enumerated() where left != right {
            check("part \(index) filename", left.filename, right.filename)
            check("part \(index) cid", left.cid, right.cid)
            check("part \(index) disposition", left.disposition, right.disposition)
            check("part \(index) text", left.text, right.text)
            check("part \(index) data", left.data, right.data)
        }
        return result
    }

    @Test func agreesWithPythonEmail() throws {
        let folder = try TemporaryFolder()
        let corpus = (folder.path as NSString).appendingPathComponent("corpus")
        let files = try PythonScripts.makeCorpus(in: corpus, count: 600, seed: 20_240_501)
        #expect(files.count >= 500)
        let output = (folder.path as NSString).appendingPathComponent("oracle.json")
        let oracle = try PythonScripts.run("oracle.py", [corpus, output])
        try #require(oracle.status == 0, "oracle.py failed: \(oracle.stderr)")
        let expected = try JSONDecoder().decode(
            [String: OracleEntry].self,
            from: Data(contentsOf: URL(fileURLWithPath: output))
        )

        var agreed = 0
        var allowed = 0
        var disagreements: [String] = []
        for file in files {
            let bytes = try MailSource.readMessageFile(atPath: (corpus as NSString).appendingPathComponent(file))
            let python = try #require(expected[file]?.ok, "oracle could not parse \(file)")
            let swift = Self.describe(try MIMEParser.parse(bytes))
            let found = Self.differences(python, swift)
            if found.isEmpty {
                agreed += 1
            } else if Self.allowList[file] != nil {
                allowed += 1
            } else {
                disagreements.append("\(file):\n  " + found.joined(separator: "\n  "))
            }
        }
        print(
            "CofferMIME differential test: \(agreed)/\(files.count) messages agree with Python email, \(allowed) allow-listed"
        )
        if !disagreements.isEmpty {
            let shown = disagreements.prefix(10).map { String($0.prefix(2000)) }.joined(separator: "\n")
            Issue.record("\(disagreements.count) messages disagree with Python email:\n\(shown)")
        }
    }
}
