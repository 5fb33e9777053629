import Foundation
import Testing

@testable import CofferPush

/// The push's JSON is written by hand (it runs for every push); these compare it with what `JSONEncoder` wrote before,
/// byte for byte, on every field combination and on text that needs escaping.
@Suite("Push message JSON, byte for byte as JSONEncoder wrote it")
struct PushMessageJSONTests {
    /// The old encoding: `JSONEncoder` with sorted keys and unescaped slashes.
    static func oracle(_ message: PushMessage) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array(try encoder.encode(message))
    }

    /// Text with every C0 control, DEL, quotes, backslashes, slashes, line and paragraph separators, a bidi override,
    /// combining marks, emoji and CJK.
    static let texts: [String] = [
        "",
        "Quarterly figures, draft 7",
        "Bench Sender <sender@example.org>",
        String((0..<0x20).map { Character(Unicode.Scalar(UInt8($0))) }) + "\u{7F}",
        #"a "quoted" \back\slash\ and /slash/ </script>"#,
        "line\u{2028}para\u{2029}rlo\u{202E}zw\u{200B}bom\u{FEFF}",
        "e\u{301}\u{308} 👩‍👩‍👧 日本語のメール Ünïcödé",
        "INBOX/Archive/2026",
    ]

    @Test("Every field combination, with and without a FastSync key", arguments: 0..<16)
    func fieldCombinations(mask: Int) throws {
        var message = PushMessage(
            folder: mask & 1 == 0 ? "INBOX" : nil,
            uidValidity: mask & 2 == 0 ? 1_700_000_000 : nil,
            uid: mask & 4 == 0 ? UInt32.max : nil,
            from: mask & 8 == 0 ? "Alice <alice@example.org>" : nil,
            subject: mask & 1 == 0 ? "Hello" : nil
        )
        #expect(message.encoded() == (try Self.oracle(message)))
        message.fastSync = PushMessage.FastSyncKey(kek: "q83vEjRWeJA-_A", expires: Int64(mask) * 1_000_000_007)
        #expect(message.v == 2)
        #expect(message.encoded() == (try Self.oracle(message)))
    }

    @Test("Text that needs escaping, in every text field", arguments: texts)
    func escaping(text: String) throws {
        let message = PushMessage(folder: text, uidValidity: 0, uid: 0, from: text, subject: text)
        #expect(message.encoded() == (try Self.oracle(message)))
        var keyed = message
        keyed.fastSync = PushMessage.FastSyncKey(kek: text, expires: -1)
        #expect(keyed.encoded() == (try Self.oracle(keyed)))
    }

    @Test("Every single scalar below U+0100 and a sample above, one by one")
    func singleScalars() throws {
        let scalars =
            (0..<0x100).compactMap(Unicode.Scalar.init) + [
                "\u{2028}", "\u{FFFD}", "\u{10FFFF}", "\u{1F600}",
            ]
        for scalar in scalars {
            let text = "x\(scalar)y"
            let message = PushMessage(folder: nil, uidValidity: nil, uid: nil, from: nil, subject: text)
            #expect(message.encoded() == (try Self.oracle(message)), "U+\(String(scalar.value, radix: 16))")
        }
    }

    @Test("A long subject is cut as before and the result still decodes", arguments: [4_000, 20_000])
    func cutToFit(length: Int) throws {
        let message = PushMessage(
            folder: "INBOX",
            uidValidity: 1,
            uid: 2,
            from: String(repeating: "ß", count: length / 4),
            subject: String(repeating: "\"é\u{1}", count: length / 3)
        )
        let encoded = message.encoded()
        #expect(encoded.count <= WebPush.maximumPlaintextLength)
        // The old loop, with the oracle encoder: the same cut.
        var old = message
        var expected: [UInt8] = []
        for _ in 0..<64 {
            let data = try Self.oracle(old)
            if data.count <= WebPush.maximumPlaintextLength {
                expected = data
                break
            }
            old.subject = old.subject.map { String($0.prefix($0.count / 2)) }
            old.from = old.from.map { String($0.prefix($0.count / 2)) }
            old.folder = old.folder.map { String($0.prefix($0.count / 2)) }
        }
        #expect(encoded == expected)
        let decoded = try JSONDecoder().decode(PushMessage.self, from: Data(encoded))
        #expect(decoded.uid == 2)
    }
}
