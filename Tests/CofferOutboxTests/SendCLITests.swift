import CofferTesting
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Writing and sending through the `coffer` binary, as a person would, against Dovecot's submission service relaying
/// through Postfix into the recipient's mailbox: the round trip, replies, the kill test and the canary scan.
@Suite(.serialized) struct SendCLITests {
    typealias Server = TestServers.SubmissionDovecot

    /// A home for `user`, unprotected, with its account on `server`: IMAP and (for alice) submission, both pinned.
    static func home(
        _ server: Server,
        user: (user: String, password: String, address: String),
        submission: Bool
    )
        async throws -> CLIRunner
    {
        let cli = CLIRunner(prefix: "coffer-send-\(user.user)", ownRuntime: true)
        let created = try await cli.run(["init", "--account", user.user])
        #expect(created.status == 0, "\(created.stderr)")
        let pins = [try server.pin("a"), try server.pin("backup")]
        var arguments = [
            "account", "add", "--imap", "imaps://\(Server.name):\(server.imapsPort)", "--user", user.user,
            "--ca-file", "\(server.certs)/ca.pem", "--connect", "127.0.0.1", "--password-stdin",
        ]
        arguments += pins.flatMap { ["--pin-sha256", $0] }
        if submission {
            arguments += [
                "--smtp", "submissions://\(Server.name):\(server.submissionsPort)", "--from",
                "\(user.user.capitalized) <\(user.address)>",
            ]
            arguments += pins.flatMap { ["--smtp-pin-sha256", $0] }
        }
        let added = try await cli.run(arguments, input: "\(user.password)\n")
        #expect(added.status == 0, "\(added.stdout) \(added.stderr)")
        return cli
    }

    /// Syncs `cli`'s account until `count` messages are listed (the relay delivers after the server's answer).
    static func syncUntil(_ cli: CLIRunner, count: Int, label: String? = nil) async throws -> [String] {
        let deadline = Date().addingTimeInterval(60)
        while true {
            let synced = try await cli.run(["sync"])
            #expect(synced.status == 0, "\(synced.stdout) \(synced.stderr)")
            let listed = try await cli.run(["list", "--limit", "1000"] + (label.map { ["--label", $0] } ?? []))
            let lines = listed.stdout.split(separator: "\n").map(String.init)
            if lines.count >= count || Date() > deadline { return lines }
            try await Task.sleep(for: .milliseconds(300))
        }
    }

    @Test func composeSendSyncAndShowGiveTheSameTextAndAttachmentAndTheSentCopyIsOnTheServer() async throws {
        let server = try await Server.start()
        defer { server.stop() }
        let alice = try await Self.home(server, user: Server.sender, submission: true)
        let bob = try await Self.home(server, user: Server.recipient, submission: true)

        let folder = TemporaryDirectory(prefix: "coffer-send-files")
        let attachment = (0..<300_000).map { UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 11) }
        let attachmentPath = "\(folder.path)/figures.bin"
        try Data(attachment).write(to: URL(fileURLWithPath: attachmentPath))
        let body = "Dear Bob,\n\nthe figures are attached.\n.\nA line with a dot, and Grüße.\n\nAlice\n"
        let bodyPath = "\(folder.path)/body.txt"
        try Data(body.utf8).write(to: URL(fileURLWithPath: bodyPath))

        let sent = try await alice.run([
            "compose", "--to", Server.recipient.address, "--subject", "Quarterly figures", "--attach", attachmentPath,
            "--body-file", bodyPath, "--send",
        ])
        #expect(sent.status == 0, "\(sent.stdout) \(sent.stderr)")
        #expect(sent.stdout.contains("Sent"), "\(sent.stdout)")
        #expect(try await alice.run(["outbox"]).stdout.contains("The outbox is empty."))
        #expect(try await alice.run(["drafts"]).stdout.contains("No drafts."))

        // bob syncs it and reads the same text and the same attachment bytes.
        let lines = try await Self.syncUntil(bob, count: 1)
        let line = try #require(lines.first { $0.contains("Quarterly figures") }, "\(lines)")
        let id = try #require(line.split(separator: "\t").first.map(String.init))
        let shown = try await bob.run(["show", id])
        #expect(shown.status == 0)
        // The message travels with CRLF line ends; the text is the same line by line.
        let shownText = shown.stdout.replacingOccurrences(of: "\r\n", with: "\n")
        #expect(shownText.contains(body.trimmingCharacters(in: .newlines)), "\(shown.stdout)")
        let attachments = try await bob.run(["attachments", id])
        let attachmentID = try #require(attachments.stdout.split(separator: "\t").first.map(String.init))
        let saved = "\(folder.path)/saved.bin"
        #expect(try await bob.run(["attachment", "save", attachmentID, "--to", saved]).status == 0)
        #expect(Array(try Data(contentsOf: URL(fileURLWithPath: saved))) == attachment)

