import CofferSampleMail
import CofferTesting
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// SIGKILL at random moments of 20 sends through the `coffer` binary (Dovecot submission → Postfix → bob's INBOX),
/// then the canary scan of everything the sender's home holds.
///
/// Delivery is at least once (docs/STORE.md, "Crash safety of drafts and the outbox"): after the restart every
/// message is delivered, none is lost, nothing is left in the outbox or the drafts, and a duplicate can only come from
/// a kill between the server's final reply to `DATA` and the outbox's commit. Each `coffer send` sends one message at a
/// time, so each kill gives at most one duplicate: the test counts them from bob's Maildir on the server.
@Suite(.serialized) struct SendKillTests {
    typealias Server = TestServers.SubmissionDovecot

    /// The messages killed while being sent.
    static let count = 20

    /// One message of the test: its subject, body and attachment each carry a canary.
    struct Letter {
        var subject: String
        var body: String
        var attachment: [UInt8]
        /// The canaries that must never be in the clear in a file of alice's home.
        var needles: [[UInt8]]
    }

    @Test func sigkillAtRandomMomentsOfTwentySendsLosesNoMessageAndLeavesNoCanaryInTheClear() async throws {
        let started = Date()
        let seed =
            ProcessInfo.processInfo.environment["COFFER_KILL_SEED"].flatMap { UInt64($0) }
            ?? UInt64.random(in: 1...UInt64.max)
        var random = SplitMix(seed: seed)
        let token = String(random.next() & 0xFFFF_FFFF, radix: 16)
        print("SendKillTests: seed \(seed) (COFFER_KILL_SEED=\(seed) repeats these kill delays), canary token \(token)")

        let server = try await Server.start()
        defer { server.stop() }
        let alice = try await SendCLITests.home(server, user: Server.sender, submission: true)
        let bob = try await SendCLITests.home(server, user: Server.recipient, submission: false)
        let contactName = "Canary Person\(token)"
        let contactAddress = "canary-contact-\(token)@example.org"
        let added = try await alice.run(["contacts", "--add", "\(contactName) <\(contactAddress)>"])
        #expect(added.status == 0 && added.stdout.contains(contactAddress), "\(added.stdout) \(added.stderr)")

        // 20 drafts to kill, and one more whose send is timed whole, to spread the kills over a send's life.
        let folder = TemporaryDirectory(prefix: "coffer-send-kill-files")
        let letters = (0...Self.count).map { Self.letter($0, token: token, random: &random) }
        var draftOf: [Int64: Int] = [:]
        for (index, letter) in letters.enumerated() {
            let bodyPath = "\(folder.path)/body-\(index).txt"
            let attachmentPath = "\(folder.path)/kill-\(index).bin"
            try Data(letter.body.utf8).write(to: URL(fileURLWithPath: bodyPath))
            try Data(letter.attachment).write(to: URL(fileURLWithPath: attachmentPath))
            let composed = try await alice.run([
                "compose", "--to", Server.recipient.address, "--subject", letter.subject, "--body-file", bodyPath,
                "--attach", attachmentPath,
            ])
            #expect(composed.status == 0, "\(composed.stdout) \(composed.stderr)")
            let id = try #require(Self.draftID(composed.stdout), "no draft id in: \(composed.stdout)")
            draftOf[id] = index
        }
        let drafts = try await alice.run(["drafts"]).stdout
        for letter in letters { #expect(drafts.contains(letter.subject), "\(drafts)") }
        let idOf = Dictionary(uniqueKeysWithValues: draftOf.map { ($1, $0) })

        // The timed send (index 20): never in flight when a kill falls, so bob must get it exactly once.
        let timing = Date()
        let whole = try await alice.run(["send", String(idOf[Self.count]!)])
        let sendTime = Date().timeIntervalSince(timing)
        #expect(whole.status == 0 && whole.stdout.contains("Sent"), "\(whole.stdout) \(whole.stderr)")

        // Kill each send at a random moment of a send's length (a little past it, so some finish). Right after each
        // kill, before anything opens the store again, its clear columns (read by Python's sqlite3) say where the kill
        // fell: a row still `sending` is the one message that was in flight, the only one the kill can duplicate.
        let database = try #require(
            TemporaryDirectory.files(below: alice.home.path).first { $0.hasSuffix("/mail.sqlite") },
            "alice's store"
        )
        var kills: [Kill] = []
        var inFlightKills = Array(repeating: 0, count: letters.count)
        for index in 0..<Self.count {
            let delay = Int(Double(random.next() % 1000) / 1000 * sendTime * 1.1 * 1000)
            var kill = Kill(index: index, delay: delay)
            let sentBefore = await Set(try Self.sqlite(database, "SELECT id FROM outbox WHERE state = 3"))
            kill.killed = try await Self.sendAndKill(alice, draft: idOf[index]!, afterMilliseconds: delay)
            if kill.killed {
                let sending = try await Self.sqlite(database, "SELECT id FROM outbox WHERE state = 1")
                let sent = await Set(try Self.sqlite(database, "SELECT id FROM outbox WHERE state = 3"))
                let drafts = try await Self.sqlite(database, "SELECT id FROM drafts").compactMap { Int64($0) }
                #expect(sending.count <= 1, "one message is sent at a time: \(sending)")
                if let outboxID = sending.first {
                    // The outbox lists it (opening the store returns it to the queue, as the next send would).
                    let listed = try await alice.run(["outbox"]).stdout.split(separator: "\n")
                    let line = try #require(listed.first { $0.hasPrefix("\(outboxID)\t") }, "\(listed)")
                    let letter = try #require(letters.firstIndex { line.contains($0.subject) }, "\(line)")
                    inFlightKills[letter] += 1
                    kill.phase = "smtp:\(letter)"
                } else if drafts.contains(idOf[index]!) {
                    kill.phase = "draft"
                } else if sent != sentBefore {
                    kill.phase = "sent-copy"
                } else {
                    kill.phase = "queued"
                }
            }
            kills.append(kill)
        }
        let killCount = kills.filter(\.killed).count

        // Restart: every interrupted send returns to the queue when the store opens (its claimant is dead); flush
        // until the outbox is empty, then send the drafts whose kill fell before they were queued.
        var outbox = ""
        for _ in 0..<6 {
            outbox = try await alice.run(["outbox"]).stdout
            if outbox.contains("The outbox is empty.") { break }
            let flushed = try await alice.run(["outbox", "--flush"])
            #expect(flushed.status == 0, "\(flushed.stdout) \(flushed.stderr)")
        }
        var resent: [Int] = []
        for line in try await alice.run(["drafts"]).stdout.split(separator: "\n") {
            guard let id = line.split(separator: "\t").first.flatMap({ Int64($0) }), let index = draftOf[id] else {
                continue
            }
            let sent = try await alice.run(["send", String(id)])
            #expect(sent.status == 0 && sent.stdout.contains("Sent"), "\(sent.stdout) \(sent.stderr)")
            resent.append(index)
        }
        outbox = try await alice.run(["outbox"]).stdout
        #expect(outbox.contains("The outbox is empty."), "something is stuck in the outbox: \(outbox)")
        let draftsLeft = try await alice.run(["drafts"]).stdout
        #expect(draftsLeft.contains("No drafts."), "\(draftsLeft)")

        // bob gets every one of them: none lost.
        let deadline = Date().addingTimeInterval(90)
        var listed: [String] = []
        while true {
            #expect(try await bob.run(["sync"]).status == 0)
            listed = try await bob.run(["list", "--limit", "1000"]).stdout.split(separator: "\n").map(String.init)
            let arrived = letters.filter { letter in listed.contains { $0.contains(letter.subject) } }.count
            if arrived == letters.count || Date() > deadline { break }
            try await Task.sleep(for: .milliseconds(300))
        }
        for (index, letter) in letters.enumerated() {
            #expect(listed.contains { $0.contains(letter.subject) }, "message \(index) was lost: \(letter.subject)")
        }

        // Duplicates, counted on the server: the files of bob's Maildir, by subject. bob's store lists as many.
        var delivered: [Int] = []
        for _ in 0..<20 {
            delivered = try Self.deliveries(of: letters, maildir: "\(server.dir)/mail/\(Server.recipient.user)")
            let shown = letters.map { letter in listed.filter { $0.contains(letter.subject) }.count }
            if shown == delivered { break }
            try await Task.sleep(for: .milliseconds(500))
            #expect(try await bob.run(["sync"]).status == 0)
            listed = try await bob.run(["list", "--limit", "1000"]).stdout.split(separator: "\n").map(String.init)
        }
        let duplicates = delivered.reduce(0) { $0 + max(0, $1 - 1) }
        #expect(delivered.allSatisfy { $0 >= 1 }, "lost on the server: \(delivered)")
        #expect(duplicates <= killCount, "\(duplicates) duplicates from \(killCount) kills: \(delivered)")
        for index in letters.indices {
            #expect(
                delivered[index] <= 1 + inFlightKills[index],
                "message \(index) was delivered \(delivered[index]) times, killed in flight \(inFlightKills[index])"
            )
        }

