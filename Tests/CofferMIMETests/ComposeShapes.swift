import CofferSampleMail
import Foundation

@testable import CofferMIME

/// What a reader sees of a composed message, in the form compose_oracle.py writes for Python's `email` package:
/// decoded fields, text with LF line breaks, attachments' bytes in base64.
struct ComposedView: Codable, Equatable {
    var subject: String?
    var from: [[String]]
    var to: [[String]]
    var cc: [[String]]
    var replyTo: [[String]]
    var messageID: String?
    var inReplyTo: [String]
    var references: [String]
    var extra: [[String]]
    var text: String?
    var html: String?
    var attachments: [ComposedAttachment]
    var date: Double?
    var hasBcc: Bool
}

struct ComposedAttachment: Codable, Equatable {
    var filename: String?
    var type: String
    var data: String
}

/// The input of compose_oracle.py's `write` mode: one message for Python's `EmailMessage` to write.
struct ComposeSpec: Codable {
    var name: String
    var from: [String]
    var to: [[String]]
    var cc: [[String]]
    var replyTo: [[String]]
    var subject: String
    var inReplyTo: [String]
    var references: [String]
    var extra: [[String]]
    var text: String
    var html: String?
    var attachments: [ComposedAttachment]
    var date: Double
    var messageID: String
}

/// Message shapes for the round trips: Unicode subjects, names and file names, long headers, alternatives,
/// attachments large, empty and oddly named, bodies that need quoted-printable.
enum ComposeShapes {
    static let date = Date(timeIntervalSince1970: 1_764_115_795)

