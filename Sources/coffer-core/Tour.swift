import ArgumentParser
import CofferApp
import CofferCommandLine
import CofferCrypto
import CofferKeychain
import CofferKeymaker
import CofferMIME
import CofferReading
import CofferSampleMail
import CofferStore
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// `coffer` with no command: the MainKey lifecycle on a throwaway home, narrated.
struct Tour: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tour",
        abstract: "A short tour of the MainKey lifecycle on a throwaway home folder (the default command)."
    )

    func run() async throws {
        try await runReportingErrors {
            var template = Array("/tmp/coffer-tour-XXXXXX".utf8CString)
            guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
                throw CLIError("Could not create a temporary folder for the tour.")
            }
            let root = String(cString: made)
            defer { SecureFile.removeTree(root) }
            // The secure element asks the tour for presence, which it confirms itself.
            try await PresenceRelay.$current.withValue(TourPresence()) { try await tour(root: root) }
        }
    }

    private func step(_ command: String) {
        print("\n$ coffer \(command)")
        // Viewers and other child processes write straight to the terminal: keep the order on screen.
        fflush(nil)
    }

    private func tour(root: String) async throws {
        print("Coffer tour: a throwaway home in \(root), deleted at the end.")
        let home = try AppPaths.forHome(root)
        let logger = Logger(label: "coffer.tour") { _ in SwiftLogNoOpLogHandler() }
        let global = GlobalContainer(paths: home, logger: logger)
        let account = "tour@example.com"
        let keymaker = try global.keymakerRegistry.user(account).keymaker

        step("init --account \(account)")
        try await keymaker.createMainKey()
        print("Created a 256-bit MainKey; it rests in the device-bound keychain (strategy: none).")

        let mailMarkers = try await mailTour(root: root, account: account, keymaker: keymaker)

        let marker = "ACCESS-TOKEN-\(UInt32.random(in: 100_000...999_999))"
        let token = try Locked(
            clearValue: marker,
            with: await keymaker.mainKey(for: .userRequest),
            label: "account.token"
        )
        try SecureFile.makePrivateDirectory(home.data)
        try SecureFile.writeAtomically(token.encrypted, to: "\(home.data)/token.sealed")
        print("Sealed an access token with Locked<String> under a MainKey subkey (\(token.encrypted.count) bytes).")

        step("protect pin          # the tour types the PIN 246813 for you")
        let started = SystemClock().now().boot
        let estimate = try await keymaker.activatePIN(SecretBytes(copying: Array("246813".utf8)), authorizedBy: .none)
        let millis = (SystemClock().now().boot - started) / 1_000_000
        print("Wrapped the MainKey with a key from \(ScryptParameters.standard) + the device pepper (\(millis) ms).")
        print(estimate.sentence)
        print("Only the MainKey was rewrapped; the sealed token did not change.")

        step("protect secure-element   # presence is confirmed automatically in the tour")
        try await keymaker.activateSecureElement(authorizedBy: .pin(SecretBytes(copying: Array("246813".utf8))))
        print("Also sealed the MainKey to the software secure element with HPKE (P-256).")

        step("lock")
        await keymaker.lock()
        print("The MainKey left memory and its bytes were zeroed. Reading the token now fails: ", terminator: "")
        do {
            _ = try await keymaker.mainKey(for: .userRequest)
        } catch {
            print(error)
        }

        step("unlock --with pin    # with the wrong PIN 0000")
        do {
            try await keymaker.unlock(.pin(SecretBytes(copying: Array("0000".utf8))))
        } catch {
            print("coffer: \(error)")
        }

        step("unlock --with pin    # with 246813")
        try await keymaker.unlock(.pin(SecretBytes(copying: Array("246813".utf8))))
        let key = try await keymaker.mainKey(for: .userRequest)
        let reopened = try Locked<String>(encrypted: token.encrypted, label: "account.token").unlock(with: key)
        print("Unlocked; the failure count is back to \(try await keymaker.failedAttempts()).")
        print("The sealed token opens again: \(reopened == marker ? "yes" : "no").")

        step("autolock 5m")
        try await keymaker.setAutolock(.after(seconds: 300))
        print("Autolock after 5 minutes without use, stored sealed; the agent's timer enforces it.")

        print("\nWhat is on disk? Scanning every file under the home (except the sample mbox itself) for the token,")
        print("the MainKey bytes, and the subjects and addresses of the imported mail...")
        let needles =
            [Array(marker.utf8), try await keymaker.mainKey(for: .userRequest).withUnsafeBytes { Array($0) }]
            + mailMarkers.map { Array($0.utf8) }
        // Positive control: a planted file holding a canary must be found, or the scan proves nothing.
        let canary = Array("SCAN-CONTROL-\(UInt64.random(in: 1_000_000_000...9_999_999_999))".utf8)
        let control = "\(home.data)/scan-control"
        try SecureFile.writeAtomically(canary, to: control)
        let scan = DiskScan.run(below: root, needles: needles + [canary]) { $0.hasSuffix("/sample.mbox") }
        SecureFile.removeTree(control)
        guard scan.hits.contains(control) else {
            throw CLIError("The disk scan did not find its planted control file, so it cannot vouch for the disk.")
        }
        guard scan.unreadable.isEmpty else {
            throw CLIError(
                "The disk scan could not read \(scan.unreadable.count) files or folders, so it cannot vouch for them."
            )
        }
        let hits = scan.hits.filter { $0 != control }
        print(
            "\(scan.files) files, the planted control found, \(hits.count) containing the token, the key or the mail."
        )
        for hit in hits { print("  found in \(hit)") }

        step("status")
        print("account: \(account)")
        print("  protection: \(try await keymaker.protectionDescriptions().joined(separator: " + "))")
        print("  autolock: \(await keymaker.autolockPolicy)")

        step("logout --yes")
        try await keymaker.destroy()
        let remaining = SecureFile.files(below: home.keychain).filter { $0.hasSuffix(".item") }.count
        print("The MainKey and every wrap are gone (\(remaining) keychain items left); the sealed token is now noise.")
        print("\nNext: `coffer --help`, and the README's CLI reference.")
    }

    /// Imports a generated sample mailbox and runs the mail commands on it, exactly as a user would type them.
    /// Returns strings of that mail (a subject, a sender address) for the final disk scan.
    private func mailTour(root: String, account: String, keymaker: Keymaker) async throws -> [String] {
        let generator = SyntheticMail(seed: 7)
        var mbox: [UInt8] = []
        for index in 0..<240 {
            mbox += Array("From tour-sample@example.org Sat Nov 21 09:00:00 2026\n".utf8)
            let message = String(decoding: generator.message(index, attachment: index % 12 == 5), as: UTF8.self)
            for line in message.replacingOccurrences(of: "\r\n", with: "\n").split(
                separator: "\n",
                omittingEmptySubsequences: false
            ) {
                // mboxrd: a line that would read as a separator is quoted with ">".
                let unquoted = line.drop { $0 == ">" }
                mbox += Array(((unquoted.hasPrefix("From ") ? ">" : "") + line + "\n").utf8)
            }
        }
        let sample = "\(root)/sample.mbox"
        try SecureFile.writeAtomically(mbox, to: sample)

        let home = ["--home", root]
        try await command(["import", sample] + home, note: "240 generated messages, some with attachments")
        try await command(["list", "--limit", "5"] + home)

        let paths = try AppPaths.forHome(root)
        let store = try MailStore(folder: paths.store(account), keys: keymaker)
        let newest = try await store.list(limit: 50)
        guard let first = newest.first else { throw CLIError("The tour's sample import stored no messages.") }
        let word = (first.subject ?? "").split(separator: " ").map(String.init).first { $0.count > 4 } ?? "meeting"
        try await command(["search", word, "--limit", "3"] + home)
        try await command(["show", String(first.id)] + home)
        if let withAttachment = newest.first(where: { $0.flags.contains(.hasAttachments) }) {
            let attachments = try await store.attachments(of: withAttachment.id)
            try await command(["attachments", String(withAttachment.id)] + home)
            if let attachment = attachments.first {
                try await command(
                    ["attachment", "open", String(attachment.id), "--viewer", "wc -c"] + home,
                    note: "the viewer sees a decrypted copy in a private folder; it is deleted when the viewer returns"
                )
            }
        }
        try store.close()
        return [first.subject, first.from.first?.address].compactMap { $0 }.filter { $0.count > 8 }
    }

    /// Runs one `coffer` command line in this process, printing it first.
    private func command(_ arguments: [String], note: String? = nil) async throws {
        let shown = arguments.map { $0.hasSuffix("/sample.mbox") ? "sample.mbox" : $0 }
            .filter { !$0.hasPrefix("/tmp/coffer-tour") && $0 != "--home" }
        step(shown.joined(separator: " ") + (note.map { "    # \($0)" } ?? ""))
        guard var parsed = try Coffer.parseAsRoot(arguments) as? AsyncParsableCommand else {
            throw CLIError("The tour could not run `\(shown.joined(separator: " "))`.")
        }
        try await parsed.run()
    }

}

