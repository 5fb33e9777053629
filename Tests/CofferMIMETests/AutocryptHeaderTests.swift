import Foundation
import Testing

@testable import CofferMIME

/// The `Autocrypt` header (Autocrypt Level 1): written by the MIME writer with the From address, folded, and read
/// back by our parser and by Python's `email` package; received headers parsed strictly, every bad shape ignored.
/// The keydata here is marked bytes: real keys (RNP's export, gpg's import of it) are in AutocryptPeerTests and
/// OpenPGPSendCLITests.
@Suite struct AutocryptHeaderTests {
    static let from = MailAddress(name: "Alice", address: "Alice@Example.org")
    static let keyData = (0..<1500).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }

    static func written(mutual: Bool) throws -> [UInt8] {
        var message = OutgoingMessage(
            from: from,
            to: [MailAddress(name: nil, address: "bob@example.org")],
            subject: "Hello",
            text: "Hi",
            messageID: "fixed@example.org"
        )
        message.autocrypt = OutgoingAutocrypt(keyData: keyData, preferEncryptMutual: mutual)
        return try MessageWriter.bytes(of: message).bytes
    }

    /// Python's `email` (policy.default) reads the message; prints the Autocrypt field's unfolded value.
    static func pythonValue(_ bytes: [UInt8]) throws -> String {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("coffer-ac-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("m.eml")
        try Data(bytes).write(to: path)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "python3", "-c",
            "import email, email.policy, sys\n"
                + "m = email.message_from_binary_file(open(sys.argv[1], 'rb'), policy=email.policy.default)\n"
                + "v = m.get_all('Autocrypt')\nassert len(v) == 1\nprint(str(v[0]))",
            path.path,
        ]
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "python3 could not read the header")
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test(arguments: [false, true])
    func theWrittenHeaderIsFoldedAndReadsBackHereAndInPython(mutual: Bool) throws {
        let bytes = try Self.written(mutual: mutual)
        let text = String(decoding: bytes, as: UTF8.self)
        let head = String(text[..<text.range(of: "\r\n\r\n")!.lowerBound])
        // Every line of the header within RFC 5322's 78 characters, the field once.
        #expect(head.components(separatedBy: "\r\n").allSatisfy { $0.utf8.count <= 78 })
        #expect(head.components(separatedBy: "\r\nAutocrypt: ").count == 2)
        #expect(head.contains("Autocrypt: addr=alice@example.org;"))
        #expect(head.contains("prefer-encrypt=mutual") == mutual)

        let parsed = try MIMEParser.parse(bytes)
        let header = try #require(AutocryptHeader.find(in: parsed))
        #expect(header.keyData == Self.keyData)
        #expect(header.preferEncryptMutual == mutual)
        #expect(header.address == "alice@example.org")

        let value = try Self.pythonValue(bytes)
        let fromPython = try #require(AutocryptHeader.parse(value), "Python's value: \(value.prefix(80))")
        #expect(fromPython.keyData == Self.keyData && fromPython.preferEncryptMutual == mutual)
    }

    @Test func anExtraHeaderCannotSetAutocryptAndAnEmptyOrHugeKeyIsRefused() throws {
        var message = OutgoingMessage(from: Self.from, to: [MailAddress(name: nil, address: "b@example.org")])
        message.extraHeaders = [OutgoingHeader(name: "autocrypt", value: "addr=eve@example.org; keydata=AAAA")]
        #expect(throws: ComposeError.self) { _ = try MessageWriter.bytes(of: message) }
        message.extraHeaders = []
        message.autocrypt = OutgoingAutocrypt(keyData: [], preferEncryptMutual: false)
        #expect(throws: ComposeError.invalidAutocryptKey) { _ = try MessageWriter.bytes(of: message) }
        message.autocrypt = OutgoingAutocrypt(
            keyData: [UInt8](repeating: 1, count: AutocryptHeader.maximumKeyDataSize + 1),
            preferEncryptMutual: false
        )
        #expect(throws: ComposeError.invalidAutocryptKey) { _ = try MessageWriter.bytes(of: message) }
    }

    static let key = Data([0x99, 0x01, 0x02, 0x03]).base64EncodedString()

    @Test(arguments: [
        ("addr=a@b.org; keydata=\(key)", true),
        ("addr=a@b.org; prefer-encrypt=mutual; _x-ignored=1; keydata=\(key)", true),
        ("  ADDR=a@b.org ;\r\n keydata=mQEC\r\n\tAw==", true),
        ("addr=a@b.org; keydata=\(key); critical=1", false),
        ("addr=a@b.org; keydata=\(key); addr=c@d.org", false),
        ("addr=a@b.org; keydata=not*base64!", false),
        ("addr=a@b.org; keydata=", false),
        ("addr=a@b.org", false),
        ("keydata=\(key)", false),
        ("addr=; keydata=\(key)", false),
        ("addr=a@b.org; keydata=\(key); garbage", false),
        ("addr=a b@b.org; keydata=\(key)", false),
        ("", false),
    ])
    func receivedValuesAreParsedStrictly(value: String, valid: Bool) {
        let header = AutocryptHeader.parse(value)
        #expect((header != nil) == valid)
        if let header { #expect(header.keyData == [0x99, 0x01, 0x02, 0x03]) }
    }

    @Test func hugeKeyDataIsIgnored() {
        let big = Data(repeating: 7, count: AutocryptHeader.maximumKeyDataSize + 3).base64EncodedString()
        #expect(AutocryptHeader.parse("addr=a@b.org; keydata=\(big)") == nil)
        let fits = Data(repeating: 7, count: AutocryptHeader.maximumKeyDataSize).base64EncodedString()
        #expect(
            AutocryptHeader.parse("addr=a@b.org; keydata=\(fits)")?.keyData.count == AutocryptHeader.maximumKeyDataSize
        )
    }

    static func received(_ headers: [String], from: String = "Bob <Bob@Example.org>") throws -> MIMEMessage {
        let text =
            "From: \(from)\r\nTo: a@example.org\r\nSubject: x\r\n"
            + headers.map { "Autocrypt: \($0)\r\n" }.joined() + "\r\nbody\r\n"
        return try MIMEParser.parse(Array(text.utf8))
    }

    @Test func onlyOneValidHeaderForTheSingleFromAddressCounts() throws {
        let good = "addr=bob@example.org; keydata=\(Self.key)"
        #expect(AutocryptHeader.find(in: try Self.received([good])) != nil)
        // The address compares case-insensitively.
        #expect(AutocryptHeader.find(in: try Self.received(["addr=BOB@example.ORG; keydata=\(Self.key)"])) != nil)
        // For another address: ignored.
        #expect(AutocryptHeader.find(in: try Self.received(["addr=eve@example.org; keydata=\(Self.key)"])) == nil)
        // Two valid ones: none.
        #expect(AutocryptHeader.find(in: try Self.received([good, good])) == nil)
        // One valid beside one for someone else, or an invalid one: the valid one.
        #expect(
            AutocryptHeader.find(in: try Self.received([good, "addr=eve@example.org; keydata=\(Self.key)"])) != nil
        )
        #expect(AutocryptHeader.find(in: try Self.received([good, "addr=bob@example.org; x=1; keydata=AA"])) != nil)
        // Several From addresses: none.
        #expect(
            AutocryptHeader.find(in: try Self.received([good], from: "bob@example.org, eve@example.org")) == nil
        )
    }
}
