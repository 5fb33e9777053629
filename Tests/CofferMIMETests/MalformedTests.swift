import CofferSampleMail
import Foundation
import Testing

@testable import CofferMIME

/// A hostile or broken input and what parsing it must give.
struct MalformedCase: CustomTestStringConvertible, Sendable {
    enum Outcome: Sendable {
        /// A best-effort message; the closure checks it.
        case message(@Sendable (MIMEMessage) -> Bool)
        /// This typed error.
        case error(MIMEError)
    }

    let name: String
    let bytes: @Sendable () -> [UInt8]
    let outcome: Outcome

    var testDescription: String { name }

    static func text(_ name: String, _ text: String, _ outcome: Outcome) -> MalformedCase {
        MalformedCase(name: name, bytes: { Array(text.utf8) }, outcome: outcome)
    }
}

private func repeated(_ text: String, _ count: Int) -> String {
    String(repeating: text, count: count)
}

private let nestedMultiparts: @Sendable () -> [UInt8] = {
    var text = ""
    for level in 0..<10_000 {
        text += "Content-Type: multipart/mixed; boundary=\"b\(level)\"\n\n--b\(level)\n"
    }
    text += "Content-Type: text/plain\n\ninnermost\n"
    for level in (0..<10_000).reversed() {
        text += "--b\(level)--\n"
    }
    return Array(text.utf8)
}

private let nestedMessages: @Sendable () -> [UInt8] = {
    Array((repeated("Content-Type: message/rfc822\n\n", 10_000) + "Subject: deep\n\nbody\n").utf8)
}

private let manyParts: @Sendable () -> [UInt8] = {
    Array(("Content-Type: multipart/mixed; boundary=b\n\n" + repeated("--b\n\nx\n", 20_000) + "--b--\n").utf8)
}

private let hugeHeader: @Sendable () -> [UInt8] = {
    Array(("Subject: " + repeated("x", 10 << 20) + "\n\nbody\n").utf8)
}

private let hugeFoldedHeader: @Sendable () -> [UInt8] = {
    Array(("Subject: start\n" + repeated(" folded continuation line\n", 400_000) + "\nbody\n").utf8)
}

private let manyHeaders: @Sendable () -> [UInt8] = {
    Array((repeated("X-A: b\n", 20_000) + "\nbody\n").utf8)
}

private let nulBytes: @Sendable () -> [UInt8] = {
    Array("Subject: a".utf8) + [0, 0] + Array("b\nFrom: x\0@y\n\nbo\0dy\n".utf8)
}

private let binaryGarbage: @Sendable () -> [UInt8] = {
    var generator = SplitMix(seed: 7)
    return (0..<200_000).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
}

private let unterminatedWords: @Sendable () -> [UInt8] = {
    Array(("Subject: " + repeated("=?utf-8?q?abc ", 20_000) + "\nTo: " + repeated("=?utf-8?q?", 20_000) + "\n\nb").utf8)
}

private let longBodyLine: @Sendable () -> [UInt8] = {
    Array(("Content-Type: text/plain\n\n" + repeated("y", 5 << 20)).utf8)
}

private let manyDelimiterLines: @Sendable () -> [UInt8] = {
    let body = repeated("--outer\n--inner\n--x\n", 30_000)
    return Array(("Content-Type: multipart/mixed; boundary=nothere\n\n" + body).utf8)
}

