import Testing

@testable import CofferIMAP

struct EncodingCase: Sendable, CustomTestStringConvertible {
    var argument: IMAPArgument
    var synchronising: [String]
    var literalPlus: [String]
    var testDescription: String { synchronising.joined(separator: "|") }
}

let encodingCases: [EncodingCase] = [
    .init(argument: .string("INBOX"), synchronising: ["C1 X INBOX\r\n"], literalPlus: ["C1 X INBOX\r\n"]),
    .init(argument: .string("a]b"), synchronising: ["C1 X a]b\r\n"], literalPlus: ["C1 X a]b\r\n"]),
    .init(argument: .string(""), synchronising: ["C1 X \"\"\r\n"], literalPlus: ["C1 X \"\"\r\n"]),
    .init(
        argument: .string("Sent Items"),
        synchronising: ["C1 X \"Sent Items\"\r\n"],
        literalPlus: ["C1 X \"Sent Items\"\r\n"]
    ),
    .init(
        argument: .string("a\"b\\c"),
        synchronising: ["C1 X \"a\\\"b\\\\c\"\r\n"],
        literalPlus: ["C1 X \"a\\\"b\\\\c\"\r\n"]
    ),
    .init(argument: .string("50%*"), synchronising: ["C1 X \"50%*\"\r\n"], literalPlus: ["C1 X \"50%*\"\r\n"]),
    .init(
        argument: .string("a\r\nb"),
        synchronising: ["C1 X {4}\r\n", "a\r\nb\r\n"],
        literalPlus: ["C1 X {4+}\r\na\r\nb\r\n"]
    ),
    .init(
        argument: .string("Grüße"),
        synchronising: ["C1 X {7}\r\n", "Grüße\r\n"],
        literalPlus: ["C1 X {7+}\r\nGrüße\r\n"]
    ),
    .init(
        argument: .literal(Array("pw".utf8)),
        synchronising: ["C1 X {2}\r\n", "pw\r\n"],
        literalPlus: ["C1 X {2+}\r\npw\r\n"]
    ),
    .init(
        argument: .list([.atom("FLAGS"), .atom("BODY.PEEK[]")]),
        synchronising: ["C1 X (FLAGS BODY.PEEK[])\r\n"],
        literalPlus: ["C1 X (FLAGS BODY.PEEK[])\r\n"]
    ),
    .init(
        argument: .list([.atom("/private/x"), .literal(Array("v".utf8))]),
        synchronising: ["C1 X (/private/x {1}\r\n", "v)\r\n"],
        literalPlus: ["C1 X (/private/x {1+}\r\nv)\r\n"]
    ),
]

@Suite struct IMAPCommandEncoderTests {
    @Test(arguments: encodingCases)
    func choosesAtomQuotedOrLiteral(_ test: EncodingCase) throws {
        var plain = IMAPCommandEncoder()
        let encoded = try plain.encode(IMAPCommand("X", [test.argument]))
        #expect(encoded.parts.map { String(decoding: $0, as: UTF8.self) } == test.synchronising)
        var plus = IMAPCommandEncoder(literalPlus: true)
        let encodedPlus = try plus.encode(IMAPCommand("X", [test.argument]))
        #expect(encodedPlus.parts.map { String(decoding: $0, as: UTF8.self) } == test.literalPlus)
    }

    @Test func tagsIncrease() throws {
        var encoder = IMAPCommandEncoder(tagPrefix: "t")
        #expect(try encoder.encode(IMAPCommand("NOOP")).tag == "t1")
        #expect(try encoder.encode(IMAPCommand("NOOP")).tag == "t2")
        #expect(try encoder.encode(IMAPCommand("NOOP")).parts == [Array("t3 NOOP\r\n".utf8)])
    }

    @Test func aLongStringIsSentAsALiteral() throws {
        var encoder = IMAPCommandEncoder()
        let long = String(repeating: "a b", count: 400)
        let encoded = try encoder.encode(IMAPCommand("X", [.string(long)]))
        #expect(encoded.parts.count == 2)
        #expect(encoded.parts[0] == Array("C1 X {1200}\r\n".utf8))
    }

    @Test(arguments: [
        IMAPArgument.atom("a b"), .atom("a\r\nC2 LOGOUT"), .atom(""), .string([0x61, 0x00]), .literal([0x00]),
        .list([.atom("x\n")]),
    ])
    func refusesInjectionAndNUL(_ argument: IMAPArgument) {
        var encoder = IMAPCommandEncoder()
        #expect(throws: IMAPError.self) { try encoder.encode(IMAPCommand("X", [argument])) }
    }

    @Test func encodedQuotedAndLiteralStringsParseBackToTheSameBytes() throws {
        // Round trip through the response parser: a METADATA value is an nstring (quoted or literal).
        for text in ["with space", "q\"uote\\", "", "line\r\nbreak", "ünïcode", "50%"] {
            var encoder = IMAPCommandEncoder(literalPlus: true)
            let encoded = try encoder.encode(IMAPCommand("X", [.string(text)]))
            let argument = Array(encoded.parts[0].dropFirst("C1 X ".utf8.count).dropLast(2))
            let wire = Array("* METADATA INBOX (/private/x ".utf8) + unplus(argument) + Array(")\r\n".utf8)
            var parser = IMAPResponseParser()
            parser.feed(wire)
            let entry = MetadataEntry(name: "/private/x", value: Array(text.utf8))
            #expect(try parser.next() == .response(.untagged(.metadata(mailbox: "INBOX", entries: [entry]))))
        }
    }

    /// `{n+}` → `{n}` (the response grammar has only synchronising literals).
    private func unplus(_ bytes: [UInt8]) -> [UInt8] {
        guard bytes.first == UInt8(ascii: "{"), let plus = bytes.firstIndex(of: UInt8(ascii: "+")) else { return bytes }
        var out = bytes
        out.remove(at: plus)
        return out
    }
}
