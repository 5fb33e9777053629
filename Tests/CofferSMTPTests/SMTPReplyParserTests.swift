import Testing

@testable import CofferSMTP

@Suite struct SMTPReplyParserTests {
    private func replies(_ text: String, limits: SMTPReplyParser.Limits = .init()) throws(SMTPError) -> [SMTPReply] {
        var parser = SMTPReplyParser(limits: limits)
        parser.feed(Array(text.utf8))
        var out: [SMTPReply] = []
        while let reply = try parser.next() { out.append(reply) }
        return out
    }

    @Test func aMultiLineEHLOReplyIsOneReplyWithEveryLine() throws {
        let parsed = try replies("250-mail.coffer.test\r\n250-SIZE 1000\r\n250-AUTH PLAIN LOGIN\r\n250 8BITMIME\r\n")
        #expect(parsed.count == 1)
        #expect(parsed[0].code == 250)
        #expect(parsed[0].lines == ["mail.coffer.test", "SIZE 1000", "AUTH PLAIN LOGIN", "8BITMIME"])
    }

    @Test func anEnhancedStatusCodeIsSplitOffTheText() throws {
        let parsed = try replies("550-5.1.1 <x@y>: unknown\r\n550 5.1.1 second line\r\n")
        #expect(parsed[0].enhancedCode == "5.1.1")
        #expect(parsed[0].lines == ["<x@y>: unknown", "second line"])
        let server = SMTPServerReply(parsed[0])
        #expect(server.description == "550 5.1.1 <x@y>: unknown second line")
    }

    @Test func anEnhancedCodeOfAnotherClassIsText() throws {
        let parsed = try replies("250 5.1.1 odd\r\n")
        #expect(parsed[0].enhancedCode == nil)
        #expect(parsed[0].lines == ["5.1.1 odd"])
    }

    @Test func aReplyCodeAloneIsAReply() throws {
        let parsed = try replies("250\r\n")
        #expect(parsed == [SMTPReply(code: 250, enhancedCode: nil, lines: [""])])
    }

    @Test func repliesSplitAcrossReadsAreAssembled() throws {
        var parser = SMTPReplyParser()
        let text = Array("220 hello\r\n250-a\r\n250 b\r\n".utf8)
        var out: [SMTPReply] = []
        for byte in text {
            parser.feed([byte])
            while let reply = try parser.next() { out.append(reply) }
        }
        #expect(out.map(\.code) == [220, 250])
        #expect(out[1].lines == ["a", "b"])
    }

    @Test(arguments: [
        ("250 ok\n", "bare LF"),
        ("250 ok\rx\r\n", "bare CR"),
        ("25x ok\r\n", "not a code"),
        ("650 ok\r\n", "first digit out of range"),
        ("2\r\n", "too short"),
        ("250_ok\r\n", "bad separator"),
        ("250-a\r\n251 b\r\n", "codes differ"),
        ("250 a\u{0}b\r\n", "NUL"),
    ])
    func malformedRepliesAreTypedErrors(_ text: String, _ why: String) {
        #expect(throws: SMTPError.self, "\(why)") { try replies(text) }
        do {
            _ = try replies(text)
        } catch {
            guard case .malformedReply = error else {
                Issue.record("\(why): \(error)")
                return
            }
        }
    }

    @Test func aLineLongerThanTheLimitFailsBeforeItsEnd() {
        var parser = SMTPReplyParser(limits: .init(maxLineLength: 64, maxLines: 4))
        parser.feed(Array(repeating: UInt8(ascii: "2"), count: 3) + Array(repeating: UInt8(ascii: "a"), count: 100))
        #expect(throws: SMTPError.replyLineTooLong(limit: 64)) { _ = try parser.next() }
    }

    @Test func aReplyWithTooManyLinesFails() {
        let text = String(repeating: "250-x\r\n", count: 10) + "250 y\r\n"
        #expect(throws: SMTPError.tooManyReplyLines(limit: 4)) {
            try replies(text, limits: .init(maxLineLength: 64, maxLines: 4))
        }
    }

    @Test func randomBytesGiveRepliesOrATypedErrorAndNeverMoreThanTheLimits() {
        // Bytes from an alphabet rich in what the grammar cares about, fed in random pieces.
        let alphabet = Array("2345019 -\r\n.\0x".utf8)
        var generator = SystemRandomNumberGenerator()
        let limits = SMTPReplyParser.Limits(maxLineLength: 32, maxLines: 3)
        for _ in 0..<2000 {
            var parser = SMTPReplyParser(limits: limits)
            let input = (0..<Int.random(in: 0..<200, using: &generator)).map { _ in
                alphabet.randomElement(using: &generator)!
            }
            var offset = 0
            feeding: while offset < input.count {
                let end = min(input.count, offset + Int.random(in: 1...16, using: &generator))
                parser.feed(input[offset..<end])
                offset = end
                do {
                    while let reply = try parser.next() {
                        #expect((200...559).contains(reply.code))
                        #expect(reply.lines.count <= limits.maxLines)
                        #expect(reply.lines.allSatisfy { !$0.utf8.contains(0x0D) && !$0.utf8.contains(0x0A) })
                    }
                } catch {
                    break feeding
                }
                #expect(parser.bufferedByteCount <= limits.maxLineLength * (limits.maxLines + 1) + 16)
            }
        }
    }

    @Test func serverTextIsSanitizedAndBounded() {
        let reply = SMTPServerReply(code: 550, text: "bad\u{1B}[31m\u{7}" + String(repeating: "z", count: 1000))
        #expect(!reply.text.contains("\u{1B}"))
        #expect(!reply.text.contains("\u{7}"))
        #expect(reply.text.count == 300)
    }
}