/// The tour's scan of a home for secrets: every regular file's bytes are searched for every needle. What cannot be
/// read (a file or folder it may not open, a link, a socket, a file over 64 MiB) is reported as unreadable, never
/// counted as clean.
struct DiskScan {
    /// Regular files scanned.
    var files = 0
    /// Files holding at least one needle.
    var hits: [String] = []
    /// Paths that could not be scanned.
    var unreadable: [String] = []

    /// Scans everything below `root` except the files `skip` names.
    static func run(below root: String, needles: [[UInt8]], skip: (String) -> Bool) -> DiskScan {
        var scan = DiskScan()
        scan.walk(root, needles: needles, skip: skip)
        return scan
    }

    private mutating func walk(_ folder: String, needles: [[UInt8]], skip: (String) -> Bool) {
        guard let names = try? SecureFile.list(folder) else {
            unreadable.append(folder)
            return
        }
        for name in names {
            let path = "\(folder)/\(name)"
            var info = stat()
            guard lstat(path, &info) == 0 else {
                unreadable.append(path)
                continue
            }
            switch info.st_mode & S_IFMT {
            case S_IFDIR:
                walk(path, needles: needles, skip: skip)
            case S_IFREG:
                if skip(path) { continue }
                guard let bytes = (try? SecureFile.read(path, maxBytes: 1 << 26)) ?? nil else {
                    unreadable.append(path)
                    continue
                }
                files += 1
                if needles.contains(where: { ByteSearch.contains($0, in: bytes) }) { hits.append(path) }
            default:
                unreadable.append(path)
            }
        }
    }
}

/// The tour confirms presence itself, and says so.
private struct TourPresence: PresenceAuthenticator {
    func confirmPresence(reason: String) async -> Bool {
        print("(the tour confirms presence for you; normally you type a code shown on the terminal)")
        return true
    }
}