        // Every copy at bob has the text and the attachment bytes that were written.
        for line in listed {
            guard let index = letters.firstIndex(where: { line.contains($0.subject) }) else { continue }
            let id = try #require(line.split(separator: "\t").first.map(String.init))
            let shown = try await bob.run(["show", id])
            #expect(shown.status == 0, "\(shown.stderr)")
            let text = shown.stdout.replacingOccurrences(of: "\r\n", with: "\n")
            #expect(text.contains(letters[index].body.trimmingCharacters(in: .newlines)), "\(index): \(text)")
            let attachments = try await bob.run(["attachments", id]).stdout
            let attachmentID = try #require(attachments.split(separator: "\t").first.map(String.init), "\(attachments)")
            let saved = "\(folder.path)/saved-\(id).bin"
            #expect(try await bob.run(["attachment", "save", attachmentID, "--to", saved]).status == 0)
            #expect(try Array(Data(contentsOf: URL(fileURLWithPath: saved))) == letters[index].attachment, "\(index)")
        }

        // The canary scan: nothing written, attached, added or typed is in the clear in any file of alice's home or
        // runtime folder (bob's home is scanned for the messages he received).
        var needles = letters.flatMap(\.needles)
        let fixed = [contactName, contactAddress, Server.sender.password].map { Array($0.utf8) }
        needles += fixed
        let roots = [alice.home.path] + (alice.runtime.map { [$0.path] } ?? [])
        #expect(!TemporaryDirectory.files(below: alice.home.path).isEmpty)
        let hits = CanaryScanner.occurrences(of: needles, under: roots)
        #expect(
            hits.isEmpty,
            "in the clear: \(hits.map { "\($0.file): \(String(decoding: needles[$0.needle], as: UTF8.self))" })"
        )
        let bobRoots = [bob.home.path] + (bob.runtime.map { [$0.path] } ?? [])
        let bobHits = CanaryScanner.occurrences(of: letters.flatMap(\.needles), under: bobRoots)
        #expect(bobHits.isEmpty, "in the clear at bob: \(bobHits.map(\.file))")
        // The scanner finds each needle where it is in the clear.
        let control = TemporaryDirectory(prefix: "coffer-send-kill-control")
        try Data(needles.joined(separator: [0x0A])).write(to: URL(fileURLWithPath: "\(control.path)/control"))
        #expect(Set(CanaryScanner.occurrences(of: needles, under: [control.path]).map(\.needle)).count == needles.count)

        let delays = kills.map { "\($0.delay)\($0.killed ? ":\($0.phase)" : ":done")" }.joined(separator: " ")
        let phases = Dictionary(grouping: kills.filter(\.killed)) { $0.phase.split(separator: ":")[0] }
            .mapValues(\.count)
        print(
            "SendKillTests: seed \(seed), a whole send \(Int(sendTime * 1000)) ms, \(killCount) of \(Self.count) "
                + "sends killed \(phases.sorted { $0.key < $1.key }), delays (ms):where \(delays); drafts sent again after the restart: \(resent.sorted()); "
                + "deliveries \(delivered), duplicates \(duplicates); \(Int(Date().timeIntervalSince(started))) s"
        )
    }

    // MARK: - Pieces

    /// One `coffer send` and where its kill fell.
    struct Kill {
        var index: Int
        var delay: Int
        var killed = false
        /// `draft` (before the queue's commit), `smtp:N` (message N in flight: claimed, its sent state not
        /// committed), `sent-copy` (after a message's sent state committed, before its Sent copy ended it), `queued`
        /// (none of these: queued and not yet claimed, or between two steps).
        var phase = ""
    }

    /// The rows of `query` on `database`, opened read-only by Python's sqlite3 module (the oracle for the clear
    /// columns; Python already runs the test servers), one line each with its columns joined by `|`.
    static func sqlite(_ database: String, _ query: String) async throws -> [String] {
        let script = """
            import sqlite3, sys
            db = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True)
            for row in db.execute(sys.argv[2]): print("|".join(str(c) for c in row))
            """
        let result = try await awaitWaiting {
            try runCommand(["/usr/bin/env", "python3", "-c", script, database, query])
        }
        #expect(result.code == 0, "\(result.output)")
        return result.output.split(separator: "\n").map(String.init)
    }

    /// Message `index`: a subject, a body and a small attachment, each with its own canary.
    static func letter(_ index: Int, token: String, random: inout SplitMix) -> Letter {
        let number = index < 10 ? "0\(index)" : "\(index)"
        let subjectCanary = "SubjCanary\(token)N\(number)"
        let bodyCanary = "BodyCanary\(token)N\(number)"
        let attachmentCanary = "AttachCanary\(token)N\(number)"
        var attachment = Array(attachmentCanary.utf8)
        for _ in 0..<3000 { attachment.append(UInt8(truncatingIfNeeded: random.next())) }
        let base64 = Data(attachment).base64EncodedString()
        return Letter(
            subject: "kill-\(number) \(subjectCanary)",
            body: "Dear Bob,\n\nletter \(number): \(bodyCanary), with a line\n.\nof a dot.\n\nAlice\n",
            attachment: attachment,
            needles: [
                Array(subjectCanary.utf8), Array(bodyCanary.utf8), Array(attachmentCanary.utf8),
                Array(attachment[1000..<1040]), Array(base64.prefix(60).utf8),
            ]
        )
    }

    /// The draft id in `compose`'s "Kept as draft N: …".
    static func draftID(_ output: String) -> Int64? {
        guard let range = output.range(of: "Kept as draft ") else { return nil }
        return Int64(output[range.upperBound...].prefix { $0.isNumber })
    }

    /// Starts `coffer send draft`, SIGKILLs it (and its process group) after `milliseconds`, and waits for it.
    /// Returns whether it was killed (it had not finished with "Sent").
    static func sendAndKill(_ cli: CLIRunner, draft: Int64, afterMilliseconds milliseconds: Int) async throws -> Bool {
        let (process, stdout, stderr) = try cli.start(["send", String(draft)])
        let begun = Date()
        // `setsid --wait` forks when it leads a process group (Foundation's Process gives it one): coffer is its
        // child, in a session and group of its own. Without a fork, the process is coffer itself.
        var target: pid_t?
        while target == nil && process.isRunning {
            target = Self.coffer(under: process.processIdentifier)
            if target == nil { try await Task.sleep(for: .microseconds(500)) }
        }
        let left = Double(milliseconds) / 1000 - Date().timeIntervalSince(begun)
        if left > 0 { try await Task.sleep(for: .seconds(left)) }
        if let target {
            kill(target, SIGKILL)
            kill(-target, SIGKILL)
        }
        let out = String(decoding: stdout.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let err = String(decoding: stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let finished = process.terminationReason == .exit && process.terminationStatus == 0
        if finished { #expect(out.contains("Sent"), "\(out) \(err)") }
        return !finished
    }

    /// The coffer process of the `setsid` process `pid`: itself once it runs coffer (which becomes coffer-core for
    /// a send), else its child.
    static func coffer(under pid: pid_t) -> pid_t? {
        if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe"),
            exe.hasSuffix("/coffer") || exe.hasSuffix("/coffer-core")
        {
            return pid
        }
        guard let children = try? String(contentsOfFile: "/proc/\(pid)/task/\(pid)/children", encoding: .utf8)
        else { return nil }
        return children.split(separator: " ").first.flatMap { pid_t($0) }
    }

    /// How many messages of bob's Maildir carry each letter's subject.
    static func deliveries(of letters: [Letter], maildir: String) throws -> [Int] {
        let files = TemporaryDirectory.files(below: maildir).filter {
            !$0.split(separator: "/").last!.hasPrefix("dovecot")
        }
        var counts = Array(repeating: 0, count: letters.count)
        for file in files {
            let text = String(decoding: try Data(contentsOf: URL(fileURLWithPath: file)), as: UTF8.self)
            for (index, letter) in letters.enumerated()
            where text.contains("Subject: \(letter.subject)\r\n")
                || text.contains("Subject: \(letter.subject)\n")
            {
                counts[index] += 1
            }
        }
        return counts
    }
}
