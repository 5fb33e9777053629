import CofferSampleMail
import Foundation
import Testing

@testable import CofferMIME

private let alice = MailAddress(name: "Alice", address: "alice@example.com")
private let bob = MailAddress(name: "Bob", address: "bob@example.org")

private func message(_ build: (inout OutgoingMessage) -> Void = { _ in }) -> OutgoingMessage {
    var message = OutgoingMessage(
        from: alice,
        to: [bob],
        subject: "Hello",
        text: "Hi Bob\n",
        date: ComposeShapes.date,
        messageID: "fixed@example.com"
    )
    build(&message)
    return message
}

private func written(_ message: OutgoingMessage) throws -> [UInt8] {
    try MessageWriter.bytes(of: message).bytes
}

/// The message from a writer seeded with `seed`, read chunk by chunk; also the largest chunk.
private func seeded(_ message: OutgoingMessage, seed: UInt64 = 42) throws -> (bytes: [UInt8], largest: Int) {
    var generator = SplitMix(seed: seed)
    var writer = try MessageWriter(message, random: &generator)
    var bytes: [UInt8] = []
    var largest = 0
    while let chunk = try writer.nextChunk() {
        largest = max(largest, chunk.count)
        bytes += chunk
    }
    return (bytes, largest)
}

private func text(_ message: OutgoingMessage) throws -> String {
    String(decoding: try written(message), as: UTF8.self)
}

/// The header section (up to the first blank line), unfolded into one string per field.
private func headerLines(_ bytes: [UInt8]) -> [String] {
    let text = String(decoding: bytes, as: UTF8.self)
    let head = text.components(separatedBy: "\r\n\r\n")[0]
    return head.replacingOccurrences(of: "\r\n ", with: " ").components(separatedBy: "\r\n")
}

/// Checks the output's shape: CRLF only, ASCII only, lines within 78 columns unless the line is one token that
/// cannot be folded, a final CRLF.
private func checkShape(_ bytes: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(bytes.allSatisfy { $0 < 0x80 }, "8-bit byte", sourceLocation: sourceLocation)
    var lineStart = 0
    for index in bytes.indices {
        if bytes[index] == 0x0A {
            #expect(index > 0 && bytes[index - 1] == 0x0D, "bare LF at \(index)", sourceLocation: sourceLocation)
        }
        guard bytes[index] == 0x0D else {
            continue
        }
        #expect(
            index + 1 < bytes.count && bytes[index + 1] == 0x0A,
            "bare CR at \(index)",
            sourceLocation: sourceLocation
        )
        let line = String(decoding: bytes[lineStart..<index], as: UTF8.self)
        let oneToken = !line.dropFirst().contains(" ")
        #expect(line.count <= 78 || oneToken, "line over 78: \(line)", sourceLocation: sourceLocation)
        lineStart = index + 2
    }
    #expect(bytes.suffix(2) == [0x0D, 0x0A], "the message does not end with CRLF", sourceLocation: sourceLocation)
}