        // alice's Sent folder holds it, on the server (she syncs it) and here at once.
        let sentHere = try await alice.run(["list", "--label", "Sent"])
        #expect(sentHere.stdout.contains("Quarterly figures"), "\(sentHere.stdout)")

        // bob replies; the reply threads under alice's message.
        let reply = try await bob.run(["reply", id, "--body-file", bodyPath, "--send"])
        #expect(reply.status == 0, "\(reply.stdout) \(reply.stderr)")
        let inbox = try await Self.syncUntil(alice, count: 1, label: "INBOX")
        let replyLine = try #require(inbox.first { $0.contains("Re: Quarterly figures") }, "\(inbox)")
        let replyID = try #require(replyLine.split(separator: "\t").first.map(String.init))
        let headers = try await alice.run(["show", replyID, "--headers"]).stdout
        #expect(headers.contains("In-Reply-To:"), "\(headers)")
        #expect(headers.contains("> Dear Bob,"), "the reply quotes the original: \(headers)")
    }

    /// With an agent running, a message held by `--delay` is sent by the agent's outbox service when it is due (no
    /// command runs then), and one taken back with `outbox --cancel` is never sent.
    @Test func theAgentSendsADelayedMessageWhenItIsDueAndACancelledOneNever() async throws {
        let server = try await Server.start()
        defer { server.stop() }
        let alice = try await Self.home(server, user: Server.sender, submission: true)
        let bob = try await Self.home(server, user: Server.recipient, submission: false)
        let agent = try await alice.startAgent()
        defer { CLIRunner.stopAgent(agent) }
        let unlocked = try await alice.run(["unlock"])
        #expect(unlocked.status == 0, "\(unlocked.stdout) \(unlocked.stderr)")

        let kept = try await alice.run([
            "compose", "--to", Server.recipient.address, "--subject", "Taken back", "--send", "--delay", "1h",
        ])
        #expect(kept.status == 0, "\(kept.stdout) \(kept.stderr)")
        let keptID = try await #require(
            try alice.run(["outbox"]).stdout.split(separator: "\n").first { $0.contains("Taken back") }?
                .split(separator: "\t").first.map(String.init)
        )
        let status = try await alice.run(["status"]).stdout
        #expect(status.contains("outbox: 1 message to send"), "\(status)")
        #expect(try await alice.run(["outbox", "--cancel", keptID]).status == 0)

        let delayed = try await alice.run([
            "compose", "--to", Server.recipient.address, "--subject", "Held for three seconds", "--send", "--delay",
            "3s",
        ])
        #expect(delayed.status == 0, "\(delayed.stdout) \(delayed.stderr)")
        #expect(delayed.stdout.contains("The agent sends it in 3 s"), "\(delayed.stdout)")
        // The command has ended; the agent sends it when it is due.
        let lines = try await Self.syncUntil(bob, count: 1)
        #expect(lines.contains { $0.contains("Held for three seconds") }, "\(lines)")
        #expect(!lines.contains { $0.contains("Taken back") }, "\(lines)")
        var empty = false
        for _ in 0..<50 where !empty {
            empty = try await alice.run(["outbox"]).stdout.contains("The outbox is empty.")
            if !empty { try await Task.sleep(for: .milliseconds(100)) }
        }
        let left = try await alice.run(["outbox"]).stdout
        #expect(empty, "the outbox still holds messages: \(left)")
    }

    /// With --send, the files go straight into the outbox, never sealed into the draft; a message that cannot be
    /// queued (here: no recipient) leaves its draft holding them, so nothing given is lost.
    @Test func aMessageThatCannotBeQueuedLeavesItsDraftWithItsFiles() async throws {
        let server = try await Server.start()
        defer { server.stop() }
        let alice = try await Self.home(server, user: Server.sender, submission: true)
        let folder = TemporaryDirectory(prefix: "coffer-send-files")
        let attachmentPath = "\(folder.path)/notes.txt"
        try Data("notes\n".utf8).write(to: URL(fileURLWithPath: attachmentPath))
        let refused = try await alice.run(["compose", "--subject", "No one", "--attach", attachmentPath, "--send"])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("no recipient"), "\(refused.stderr)")
        #expect(try await alice.run(["outbox"]).stdout.contains("The outbox is empty."))
        let drafts = try await alice.run(["drafts"]).stdout
        #expect(drafts.split(separator: "\n").count == 1 && drafts.hasSuffix("\tNo one\t@1\n"), "\(drafts)")
    }

    @Test func aSenderWithoutASubmissionServerIsToldAndNothingIsQueued() async throws {
        let server = try await Server.start()
        defer { server.stop() }
        let bob = try await Self.home(server, user: Server.recipient, submission: false)
        let refused = try await bob.run(["compose", "--to", "alice@coffer.test", "--subject", "x", "--send"])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("no SMTP submission server"), "\(refused.stderr)")
    }
}
