import CofferMIME
import CofferTesting
import Foundation
import Testing

/// `coffer forward` through the binary, against the same submission server as SendCLITests: the original's
/// attachment travels with an inline forward, and `--attach-original` attaches the message whole as message/rfc822.
@Suite(.serialized) struct ForwardCLITests {
    typealias Server = TestServers.SubmissionDovecot

    @Test func aForwardCarriesTheAttachmentInlineOrTheWholeMessageAttached() async throws {
        let server = try await Server.start()
        defer { server.stop() }
        let alice = try await SendCLITests.home(server, user: Server.sender, submission: true)
        let bob = try await SendCLITests.home(server, user: Server.recipient, submission: true)

        let folder = TemporaryDirectory(prefix: "coffer-forward-files")
        let attachment = (0..<200_000).map { UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 13) }
        let attachmentPath = "\(folder.path)/figures.bin"
        try Data(attachment).write(to: URL(fileURLWithPath: attachmentPath))
        let bodyPath = "\(folder.path)/body.txt"
        try Data("Dear Bob,\n\nthe figures are attached. Grüße.\n\nAlice\n".utf8)
            .write(to: URL(fileURLWithPath: bodyPath))
        let notePath = "\(folder.path)/note.txt"
        try Data("Alice, here is your own message back.\n".utf8).write(to: URL(fileURLWithPath: notePath))
        let sent = try await alice.run([
            "compose", "--to", Server.recipient.address, "--subject", "Quarterly figures", "--attach", attachmentPath,
            "--body-file", bodyPath, "--send",
        ])
        #expect(sent.status == 0, "\(sent.stdout) \(sent.stderr)")
        let received = try await SendCLITests.syncUntil(bob, count: 1)
        let id = try #require(
            received.first { $0.contains("Quarterly figures") }?.split(separator: "\t").first.map(String.init),
            "\(received)"
        )

        // A message that does not exist: a clear error, no draft left behind.
        let missing = try await bob.run(["forward", "999999", "--to", Server.sender.address, "--send"])
        #expect(missing.status != 0)
        #expect(missing.stderr.contains("There is no message 999999."), "\(missing.stderr)")
        let missingWhole = try await bob.run(["forward", "999999", "--attach-original", "--to", Server.sender.address])
        #expect(missingWhole.status != 0)
        #expect(missingWhole.stderr.contains("There is no message 999999."), "\(missingWhole.stderr)")
        #expect(try await bob.run(["drafts"]).stdout.contains("No drafts."))

        // Inline: kept as a draft that holds the original's attachment, then sent with `coffer send`.
        let inline = try await bob.run(["forward", id, "--to", Server.sender.address])
        #expect(inline.status == 0, "\(inline.stdout) \(inline.stderr)")
        let drafts = try await bob.run(["drafts"]).stdout
        let draftLine = try #require(drafts.split(separator: "\n").first { $0.contains("Fwd: Quarterly figures") })
        #expect(draftLine.hasSuffix("\t@1"), "the draft holds the attachment: \(drafts)")
        let draftID = try #require(draftLine.split(separator: "\t").first.map(String.init))
        let sentInline = try await bob.run(["send", draftID])
        #expect(sentInline.status == 0, "\(sentInline.stdout) \(sentInline.stderr)")
        #expect(sentInline.stdout.contains("Sent"), "\(sentInline.stdout)")

        // Attached whole, with a note, sent at once.
        let whole = try await bob.run([
            "forward", id, "--attach-original", "--to", Server.sender.address, "--body-file", notePath, "--send",
        ])
        #expect(whole.status == 0, "\(whole.stdout) \(whole.stderr)")
        #expect(whole.stdout.contains("Sent"), "\(whole.stdout)")
        #expect(try await bob.run(["drafts"]).stdout.contains("No drafts."))

        // In a terminal, an editor that changes nothing abandons the forward: the draft made to hold the original
        // is deleted with it.
        let terminal = Process()
        terminal.executableURL = URL(fileURLWithPath: "/usr/bin/script")
        terminal.arguments = [
            "-qec", "'\(CLIRunner.binary)' forward \(id) --attach-original --home '\(bob.home.path)'", "/dev/null",
        ]
        var environment = bob.environment
        environment["VISUAL"] = "true"
        environment["EDITOR"] = "true"
        terminal.environment = environment
        let output = Pipe()
        terminal.standardOutput = output
        terminal.standardInput = FileHandle.nullDevice
        try terminal.run()
        let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        terminal.waitUntilExit()
        #expect(printed.contains("Nothing was written; nothing was saved."), "\(printed)")
        #expect(try await bob.run(["drafts"]).stdout.contains("No drafts."))

        // alice receives both.
        let inbox = try await SendCLITests.syncUntil(alice, count: 2, label: "INBOX")
        let forwards = inbox.filter { $0.contains("Fwd: Quarterly figures") }
            .compactMap { $0.split(separator: "\t").first.map(String.init) }
        #expect(forwards.count == 2, "\(inbox)")
        var inlineSeen = false
        var wholeSeen = false
        for forward in forwards {
            let listed = try await alice.run(["attachments", forward]).stdout.split(separator: "\n")
            #expect(listed.count == 1, "\(listed)")
            let fields = try #require(listed.first).split(separator: "\t").map(String.init)
            try #require(fields.count == 4, "\(listed)")
            let saved = "\(folder.path)/saved-\(forward)"
            #expect(try await alice.run(["attachment", "save", fields[0], "--to", saved]).status == 0)
            let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: saved)))
            let shown = try await alice.run(["show", forward]).stdout
            if fields[2] == "message/rfc822" {
                wholeSeen = true
                #expect(fields[3] == "Quarterly figures.eml")
                #expect(shown.contains("Alice, here is your own message back."), "\(shown)")
                // The enclosed message: the original's headers, text and attachment, CRLF throughout.
                let enclosed = try MIMEParser.parse(bytes)
                #expect(enclosed.subject == "Quarterly figures")
                #expect(enclosed.from.first?.address == Server.sender.address)
                #expect(enclosed.textBody?.contains("the figures are attached. Grüße.") == true)
                #expect(enclosed.attachments.first?.body == attachment)
                #expect(enclosed.attachments.first?.filename == "figures.bin")
                let messageID = try #require(enclosed.messageID)
                let originalHeaders = try await bob.run(["show", id, "--headers"]).stdout
                #expect(originalHeaders.contains("<\(messageID)>"), "the Message-ID is the original's")
                let text = String(decoding: bytes, as: UTF8.self)
                #expect(!text.replacingOccurrences(of: "\r\n", with: "").contains("\n"), "a bare LF in the enclosed")
            } else {
                inlineSeen = true
                #expect(fields[2] == "application/octet-stream" && fields[3] == "figures.bin", "\(fields)")
                #expect(bytes == attachment)
                #expect(shown.contains("---------- Forwarded message ----------"), "\(shown)")
                #expect(shown.contains("the figures are attached."), "\(shown)")
            }
        }
        #expect(inlineSeen && wholeSeen)
    }
}