@Suite struct MessageWriterTests {
    @Test func simpleMessageIsSevenBitTextWithTheUsualFields() throws {
        let output = try text(message())
        #expect(
            output == """
                Date: Wed, 26 Nov 2025 00:09:55 +0000\r
                From: Alice <alice@example.com>\r
                To: Bob <bob@example.org>\r
                Subject: Hello\r
                Message-ID: <fixed@example.com>\r
                MIME-Version: 1.0\r
                Content-Type: text/plain; charset=utf-8\r
                Content-Transfer-Encoding: 7bit\r
                \r
                Hi Bob\r

                """
        )
    }

    @Test(arguments: [
        (0.0, "Thu, 1 Jan 1970 00:00:00 +0000"),
        (951_782_400.0, "Tue, 29 Feb 2000 00:00:00 +0000"),
        (1_764_115_795.9, "Wed, 26 Nov 2025 00:09:55 +0000"),
        (-1.0, "Wed, 31 Dec 1969 23:59:59 +0000"),
        (4_102_444_799.0, "Thu, 31 Dec 2099 23:59:59 +0000"),
    ])
    func datesAreRFC5322InUTC(seconds: Double, expected: String) {
        #expect(MessageWriter.dateText(Date(timeIntervalSince1970: seconds)) == expected)
    }

    @Test func generatedMessageIDIsRandomOnTheSenderDomain() throws {
        var unset = message()
        unset.messageID = nil
        let first = try MessageWriter(unset).messageID
        let second = try MessageWriter(unset).messageID
        #expect(first != second)
        for id in [first, second] {
            #expect(id.hasSuffix("@example.com"))
            let local = id.dropLast("@example.com".count)
            #expect(local.count == 26)
            #expect(local.allSatisfy { "abcdefghijklmnopqrstuvwxyz234567".contains($0) })
        }
        #expect(try text(unset).contains("Message-ID: <\(first.prefix(0))"))
    }

    @Test func bccIsOnlyInTheEnvelope() throws {
        let result = try MessageWriter.bytes(
            of: message {
                $0.cc = [MailAddress(name: nil, address: "carol@example.net")]
                $0.bcc = [
                    MailAddress(name: "Secret", address: "hidden@example.net"),
                    MailAddress(name: nil, address: "bob@example.org"),
                ]
            }
        )
        let output = String(decoding: result.bytes, as: UTF8.self)
        #expect(!output.lowercased().contains("bcc"))
        #expect(!output.contains("hidden"))
        #expect(!output.contains("Secret"))
        #expect(result.envelope.sender == "alice@example.com")
        #expect(result.envelope.recipients == ["bob@example.org", "carol@example.net", "hidden@example.net"])
    }

    @Test(arguments: [
        // Mostly ASCII: Q is shorter (21 against 24 characters of payload).
        ("Jalapeño-Rezepte", "Subject: =?utf-8?q?Jalape=C3=B1o-Rezepte?="),
        // Two of five letters need six characters each in Q: B is shorter.
        ("Grüße", "Subject: =?utf-8?b?R3LDvMOfZQ==?="),
        ("Привет", "Subject: =?utf-8?b?0J/RgNC40LLQtdGC?="),
        // ASCII words stay plain; words needing encoding next to each other share one encoded word.
        ("Re: Grüße aus Köln", "Subject: Re: =?utf-8?b?R3LDvMOfZQ==?= aus =?utf-8?b?S8O2bG4=?="),
        ("Re: Grüße Köln", "Subject: Re: =?utf-8?b?R3LDvMOfZSBLw7Zsbg==?="),
    ])
    func nonASCIISubjectUsesTheShorterEncoding(subject: String, expected: String) throws {
        let lines = headerLines(try written(message { $0.subject = subject }))
        #expect(lines.contains(expected))
        #expect(try MIMEParser.parse(try written(message { $0.subject = subject })).subject == subject)
    }

    @Test func longUnicodeNameDecodesExactlyUnderRFC2047() throws {
        let name = "Διονύσιος Σολωμός Παπαδόπουλος Αλεξανδρόπουλος Κωνσταντινίδης"
        let output = try written(message { $0.to = [MailAddress(name: name, address: "greek@example.gr")] })
        let to = try #require(headerLines(output).first { $0.hasPrefix("To: ") })
        let phrase = try #require(to.dropFirst(4).components(separatedBy: " <").first)
        #expect(phrase.components(separatedBy: "?= =?").count > 1)
        // Each word but the last ends in an encoded space, so dropping the whitespace between them gives the name.
        #expect(HeaderDecoding.decodeUnstructured(phrase) == name)
    }

    @Test func longHeadersFoldOutsideEncodedWords() throws {
        for (name, shape) in ComposeShapes.all {
            let bytes = try written(shape)
            let head = String(decoding: bytes, as: UTF8.self).components(separatedBy: "\r\n\r\n")[0]
            for line in head.components(separatedBy: "\r\n") {
                // Each encoded word is whole on its line and at most 75 characters.
                var rest = Substring(line)
                while let start = rest.range(of: "=?utf-8?") {
                    let tail = rest[start.lowerBound...]
                    let end = try #require(
                        tail.range(of: "?=", range: tail.index(tail.startIndex, offsetBy: 10)..<tail.endIndex),
                        "\(name): split encoded word in \(line)"
                    )
                    #expect(tail.distance(from: tail.startIndex, to: end.upperBound) <= 75, "\(name): \(line)")
                    rest = tail[end.upperBound...]
                }
                let hasLongToken = line.split(separator: " ").contains { $0.count > 76 }
                #expect(line.count <= 78 || hasLongToken, "\(name): \(line)")
            }
        }
    }

    @Test func everyShapeHasCRLFLinesAndASCIIOnly() throws {
        for (_, shape) in ComposeShapes.all {
            checkShape(try written(shape))
        }
    }

    @Test func parserReadsBackEveryShape() throws {
        for (name, shape) in ComposeShapes.all {
            let result = try MessageWriter.bytes(of: shape)
            let parsed = try MIMEParser.parse(result.bytes)
            #expect(parsed.defects.isEmpty, "\(name): \(parsed.defects)")
            let expected = try ComposeShapes.expected(shape, messageID: result.messageID)
            let differences = ComposeShapes.differences(expected, ComposeShapes.view(parsed))
            #expect(differences.isEmpty, "\(name):\n\(differences.joined(separator: "\n"))")
        }
    }

    @Test func displayNamesAreAtomsQuotedOrEncoded() throws {
        let lines = headerLines(
            try written(
                message {
                    $0.to = [
                        MailAddress(name: "Bob Smith", address: "a@example.com"),
                        MailAddress(name: "Smith, Bob", address: "b@example.com"),
                        MailAddress(name: "Say \"hi\"", address: "c@example.com"),
                        MailAddress(name: "Jörg", address: "d@example.com"),
                        MailAddress(name: "  ", address: "e@example.com"),
                    ]
                }
            )
        )
        #expect(
            lines.contains(
                "To: Bob Smith <a@example.com>, \"Smith, Bob\" <b@example.com>, \"Say \\\"hi\\\"\" <c@example.com>, =?utf-8?b?SsO2cmc=?= <d@example.com>, e@example.com"
            )
        )
    }

    @Test func textBodyIsQuotedPrintableWhenNeeded() throws {
        let long = String(repeating: "x", count: 100)
        let output = try text(
            message { $0.text = "trailing \nFrom here\na=b\nünï\n\(long)\n--=_x\n" }
        )
        let body = output.components(separatedBy: "\r\n\r\n")[1]
        #expect(output.contains("Content-Transfer-Encoding: quoted-printable"))
        #expect(
            body
                == "trailing=20\r\n=46rom here\r\na=3Db\r\n=C3=BCn=C3=AF\r\n"
                + String(repeating: "x", count: 75) + "=\r\n" + String(repeating: "x", count: 25) + "\r\n--=3D_x\r\n"
        )
    }

    @Test func quotedPrintableNeverSplitsAnEscape() throws {
        for offset in 0..<4 {
            let line = String(repeating: "a", count: 70 + offset) + String(repeating: "é", count: 10)
            let output = try text(message { $0.text = line })
            let body = output.components(separatedBy: "\r\n\r\n")[1]
            for encoded in body.components(separatedBy: "\r\n") {
                #expect(encoded.count <= 76)
                #expect(!encoded.hasSuffix("=C") && !encoded.hasSuffix("=C3=") || encoded.hasSuffix("="))
                #expect(
                    encoded.range(of: #"=[0-9A-F]?$"#, options: .regularExpression) == nil || encoded.hasSuffix("=")
                )
            }
            let parsed = try MIMEParser.parse(Array(output.utf8))
            #expect(parsed.textBody == line + "\r\n")
        }
    }

    @Test func attachmentsAreBase64InSeventySixColumns() throws {
        let data = ComposeShapes.bytes(1000, seed: 9)
        let output = try text(message { $0.attachments = [OutgoingAttachment(filename: "a.bin", bytes: data)] })
        let part = try #require(output.components(separatedBy: "Content-Transfer-Encoding: base64\r\n\r\n").last)
        let lines = part.components(separatedBy: "\r\n").prefix { !$0.hasPrefix("--") && !$0.isEmpty }
        #expect(lines.count == (1000 + 56) / 57)
        #expect(lines.dropLast().allSatisfy { $0.count == 76 })
        #expect(Data(base64Encoded: lines.joined()) == Data(data))
    }

    @Test func longAndUnicodeFilenamesUseRFC2231() throws {
        let output = try text(
            message {
                $0.attachments = [
                    OutgoingAttachment(filename: "März.pdf", contentType: "application/pdf", bytes: [1]),
                    OutgoingAttachment(filename: String(repeating: "n", count: 90) + ".txt", bytes: [2]),
                    OutgoingAttachment(filename: "plain name.txt", bytes: [3]),
                ]
            }
        )
        #expect(output.contains("Content-Disposition: attachment; filename*=utf-8''M%C3%A4rz.pdf\r\n"))
        #expect(output.contains("Content-Type: application/pdf; name*=utf-8''M%C3%A4rz.pdf\r\n"))
        #expect(output.contains("Content-Disposition: attachment;\r\n filename*0*=utf-8''nnnn"))
        #expect(output.contains(";\r\n filename*1*=nnn"))
        #expect(output.contains("Content-Disposition: attachment; filename=\"plain name.txt\"\r\n"))
        let parsed = try MIMEParser.parse(Array(output.utf8))
        #expect(
            parsed.attachments.map(\.filename) == [
                "März.pdf", String(repeating: "n", count: 90) + ".txt", "plain name.txt",
            ]
        )
    }

    @Test func boundariesNeverOccurInTheContent() throws {
        // Bodies full of lines that look like delimiters: none may end a part early.
        let hostile = (0..<50).map { "--=_\(String(repeating: "a", count: $0))\n--\($0)--" }.joined(separator: "\n")
        let shape = message {
            $0.text = hostile
            $0.html = hostile
            $0.attachments = [OutgoingAttachment(filename: "x", contentType: "text/plain", bytes: Array(hostile.utf8))]
        }
        let output = try text(shape)
        let parsed = try MIMEParser.parse(Array(output.utf8))
        #expect(parsed.defects.isEmpty)
        #expect(parsed.root.contentType.mimeType == "multipart/mixed")
        #expect(parsed.root.children.count == 2)
        #expect(parsed.root.children[0].children.count == 2)
        #expect(parsed.textBody.map(ComposeShapes.lf) == hostile + "\n")
        #expect(parsed.attachments.first?.body == Array(hostile.utf8))
        let boundaries = parsed.root.allParts.compactMap { $0.contentType.parameters["boundary"] }
        #expect(boundaries.count == 2 && boundaries[0] != boundaries[1])
        for boundary in boundaries {
            #expect(boundary.hasPrefix("=_") && boundary.count == 26)
            let lines = output.components(separatedBy: "\r\n")
            #expect(lines.filter { $0 == "--" + boundary + "--" }.count == 1)
        }
    }

    @Test func streamingKeepsChunksBoundedAndMatchesTheWhole() throws {
        struct Counting: AttachmentChunkReader {
            var remaining: Int
            let size: Int
            var generator = SplitMix(seed: 5)
            mutating func nextChunk() -> [UInt8]? {
                guard remaining > 0 else {
                    return nil
                }
                let count = min(size, remaining)
                remaining -= count
                return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
            }
        }
        // 3 MB from readers handing out 1 byte, 1000 bytes and 1 MB at a time.
        for size in [1, 1000, 1 << 20] {
            let total = size == 1 ? 20_000 : 3 << 20
            let shape = message {
                $0.attachments = [
                    OutgoingAttachment(filename: "big.bin") { Counting(remaining: total, size: size) }
                ]
            }
            let (streamed, largest) = try seeded(shape)
            #expect(largest <= MessageWriter.chunkSize + 4096)
            // The same bytes when the reader hands out everything at once.
            let whole = message {
                $0.attachments = [
                    OutgoingAttachment(filename: "big.bin") { Counting(remaining: total, size: total) }
                ]
            }
            #expect(streamed == (try seeded(whole).bytes))
            let parsed = try MIMEParser.parse(streamed)
            var expected = Counting(remaining: total, size: total)
            #expect(parsed.attachments.first?.body == expected.nextChunk())
        }
    }

    @Test func readersArePulledOnlyAsTheOutputIsAskedFor() throws {
        /// Counts the bytes handed out; the test is single-threaded, the writer never shares it.
        final class Tally: @unchecked Sendable {
            var opened = 0
            var handedOut = 0
        }
        struct Tallied: AttachmentChunkReader {
            let tally: Tally
            var remaining = 10 << 20
            mutating func nextChunk() -> [UInt8]? {
                guard remaining > 0 else {
                    return nil
                }
                remaining -= 1000
                tally.handedOut += 1000
                return [UInt8](repeating: 0xA5, count: 1000)
            }
        }
        let first = Tally()
        let second = Tally()
        let shape = message {
            $0.attachments = [
                OutgoingAttachment(filename: "one.bin") {
                    first.opened += 1
                    return Tallied(tally: first)
                },
                OutgoingAttachment(filename: "two.bin") {
                    second.opened += 1
                    return Tallied(tally: second)
                },
            ]
        }
        var writer = try MessageWriter(shape)
        #expect(first.opened == 0 && second.opened == 0)
        var total = try writer.nextChunk()?.count ?? 0
        #expect(first.opened == 1 && second.opened == 0)
        #expect(first.handedOut <= 50_000)
        while let chunk = try writer.nextChunk() {
            total += chunk.count
            // Read no further than the base64 written (57 bytes a 78-byte line) and one reader chunk.
            #expect(first.handedOut + second.handedOut <= (total / 78 + 2) * 57 + 2000)
        }
        #expect(first.opened == 1 && second.opened == 1)
        #expect(first.handedOut >= 10 << 20 && second.handedOut >= 10 << 20)
    }

    @Test func aLongFieldNameStillFoldsItsValue() throws {
        let name = "X-" + String(repeating: "N", count: 74)
        let output = try written(
            message {
                $0.extraHeaders = [OutgoingHeader(name: name, value: "first second Übergröße third")]
            }
        )
        checkShape(output)
        let lines = String(decoding: output, as: UTF8.self).components(separatedBy: "\r\n")
        #expect(lines.contains(name + ":"))
        #expect(lines.allSatisfy { $0.count <= 78 })
        #expect(try MIMEParser.parse(output).header(name)?.value == "first second Übergröße third")
    }

    @Test func hugeHeaderTextIsWrittenAndReadBack() throws {
        // 50,000 words needing encoding in one run (a reply to a hostile subject): every word comes back.
        let subject = Array(repeating: "ü", count: 50_000).joined(separator: " ")
        let name = String(repeating: "é", count: 20_000)
        let output = try written(
            message {
                $0.subject = subject
                $0.to = [MailAddress(name: name, address: "x@example.com")]
            }
        )
        checkShape(output)
        let parsed = try MIMEParser.parse(output)
        #expect(parsed.subject == subject)
        #expect(parsed.to.first?.name?.filter { $0 != " " } == name)
    }

    @Test func sinkReceivesTheSameBytes() throws {
        let shape = try #require(ComposeShapes.all.first { $0.name == "everything" }?.message)
        var collected: [UInt8] = []
        var calls = 0
        let result = try MessageWriter.write(shape) {
            collected += $0
            calls += 1
        }
        #expect(calls >= 1)
        #expect(result.messageID == "everything@example.com")
        #expect(result.envelope.recipients == ["bob@example.org", "eve@example.fr"])
        let parsed = try MIMEParser.parse(collected)
        let expected = try ComposeShapes.expected(shape, messageID: result.messageID)
        #expect(ComposeShapes.differences(expected, ComposeShapes.view(parsed)).isEmpty)
    }

    @Test func unreadableAttachmentIsATypedError() throws {
        struct Broken: Error, CustomStringConvertible {
            var description: String { "disk gone" }
        }
        struct Failing: AttachmentChunkReader {
            mutating func nextChunk() throws -> [UInt8]? { throw Broken() }
        }
        let failingRead = message { $0.attachments = [OutgoingAttachment(filename: "x") { Failing() }] }
        #expect(throws: ComposeError.attachmentUnreadable(index: 1, reason: "disk gone")) { try written(failingRead) }
        let failingOpen = message {
            $0.attachments = [
                OutgoingAttachment(filename: "a", bytes: [1]), OutgoingAttachment(filename: "b") { throw Broken() },
            ]
        }
        #expect(throws: ComposeError.attachmentUnreadable(index: 2, reason: "disk gone")) { try written(failingOpen) }
    }

    @Test func seededWriterIsDeterministic() throws {
        let shape = try #require(ComposeShapes.all.first { $0.name == "everything" }?.message)
        #expect(try seeded(shape).bytes == seeded(shape).bytes)
        #expect(try seeded(shape, seed: 1).bytes != seeded(shape, seed: 2).bytes)
    }
}
