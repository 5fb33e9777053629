import Testing

@testable import CofferSMTP

@Suite struct SMTPDataEncoderTests {
    private func framed(_ chunks: [String]) -> String {
        var encoder = SMTPDataEncoder()
        var out: [UInt8] = []
        for chunk in chunks { encoder.encode(Array(chunk.utf8), into: &out) }
        encoder.finish(into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    @Test(arguments: [
        ("a\r\nb\r\n", "a\r\nb\r\n.\r\n"),
        ("a\nb", "a\r\nb\r\n.\r\n"),
        ("a\rb\r\n", "a\r\nb\r\n.\r\n"),
        (".hidden\r\n..two\r\n.\r\n", "..hidden\r\n...two\r\n..\r\n.\r\n"),
        ("x\n.\ny", "x\r\n..\r\ny\r\n.\r\n"),
        ("", ".\r\n"),
        ("a.b\r\n", "a.b\r\n.\r\n"),
        ("\n.\r\nsmuggled", "\r\n..\r\nsmuggled\r\n.\r\n"),
        ("\r.\r\nsmuggled", "\r\n..\r\nsmuggled\r\n.\r\n"),
    ])
    func lineEndsBecomeCRLFAndLeadingDotsAreStuffed(_ input: String, _ expected: String) {
        #expect(framed([input]) == expected)
    }

    @Test func stateCarriesAcrossChunkBoundaries() {
        // A CRLF split between chunks stays one line end; a dot at the start of the next chunk is stuffed.
        #expect(framed(["a\r", "\nb\r\n", ".c", "\r", "\n", "."]) == "a\r\nb\r\n..c\r\n..\r\n.\r\n")
        for split in 0...12 {
            let text = "x\r\n.y\n..z\r"
            let bytes = Array(text.utf8)
            let cut = min(split, bytes.count)
            let parts = [
                String(decoding: bytes[..<cut], as: UTF8.self), String(decoding: bytes[cut...], as: UTF8.self),
            ]
            #expect(framed(parts) == framed([text]), "split at \(split)")
        }
    }

    /// RFC 5321 4.5.2 written the plain way, one byte at a time: the oracle for the encoder's run-copying loop.
    private func reference(_ input: [UInt8]) -> [UInt8] {
        var lines: [[UInt8]] = [[]]
        var index = 0
        while index < input.count {
            switch input[index] {
            case 0x0D:
                lines.append([])
                if index + 1 < input.count, input[index + 1] == 0x0A { index += 1 }
            case 0x0A: lines.append([])
            default: lines[lines.count - 1].append(input[index])
            }
            index += 1
        }
        if lines.last == [] { lines.removeLast() }
        var out: [UInt8] = []
        for line in lines { out += (line.first == 0x2E ? [0x2E] : []) + line + [0x0D, 0x0A] }
        return out + [0x2E, 0x0D, 0x0A]
    }

    @Test func randomInputInRandomPiecesMatchesTheByteByByteReference() {
        var generator = SystemRandomNumberGenerator()
        let alphabet: [UInt8] = [0x0D, 0x0A, 0x2E, 0x61, 0x62]
        for _ in 0..<2000 {
            let input = (0..<Int.random(in: 0..<60, using: &generator)).map { _ in
                alphabet.randomElement(using: &generator)!
            }
            var encoder = SMTPDataEncoder()
            var out: [UInt8] = []
            var offset = 0
            while offset < input.count {
                let end = min(input.count, offset + Int.random(in: 1...8, using: &generator))
                encoder.encode(input[offset..<end], into: &out)
                offset = end
            }
            encoder.finish(into: &out)
            #expect(out == reference(input), "input \(input)")
        }
    }

    @Test func noInputEndsTheDataEarly() {
        // Whatever the bytes, the framed output holds exactly one CRLF.CRLF, at its end.
        var generator = SystemRandomNumberGenerator()
        let alphabet: [UInt8] = [0x0D, 0x0A, 0x2E, 0x61]
        for _ in 0..<500 {
            let input = (0..<Int.random(in: 0..<40, using: &generator)).map { _ in
                alphabet.randomElement(using: &generator)!
            }
            var encoder = SMTPDataEncoder()
            var out: [UInt8] = []
            encoder.encode(input, into: &out)
            encoder.finish(into: &out)
            let terminator: [UInt8] = [0x0D, 0x0A, 0x2E, 0x0D, 0x0A]
            let withStart = [0x0D, 0x0A] + out
            var found: [Int] = []
            for index in 0...(withStart.count - terminator.count)
            where Array(withStart[index..<index + terminator.count]) == terminator {
                found.append(index)
            }
            #expect(found == [withStart.count - terminator.count], "input \(input)")
            // No bare CR or LF.
            for index in out.indices where out[index] == 0x0A { #expect(index > 0 && out[index - 1] == 0x0D) }
            for index in out.indices where out[index] == 0x0D {
                #expect(index + 1 < out.count && out[index + 1] == 0x0A)
            }
        }
    }
}
