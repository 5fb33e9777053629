import CofferCrypto
import CofferMIME
import CofferOpenPGP
import CofferTesting
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// `coffer-bench openpgp`: reading 1,000 PGP/MIME messages (RFC 3156), each a text of 0.5 to 16.5 KiB encrypted to
/// the reader's key and signed inside by the sender's, beside GnuPG reading the same messages in the same run.
///
/// Coffer's figure is what reading costs it: parse each message (``MIMEParser``), take its `application/octet-stream`
/// part, and ``OpenPGP/decrypt(_:with:verifyingWith:maximumPlaintextSize:)`` it with the reader's secret key and the
/// sender's certificate (a fresh RNP object per message, which loads both keys from memory: Coffer keeps no
/// keyring), on one thread. GnuPG's is one `gpg --batch --multifile --decrypt` process over the same encrypted parts,
/// cut out of the messages beforehand (a mail client hands gpg the part; the MIME parsing is left out of gpg's time,
/// which favours it), with the reader's secret key and the sender's certificate imported into a private home; its
/// `gpg-agent` runs the secret-key operations in a second process. Both must report every message decrypted and
/// every signature good, or the run fails. Three rounds, alternating; medians.
enum OpenPGPBench {
    static func run(messages count: Int = 1000, rounds: Int = 3) throws {
        func installed(_ tool: String) -> String? {
            ["/usr/bin/\(tool)", "/usr/local/bin/\(tool)"].first { FileManager.default.isExecutableFile(atPath: $0) }
        }
        guard let gpg = installed("gpg"), let gpgconf = installed("gpgconf") else {
            throw BenchError("gpg and gpgconf are needed (scripts/setup.sh installs GnuPG)")
        }
        let folder = TemporaryDirectory(prefix: "coffer-bench-openpgp")
        let home = "\(folder.path)/gnupg"
        guard mkdir(home, 0o700) == 0 else { throw CofferCryptoError.io(operation: "mkdir", errno: errno) }
        defer { _ = try? runCommand([gpgconf, "--homedir", home, "--kill", "all"]) }

        let reader = try OpenPGP.generateKey(userID: "Bench Reader <reader@example.org>")
        let sender = try OpenPGP.generateKey(userID: "Bench Sender <sender@example.org>")
        var messages: [[UInt8]] = []
        var parts: [String] = []
        var plaintextBytes = 0
        for index in 0..<count {
            let text = Self.text(index)
            plaintextBytes += text.count
            let armored = try OpenPGP.encrypt(text, to: [reader.publicKey], signedBy: sender, armored: true)
            messages.append(Self.pgpMIME(armored, index: index))
            let part = "\(folder.path)/\(index).asc"
            try Data(armored).write(to: URL(fileURLWithPath: part))
            parts.append(part)
        }
        let secret = "\(folder.path)/reader.key"
        try Data(reader.bytes.withUnsafeBytes { Array($0) }).write(to: URL(fileURLWithPath: secret))
        let certificate = "\(folder.path)/sender.asc"
        try Data(sender.publicKey.armored.utf8).write(to: URL(fileURLWithPath: certificate))
        for file in [secret, certificate] {
            let imported = try runCommand([gpg, "--homedir", home, "--batch", "--import", file])
            guard imported.code == 0 else { throw BenchError("gpg --import: \(imported.output)") }
        }
        try? FileManager.default.removeItem(atPath: secret)

        let gpgRun = [gpg, "--homedir", home, "--batch", "--yes", "--status-fd", "1", "--multifile", "--decrypt"]
        var cofferSeconds: [Double] = []
        var gpgSeconds: [Double] = []
        for round in 0..<rounds {
            for side in round % 2 == 0 ? ["coffer", "gpg"] : ["gpg", "coffer"] {
                let start = Timer.now()
                if side == "coffer" {
                    let verified = try Self.read(messages, with: reader, sender: sender.publicKey)
                    cofferSeconds.append(Double(Timer.now() - start) / 1e9)
                    guard verified == count else {
                        throw BenchError("Coffer verified \(verified) of \(count) messages")
                    }
                } else {
                    let result = try runCommand(gpgRun + parts)
                    gpgSeconds.append(Double(Timer.now() - start) / 1e9)
                    let status = result.output.split(separator: "\n")
                    let good = status.filter { $0.hasPrefix("[GNUPG:] GOODSIG ") }.count
                    let decrypted = status.filter { $0.hasPrefix("[GNUPG:] DECRYPTION_OKAY") }.count
                    guard result.code == 0, good == count, decrypted == count else {
                        throw BenchError("gpg: exit \(result.code), \(decrypted) decrypted, \(good) good signatures")
                    }
                }
            }
        }
        let coffer = percentiles(cofferSeconds).p50
        let reference = percentiles(gpgSeconds).p50
        func rate(_ seconds: Double) -> String { "\(format(Double(count) / seconds, 0)) msg/s" }
        var table = Table(
            "OpenPGP: decrypt and verify \(count) PGP/MIME messages (Ed25519 signatures inside, X25519 encryption, "
                + "\(format(Double(plaintextBytes) / Double(count) / 1024, 1)) KiB of text on average); median of "
                + "\(rounds) alternating rounds",
            ["measure", "coffer", "gpg", "coffer / gpg"]
        )
        table.add([
            "parse, decrypt and verify each message (Coffer, one thread) vs one `gpg --multifile --decrypt` process",
            rate(coffer), rate(reference), format(reference / coffer, 2) + "× the rate",
        ])
        table.add([
            "each round", cofferSeconds.map { format($0, 2) + " s" }.joined(separator: ", "),
            gpgSeconds.map { format($0, 2) + " s" }.joined(separator: ", "), "",
        ])
        table.print()
    }

