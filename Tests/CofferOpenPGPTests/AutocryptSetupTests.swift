import CofferCrypto
import Foundation
import Testing

@testable import CofferOpenPGP

/// The Autocrypt Setup Message's payload (Level 1): sealed by us, opened by GnuPG with the Setup Code (AES-128, the
/// secret key armored with `Autocrypt-Prefer-Encrypt`) and imported; one GnuPG made, opened by us; a wrong code
/// refused.
@Suite struct AutocryptSetupTests {
    static func text(_ code: SecretBytes) -> String { code.withUnsafeBytes { String(decoding: $0, as: UTF8.self) } }

    @Test func setupCodesAreNineBlocksOfFourRandomDigits() {
        let codes = (0..<20).map { _ in Self.text(AutocryptSetup.newSetupCode()) }
        #expect(Set(codes).count == 20)
        for code in codes {
            let blocks = code.split(separator: "-", omittingEmptySubsequences: false)
            #expect(blocks.count == 9 && blocks.allSatisfy { $0.count == 4 && $0.allSatisfy(\.isNumber) }, "\(code)")
        }
        // Every digit appears (a broken mapping would leave some out).
        #expect(Set(codes.joined().filter(\.isNumber)).count == 10)
    }

    @Test func gnuPGOpensWhatWeSealAndImportsTheSecretKey() throws {
        let tools = try InteropTools()
        let key = try OpenPGP.generateKey(userID: "Alice <alice@example.org>")
        let code = AutocryptSetup.newSetupCode()
        let sealed = try AutocryptSetup.seal(key, preferEncryptMutual: true, setupCode: code)
        let armor = String(decoding: sealed, as: UTF8.self)
        #expect(armor.contains("Passphrase-Format: numeric9x4"))
        #expect(armor.contains("Passphrase-Begin: \(Self.text(code).prefix(2))"))
        #expect(!armor.contains(Self.text(code)))

        let file = try tools.file(sealed, name: "setup.asc")
        let packets = try tools.gpg(["--passphrase", Self.text(code), "--list-packets", file]).text
        #expect(packets.contains("symkey enc packet: version 4, cipher 7"), "\(packets)")  // 7: AES-128
        let opened = try tools.gpg(["--passphrase", Self.text(code), "--decrypt", file])
        #expect(opened.text.contains("-----BEGIN PGP PRIVATE KEY BLOCK-----"))
        #expect(opened.text.contains("Autocrypt-Prefer-Encrypt: mutual"))
        try tools.gpg(["--import"], input: opened.output)
        let secret = try tools.gpg(["--with-colons", "--list-secret-keys", key.fingerprint]).text
        #expect(secret.contains(key.fingerprint))

        // A wrong code: gpg gives nothing.
        let wrong = try tools.gpg(
            ["--passphrase", "1111-2222-3333-4444-5555-6666-7777-8888-9999", "--decrypt", file],
            expectSuccess: false
        )
        #expect(wrong.status != 0 && wrong.output.isEmpty)
    }

    @Test func weOpenWhatGnuPGSealsAndAWrongCodeIsRefused() throws {
        let tools = try InteropTools()
        let fingerprint = try tools.gpgGenerateKey(userID: "Bob <bob@example.org>")
        var armored = try tools.gpg(["--armor", "--export-secret-keys", fingerprint]).text
        armored = armored.replacingOccurrences(
            of: "-----BEGIN PGP PRIVATE KEY BLOCK-----\n",
            with: "-----BEGIN PGP PRIVATE KEY BLOCK-----\nAutocrypt-Prefer-Encrypt: mutual\n"
        )
        let code = "1234-5678-9012-3456-7890-1234-5678-9012-3456"
        let sealed = try tools.gpg(
            [
                "--passphrase", code, "--symmetric", "--cipher-algo", "AES128", "--s2k-digest-algo", "SHA256",
                "--armor",
            ],
            input: Array(armored.utf8)
        ).output

        let opened = try AutocryptSetup.open(sealed, setupCode: SecretBytes(copying: Array(code.utf8)))
        #expect(opened.preferEncryptMutual == true)
        let imported = try OpenPGP.importKeys(from: opened.keys)
        #expect(imported.count == 1 && imported[0].fingerprint == fingerprint && imported[0].secretKey != nil)
        // Typed as 36 digits with spaces: the same code.
        let spaced = SecretBytes(copying: Array(code.replacingOccurrences(of: "-", with: " ").utf8))
        #expect(try AutocryptSetup.open(sealed, setupCode: spaced).preferEncryptMutual == true)

        for wrong in ["1234-5678-9012-3456-7890-1234-5678-9012-3457", "12345", ""] {
            #expect(throws: OpenPGPError.wrongPassphrase(fingerprint: "")) {
                _ = try AutocryptSetup.open(sealed, setupCode: SecretBytes(copying: Array(wrong.utf8)))
            }
        }
        // A changed payload gives nothing.
        var changed = sealed
        let middle = changed.count / 2
        changed[middle] = changed[middle] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        #expect(throws: OpenPGPError.self) {
            _ = try AutocryptSetup.open(changed, setupCode: SecretBytes(copying: Array(code.utf8)))
        }
    }
}
