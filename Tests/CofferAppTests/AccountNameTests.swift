import CofferAgentProtocol
import CofferApp
import Foundation
import Testing

@Suite struct AccountNameTests {
    @Test(arguments: [
        ("", AccountNameProblem.empty), (".", .leadingDot), ("..", .leadingDot), ("../x", .leadingDot),
        ("a/b", .pathSeparator), ("/abs", .pathSeparator), ("a\\b", .pathSeparator), ("-rf", .leadingDash),
        ("a\u{0}b", .invisibleCharacter), ("a\nb", .invisibleCharacter), ("a\tb", .invisibleCharacter),
        ("a\u{7F}b", .invisibleCharacter), ("a\u{85}b", .invisibleCharacter), ("\u{202E}x", .invisibleCharacter),
        ("a\u{200B}b", .invisibleCharacter), ("a\u{2028}b", .invisibleCharacter), ("a\u{A0}b", .invisibleCharacter),
        ("a\u{E000}b", .invisibleCharacter), (" padded", .surroundingSpace), ("padded ", .surroundingSpace),
        ("e\u{0301}", .notNormalized), (String(repeating: "n", count: 129), .tooLong),
        (String(repeating: "é", count: 65), .tooLong),
    ])
    func hostileNamesAreRefusedForTheirReason(name: String, problem: AccountNameProblem) {
        #expect(AccountName.problem(name) == problem)
        #expect(throws: AppError.invalidAccountName(problem)) { try AccountName.validate(name) }
        let sentence = AppError.invalidAccountName(problem).description
        #expect(sentence.contains(problem.reason))
        if name.count > 1 { #expect(!sentence.contains(name)) }
    }

    @Test(arguments: [
        "alice", "alice@example.com", "Ann Example", "jürgen@example.de", "名前", "a.b", "x-y_z+tag",
        String(repeating: "n", count: 128), String(repeating: "é", count: 64),
    ])
    func ordinaryNamesPass(name: String) throws {
        try AccountName.validate(name)
    }

    /// The rule's NFC check uses the standard library's normalization (`_nfcCodeUnits`, what `String` compares
    /// with), so `coffer` links no Foundation; here it must agree with Foundation's
    /// `precomposedStringWithCanonicalMapping` on composed, decomposed, reordered and composition-excluded text.
    @Test(arguments: [
        "e\u{0301}", "\u{E9}", "a\u{0323}\u{0302}", "a\u{0302}\u{0323}", "\u{1EAD}", "\u{1100}\u{1161}\u{11A8}",
        "\u{AC01}", "\u{212B}", "\u{00C5}", "A\u{030A}", "\u{2126}", "\u{0958}", "\u{FB2C}", "\u{1E0A}\u{0323}",
        "q\u{0307}\u{0323}", "\u{0F73}", "\u{2ADC}", "\u{1D15E}", "Ann Example", "名前", "jürgen", "ju\u{0308}rgen",
    ])
    func theNormalizationCheckAgreesWithFoundation(name: String) {
        let foundationSaysNFC = Array(name.precomposedStringWithCanonicalMapping.utf8) == Array(name.utf8)
        #expect(
            (AccountName.problem(name) != .notNormalized) == foundationSaysNFC,
            "\(name.unicodeScalars.map(\.value))"
        )
    }

    @Test func folderNamesAreOneFixedComponentAndDifferPerName() {
        let names = ["alice", "..", "../x", "a/b", "Alice", "alice ", "e\u{0301}", "\u{E9}"]
        let folders = names.map(AccountName.folderName)
        #expect(Set(folders).count == names.count)
        for folder in folders {
            #expect(folder.count == 34)
            #expect(folder.hasPrefix("a-"))
            #expect(folder.dropFirst(2).allSatisfy { $0.isHexDigit && !$0.isUppercase })
        }
        let paths = AppPaths(data: "/d", keychain: "/k", state: "/s")
        #expect(paths.mail("..") == "/d/mail/\(AccountName.folderName(".."))")
        #expect(paths.store("a/b").hasPrefix("/d/mail/a-"))
    }

    @Test func theFolderNameIsTheDocumentedHash() {
        // SHA-256("coffer.account-folder.v1" || 0x00 || "alice"), first 16 bytes (docs/STORE.md; checked with
        // Python's hashlib).
        #expect(AccountName.folderName("alice") == "a-74b9cdd0fc08973ddd6c938dbef3dcb2")
    }
}