    static func bytes(_ count: Int, seed: UInt64) -> [UInt8] {
        var generator = SplitMix(seed: seed)
        return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    static func address(_ name: String?, _ address: String) -> MailAddress { MailAddress(name: name, address: address) }

    static let all: [(name: String, message: OutgoingMessage)] = {
        let alice = address("Alice Example", "alice@example.com")
        let bob = address("Bob", "bob@example.org")
        var shapes: [(String, OutgoingMessage)] = []
        func add(_ name: String, _ build: (inout OutgoingMessage) -> Void) {
            var message = OutgoingMessage(
                from: alice,
                to: [bob],
                subject: "Hello",
                text: "Hi Bob,\nsee you soon.\n",
                date: date,
                messageID: "\(name)@example.com"
            )
            build(&message)
            shapes.append((name, message))
        }
        add("plain") { _ in }
        add("unicode-subject") { $0.subject = "Grüße aus Köln – schönes Wochenende" }
        add("cjk-subject") { $0.subject = "会議の議事録と来週の予定について（確認をお願いします）会議の議事録と来週の予定について" }
        add("emoji") {
            $0.subject = "Party 🎉🎉 tonight 🍕"
            $0.from = address("Zoë 🦊", "zoe@example.com")
        }
        add("long-ascii-subject") {
            $0.subject = String(repeating: "a fairly long subject line with many words ", count: 6)
        }
        add("long-word-subject") {
            $0.subject = "see https://example.com/" + String(repeating: "x", count: 150) + " now"
        }
        add("encoded-word-lookalike") { $0.subject = "not =?utf-8?q?encoded?= text" }
        add("mixed-subject-spaces") { $0.subject = "Re:  Ärger   mit  dem   Übersetzer\tjetzt" }
        add("names") {
            $0.to = [
                address("Smith, Alice", "smith@example.com"), address("J. R. R. Tolkien", "jrr@example.com"),
                address("Quote \"me\" \\ back", "q@example.com"), address("Jörg Müller", "joerg@example.de"),
                address(nil, "bare@example.com"), address("a=?b", "c@example.com"),
            ]
        }
        add("long-unicode-name") {
            $0.to = [
                address("Διονύσιος Σολωμός Παπαδόπουλος Αλεξανδρόπουλος Κωνσταντινίδης", "greek@example.gr")
            ]
        }
        add("many-recipients") {
            $0.to = (1...30).map { address("Person \($0)", "person\($0)@example.com") }
            $0.cc = (1...12).map { address("Ünïcode \($0)", "u\($0)@example.com") }
            $0.replyTo = [address("List", "list@example.com")]
        }
        add("quoted-local-part") { $0.to = [address("Odd", "\"john doe\"@example.com")] }
        add("thread") {
            $0.inReplyTo = ["parent.1234@mail.example.net"]
            $0.references = (1...12).map { "ref\($0).abcdefgh@mail.example.net" }
        }
        add("extra-headers") {
            $0.extraHeaders = [
                OutgoingHeader(name: "X-Priority", value: "3"),
                OutgoingHeader(
                    name: "X-Note",
                    value: "Ünïcödé note with a long tail " + String(repeating: "ü", count: 60)
                ),
            ]
        }
        add("bcc") { $0.bcc = [address("Hidden", "hidden@example.net")] }
        add("alternative") {
            $0.html = "<p>Hi <b>Bob</b>,</p>\n<p>see you soon – ☕</p>\n"
        }
        add("quoted-printable-body") {
            $0.text =
                "Line with trailing space \nTab\tand trailing tab\t\nFrom the start\n=equals= and ünïcödé\n"
                + String(repeating: "long line ", count: 30) + "\n--=_ not a boundary\r\nCR only\rend"
        }
        add("empty") {
            $0.subject = ""
            $0.text = ""
        }
        add("attachments") {
            $0.attachments = [
                OutgoingAttachment(filename: "data.bin", bytes: bytes(100_000, seed: 1)),
                OutgoingAttachment(
                    filename: "Übersicht März.pdf",
                    contentType: "application/pdf",
                    bytes: bytes(3000, seed: 2)
                ),
                OutgoingAttachment(
                    filename: String(repeating: "very long file name ", count: 8) + "ünïcödé.txt",
                    contentType: "text/plain",
                    bytes: Array("line one\r\nline two\rthree\n".utf8)
                ),
                OutgoingAttachment(filename: "quote \" and \\ back.txt", contentType: "text/plain", bytes: []),
                OutgoingAttachment(filename: "not=?encoded.txt", bytes: bytes(10, seed: 3)),
                OutgoingAttachment(filename: "写真.jpg", contentType: "image/jpeg", bytes: bytes(57 * 3, seed: 4)),
            ]
        }
        add("everything") {
            $0.subject = "Rapport trimestriel – données complètes"
            $0.cc = [address("Ève", "eve@example.fr")]
            $0.html = "<html><body><p>Voilà le rapport.</p></body></html>"
            $0.inReplyTo = ["abc@example.fr"]
            $0.references = ["abc@example.fr"]
            $0.attachments = [
                OutgoingAttachment(filename: "rapport.csv", contentType: "text/csv", bytes: Array("a,b\n1,2\n".utf8))
            ]
        }
        return shapes
    }()

    /// Pieces of text that make headers and bodies hard to write: scripts, emoji, combining marks, quotes,
    /// backslashes, commas, look-alike encoded words, long words, tabs and runs of spaces.
    static let pieces: [String] = [
        "Hello", "world", "Grüße", "Köln", "Ærøskøbing", "Straße", "Привет", "мир", "会議", "の議事録", "안녕하세요",
        "שלום", "مرحبا", "नमस्ते", "🎉", "👩‍👩‍👧", "e\u{301}", "\"", "\\", ",", ";", ":", "(x)", "<y>", "[z]", "@", "=?",
        "?=", "=?utf-8?q?x?=", "_", "=", "%", "'", ".", "-", "--=_", "From", "a\tb", "  ", "\t",
        String(repeating: "x", count: 90), String(repeating: "ü", count: 50), "Re:", "Fwd:",
    ]

    /// Seeded random messages built from `pieces`, for the round trips beside the fixed shapes.
    static func random(count: Int, seed: UInt64) -> [(name: String, message: OutgoingMessage)] {
        var generator = SplitMix(seed: seed)
        func text(_ words: ClosedRange<Int>) -> String {
            (0..<Int.random(in: words, using: &generator)).map { _ in
                pieces.randomElement(using: &generator)!
            }.joined(separator: Bool.random(using: &generator) ? " " : "")
        }
        func name() -> String? { Int.random(in: 0..<4, using: &generator) == 0 ? nil : text(1...6) }
        func mailboxes(_ count: ClosedRange<Int>, _ prefix: String) -> [MailAddress] {
            (0..<Int.random(in: count, using: &generator)).map {
                address(name(), "\(prefix)\($0)@example.com")
            }
        }
        return (0..<count).map { index in
            var message = OutgoingMessage(
                from: address(name(), "from@example.com"),
                to: mailboxes(0...4, "to"),
                cc: mailboxes(0...3, "cc"),
                bcc: mailboxes(0...2, "bcc"),
                replyTo: mailboxes(0...1, "reply"),
                subject: text(0...12),
                inReplyTo: index % 3 == 0 ? ["parent\(index)@example.com"] : [],
                references: (0..<Int.random(in: 0...6, using: &generator)).map { "r\($0).\(index)@example.com" },
                extraHeaders: index % 4 == 0 ? [OutgoingHeader(name: "X-Random", value: text(1...8))] : [],
                text: (0..<Int.random(in: 0...8, using: &generator)).map { _ in text(0...20) }.joined(separator: "\n"),
                html: Bool.random(using: &generator) ? "<p>" + text(1...10) + "</p>" : nil,
                date: date.addingTimeInterval(Double(index) * 86_399),
                messageID: "random\(index)@example.com"
            )
            message.attachments = (0..<Int.random(in: 0...3, using: &generator)).map { number in
                let filename = Int.random(in: 0..<5, using: &generator) == 0 ? nil : text(1...4) + ".bin"
                return OutgoingAttachment(
                    filename: filename?.replacingOccurrences(of: "=?", with: "="),
                    contentType: ["application/octet-stream", "image/png", "text/plain"].randomElement(
                        using: &generator
                    )!,
                    bytes: bytes(Int.random(in: 0...5000, using: &generator), seed: seed &+ UInt64(index * 10 + number))
                )
            }
            return ("random-\(index)", message)
        }
    }

    /// The attachment's bytes, read through its chunk reader.
    static func attachmentBytes(_ attachment: OutgoingAttachment) throws -> [UInt8] {
        var reader = try attachment.open()
        var bytes: [UInt8] = []
        while let chunk = try reader.nextChunk() {
            bytes += chunk
        }
        return bytes
    }

    static func lf(_ text: String) -> String {
        text.replacingOccurrences(of: "\r\n", with: "\n").replacingOccurrences(of: "\r", with: "\n")
    }

    /// What a reader should see of `message` once written: subject and header text trimmed, text with LF line
    /// breaks and a final one, Bcc absent.
    static func expected(_ message: OutgoingMessage, messageID: String) throws -> ComposedView {
        func list(_ addresses: [MailAddress]) -> [[String]] {
            addresses.map {
                [
                    ($0.name ?? "").replacingOccurrences(of: "\t", with: " ").trimmingCharacters(in: .whitespaces),
                    $0.address,
                ]
            }
        }
        func body(_ text: String) -> String {
            let normalized = lf(text)
            return normalized.isEmpty || normalized.hasSuffix("\n") ? normalized : normalized + "\n"
        }
        let subject = message.subject.trimmingCharacters(in: .whitespaces)
        return ComposedView(
            subject: subject.isEmpty ? nil : subject,
            from: list([message.from]),
            to: list(message.to),
            cc: list(message.cc),
            replyTo: list(message.replyTo),
            messageID: messageID,
            inReplyTo: message.inReplyTo,
            references: message.references,
            extra: message.extraHeaders.map { [$0.name, $0.value.trimmingCharacters(in: .whitespaces)] },
            text: body(message.text),
            html: message.html.map(body),
            attachments: try message.attachments.map {
                ComposedAttachment(
                    filename: $0.filename.map { $0.trimmingCharacters(in: .whitespaces) }.flatMap {
                        $0.isEmpty ? nil : $0
                    },
                    type: $0.contentType,
                    data: Data(try attachmentBytes($0)).base64EncodedString()
                )
            },
            date: message.date.timeIntervalSince1970.rounded(.down),
            hasBcc: false
        )
    }

    static let ownHeaders: Set<String> = [
        "date", "from", "reply-to", "to", "cc", "bcc", "subject", "message-id", "in-reply-to", "references",
        "mime-version", "content-type", "content-transfer-encoding", "content-disposition",
    ]

    /// What CofferMIME's parser reads of a message.
    static func view(_ parsed: MIMEMessage) -> ComposedView {
        func list(_ addresses: [MailAddress]) -> [[String]] { addresses.map { [$0.name ?? "", $0.address] } }
        return ComposedView(
            subject: parsed.subject,
            from: list(parsed.from),
            to: list(parsed.to),
            cc: list(parsed.cc),
            replyTo: list(parsed.replyTo),
            messageID: parsed.messageID,
            inReplyTo: parsed.inReplyTo,
            references: parsed.references,
            extra: parsed.headers.filter { !ownHeaders.contains($0.name.lowercased()) }.map {
                [$0.name, $0.value.trimmingCharacters(in: .whitespaces)]
            },
            text: parsed.textBody.map(lf),
            html: parsed.htmlBody.map(lf),
            attachments: parsed.attachments.map {
                ComposedAttachment(
                    filename: $0.filename,
                    type: $0.contentType.mimeType,
                    data: Data($0.body).base64EncodedString()
                )
            },
            date: parsed.date?.timeIntervalSince1970,
            hasBcc: parsed.header("Bcc") != nil
        )
    }

    /// The spec compose_oracle.py turns into a Python-written message of the same shape.
    static func spec(_ name: String, _ message: OutgoingMessage) throws -> ComposeSpec {
        func list(_ addresses: [MailAddress]) -> [[String]] { addresses.map { [$0.name ?? "", $0.address] } }
        return ComposeSpec(
            name: name,
            from: [message.from.name ?? "", message.from.address],
            to: list(message.to),
            cc: list(message.cc),
            replyTo: list(message.replyTo),
            subject: message.subject,
            inReplyTo: message.inReplyTo,
            references: message.references,
            extra: message.extraHeaders.map { [$0.name, $0.value] },
            text: message.text,
            html: message.html,
            attachments: try message.attachments.map {
                ComposedAttachment(
                    filename: $0.filename,
                    type: $0.contentType,
                    data: Data(try attachmentBytes($0)).base64EncodedString()
                )
            },
            date: message.date.timeIntervalSince1970,
            messageID: message.messageID ?? "\(name)@example.com"
        )
    }

    /// A display name with runs of spaces as one: a long name is split into encoded words after a space, and
    /// Python's and CofferMIME's address parsers keep the whitespace between encoded words that RFC 2047 drops
    /// (`longUnicodeNameDecodesExactlyUnderRFC2047` checks the exact name).
    static func collapsed(_ addresses: [[String]]) -> [[String]] {
        addresses.map { pair in
            [pair[0].split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")] + pair.dropFirst()
        }
    }

    /// The view with the spaces of display names removed: for names that may be cut inside a word (see `collapsed`).
    static func withoutNameSpaces(_ view: ComposedView) -> ComposedView {
        var result = view
        for list in [\ComposedView.from, \.to, \.cc, \.replyTo] {
            result[keyPath: list] = result[keyPath: list].map { pair in
                [String(String.UnicodeScalarView(pair[0].unicodeScalars.filter { $0 != " " }))] + pair.dropFirst()
            }
        }
        return result
    }

    /// Differences between two views, one line per field, for test failure messages.
    static func differences(_ expected: ComposedView, _ seen: ComposedView) -> [String] {
        var left = expected
        var right = seen
        for view in [\ComposedView.from, \.to, \.cc, \.replyTo] {
            left[keyPath: view] = collapsed(left[keyPath: view])
            right[keyPath: view] = collapsed(right[keyPath: view])
        }
        var result: [String] = []
        let mirrorLeft = Mirror(reflecting: left).children
        let mirrorRight = Array(Mirror(reflecting: right).children)
        if left.attachments.count == right.attachments.count {
            for (index, (a, b)) in zip(left.attachments, right.attachments).enumerated() where a != b {
                let data = a.data == b.data ? "same data" : "data \(a.data.count) / \(b.data.count) base64 characters"
                result.append(
                    "attachment \(index): expected \(a.filename ?? "-") \(a.type) / got \(b.filename ?? "-") \(b.type), \(data)"
                )
            }
        }
        for (index, child) in mirrorLeft.enumerated() where child.label != "attachments" || result.isEmpty {
            let a = String(describing: child.value)
            let b = String(describing: mirrorRight[index].value)
            if a != b {
                result.append("\(child.label ?? "?"): expected \(a.prefix(400)) / got \(b.prefix(400))")
            }
        }
        return result
    }
}