    /// Parses, decrypts and verifies every message as Coffer reads one; how many were decrypted with every signature
    /// good.
    private static func read(_ messages: [[UInt8]], with key: OpenPGPSecretKey, sender: OpenPGPPublicKey) throws -> Int
    {
        var verified = 0
        for message in messages {
            let parsed = try MIMEParser.parse(message)
            guard parsed.root.contentType.mimeType == "multipart/encrypted",
                let part = parsed.root.children.first(where: {
                    $0.contentType.mimeType == "application/octet-stream"
                })
            else { continue }
            let decryption = try OpenPGP.decrypt(part.body, with: [key], verifyingWith: [sender])
            if decryption.isSignedAndVerified && !decryption.plaintext.isEmpty { verified += 1 }
        }
        return verified
    }

    /// Message `index`'s inner entity: a text/plain part of 0.5 to 16.5 KiB of lines.
    private static func text(_ index: Int) -> [UInt8] {
        let size = 512 + (index * 7919) % 16_384
        var bytes = Array("Content-Type: text/plain; charset=utf-8\r\n\r\n".utf8)
        let line = Array("Quarterly figures, line of the report that the bench repeats to fill the message.\r\n".utf8)
        while bytes.count < size { bytes += line }
        return bytes
    }

    /// `armored` as an RFC 3156 message.
    private static func pgpMIME(_ armored: [UInt8], index: Int) -> [UInt8] {
        let boundary = "bench-boundary-\(index)"
        let head = """
            From: Bench Sender <sender@example.org>\r
            To: Bench Reader <reader@example.org>\r
            Subject: ...\r
            Message-ID: <openpgp-bench-\(index)@example.org>\r
            MIME-Version: 1.0\r
            Content-Type: multipart/encrypted; protocol="application/pgp-encrypted"; boundary="\(boundary)"\r
            \r
            --\(boundary)\r
            Content-Type: application/pgp-encrypted\r
            \r
            Version: 1\r
            \r
            --\(boundary)\r
            Content-Type: application/octet-stream; name="encrypted.asc"\r
            Content-Disposition: inline; filename="encrypted.asc"\r
            \r

            """
        return Array(head.utf8) + armored + Array("\r\n--\(boundary)--\r\n".utf8)
    }
}