@Suite struct MalformedTests {
    static let cases: [MalformedCase] = [
        .text(
            "broken boundary",
            "Content-Type: multipart/mixed; boundary=abc\n\n--abd\nContent-Type: text/plain\n\nhi\n--abd--\n",
            .message { $0.root.children.isEmpty && $0.defects.contains(.boundaryNotFound) }
        ),
        .text(
            "missing boundary parameter",
            "Content-Type: multipart/mixed\n\n--abc\n\nhi\n--abc--\n",
            .message { $0.root.children.isEmpty && $0.defects.contains(.missingBoundaryParameter) }
        ),
        .text(
            "missing close boundary",
            "Content-Type: multipart/mixed; boundary=abc\n\n--abc\n\none\n--abc\n\ntwo\n",
            .message { $0.root.children.count == 2 && $0.defects.contains(.closeBoundaryNotFound) }
        ),
        .text(
            "boundary as a prefix of a longer line",
            "Content-Type: multipart/mixed; boundary=abc\n\n--abc\n\n--abcdef\n--abc--\n",
            .message { $0.root.children.count == 1 && $0.textBody == "--abcdef" }
        ),
        .text(
            "bad base64",
            "Content-Type: text/plain\nContent-Transfer-Encoding: base64\n\naGVsb!!G8\n====\n*&^%\n",
            .message { $0.textBody != nil }
        ),
        .text(
            "bad quoted-printable",
            "Content-Type: text/plain\nContent-Transfer-Encoding: quoted-printable\n\n=ZZ=4=\n=",
            .message { $0.textBody == "=ZZ=4" }
        ),
        .text("missing headers", "just a body line\nand another\n", .message { $0.headers.isEmpty }),
        .text("only a blank line", "\n", .message { $0.headers.isEmpty && $0.textBody == "" }),
        .text(
            "missing header/body separator",
            "Subject: x\nthis is body\n",
            .message { $0.subject == "x" && $0.defects.contains(.missingHeaderBodySeparator) }
        ),
        .text(
            "unknown charset",
            "Subject: =?x-klingon?q?abc?=\nContent-Type: text/plain; charset=x-klingon\n\nplain \u{E9}\n",
            .message { $0.subject == "abc" && $0.textBody == "plain \u{E9}\n" }
        ),
        .text(
            "unterminated encoded word",
            "Subject: =?utf-8?q?never ends\n\nbody\n",
            .message { $0.subject == "=?utf-8?q?never ends" }
        ),
        .text(
            "bad address list",
            "From: <<<@@@>>>, \"unterminated\nTo: a@b (unclosed comment\nCc: :;:;,,<>\n\nbody\n",
            .message { _ in true }
        ),
        .text("empty header values", "Subject:\nFrom:\nDate:\nContent-Type:\n\nbody\n", .message { $0.date == nil }),
        MalformedCase(name: "empty input", bytes: { [] }, outcome: .error(.emptyMessage)),
        MalformedCase(name: "NUL bytes", bytes: nulBytes, outcome: .message { $0.subject?.contains("\0") == true }),
        MalformedCase(name: "binary garbage", bytes: binaryGarbage, outcome: .message { _ in true }),
        MalformedCase(
            name: "10 MB header line",
            bytes: hugeHeader,
            outcome: .error(.headerSectionTooLarge(limit: MIMELimits.default.maxHeaderSectionBytes))
        ),
        MalformedCase(
            name: "10 MB folded header",
            bytes: hugeFoldedHeader,
            outcome: .error(.headerSectionTooLarge(limit: MIMELimits.default.maxHeaderSectionBytes))
        ),
        MalformedCase(
            name: "20,000 header fields",
            bytes: manyHeaders,
            outcome: .error(.tooManyHeaderFields(limit: MIMELimits.default.maxHeaderFields))
        ),
        MalformedCase(
            name: "10,000 nested multiparts",
            bytes: nestedMultiparts,
            outcome: .message { $0.defects.contains(.nestingTooDeep(limit: 64)) && $0.root.allParts.count == 65 }
        ),
        MalformedCase(
            name: "10,000 nested messages",
            bytes: nestedMessages,
            outcome: .message { $0.defects.contains(.nestingTooDeep(limit: 64)) }
        ),
        MalformedCase(
            name: "20,000 parts",
            bytes: manyParts,
            outcome: .message { $0.defects.contains(.tooManyParts(limit: 10_000)) && $0.root.children.count == 9_999 }
        ),
        MalformedCase(
            name: "many unterminated encoded words",
            bytes: unterminatedWords,
            outcome: .message { ($0.subject?.count ?? 0) > 200_000 }
        ),
        MalformedCase(
            name: "5 MB line without newline",
            bytes: longBodyLine,
            outcome: .message { $0.textBody?.utf8.count == 5 << 20 }
        ),
        MalformedCase(
            name: "many delimiter-like lines",
            bytes: manyDelimiterLines,
            outcome: .message { $0.defects.contains(.boundaryNotFound) }
        ),
    ]

    @Test(arguments: cases)
    func malformedInput(_ testCase: MalformedCase) {
        let bytes = testCase.bytes()
        let result = Result { () throws(MIMEError) -> MIMEMessage in try MIMEParser.parse(bytes) }
        switch (testCase.outcome, result) {
        case (.message(let check), .success(let message)):
            #expect(check(message))
            exerciseAccessors(message)
        case (.error(let expected), .failure(let error)):
            #expect(error == expected)
            // A sentence for people, and none of the input's text.
            #expect(error.description.first?.isUppercase == true && error.description.hasSuffix("."))
            #expect(!error.description.contains("Subject"))
        case (.message, .failure(let error)):
            Issue.record("expected a best-effort message, got \(error)")
        case (.error(let expected), .success):
            Issue.record("expected \(expected), got a message")
        }
    }

    @Test func errorDescriptionsNeverQuoteTheMessage() {
        let errors: [MIMEError] = [
            .emptyMessage, .headerSectionTooLarge(limit: 1), .tooManyHeaderFields(limit: 2), .messageTooLarge(limit: 3),
            .unreadable(path: "/p", reason: "r"), .unrecognizedFormat(path: "/q"),
        ]
        for error in errors {
            #expect(error.description.hasSuffix("."))
        }
    }
}

/// Touches every derived value, as an importer would, so that lazily computed fields are exercised too.
func exerciseAccessors(_ message: MIMEMessage) {
    _ = message.subject
    _ = message.from + message.to + message.cc + message.bcc + message.replyTo + message.sender
    _ = message.date
    _ = message.messageID
    _ = message.inReplyTo + message.references
    _ = message.textBody
    _ = message.htmlBody
    for part in message.attachments {
        _ = part.filename
        _ = part.contentID
    }
    for part in message.root.allParts.prefix(200) {
        _ = part.text
        _ = part.filename
    }
}
