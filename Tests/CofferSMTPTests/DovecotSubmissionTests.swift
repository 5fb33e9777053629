import CofferIMAP
import CofferSMTP
import CofferTesting
import CofferTransport
import Crypto
import Foundation
import NIOConcurrencyHelpers
import Testing

/// Sending through a real submission server: Dovecot's submission service, relaying through a private Postfix back
/// into Dovecot, checked at the recipient's INBOX over IMAP.
@Suite struct DovecotSubmissionTests {
    private typealias Server = LiveSubmission

    @Test(arguments: [ServerEndpoint.Security.implicitTLS, .startTLS])
    func aMessageSentWithAuthArrivesByteIdentical(_ security: ServerEndpoint.Security) async throws {
        let server = try await Server.start()
        defer { server.stop() }
        let client = try await SMTPClient.connect(
            to: try server.endpoint(security: security),
            credentials: Server.senderCredentials,
            timeouts: .tests
        )
        guard case .matched = await client.pinEvaluation else {
            Issue.record("expected a matched pin, got \(await client.pinEvaluation)")
            return
        }
        // What the server said before TLS is forgotten: over TLS Dovecot offers AUTH and no longer STARTTLS.
        let capabilities = await client.capabilities
        #expect(!capabilities.offers("STARTTLS"))
        #expect(capabilities.authMechanisms.contains("PLAIN"))
        let message = testMessage(subject: "over \(security)", body: "Hello Bob.\r\nA second line.\r\n")
        let receipt = try await client.send(
            from: Server.sender.address,
            to: [Server.recipient.address],
            declaredSize: message.count,
            body: ChunkedBody(bytes: message)
        )
        #expect(receipt.reply.code == 250)
        #expect(receipt.recipients == [Server.recipient.address])
        await client.quit()
        let inbox = try await server.recipientInbox(count: 1)
        #expect(inbox.count == 1)
        // Dovecot and Postfix put trace fields (Received, Return-Path, Delivered-To) in front; the rest is ours.
        #expect(inbox.first?.hasSuffix(message) == true)
    }

    @Test func linesStartingWithADotArriveAsWrittenAndBareLineFeedsAsCRLF() async throws {
        let server = try await Server.start()
        defer { server.stop() }
        let client = try await SMTPClient.connect(
            to: try server.endpoint(),
            credentials: Server.senderCredentials,
            timeouts: .tests
        )
        let body = ".leading dot\r\n..two dots\r\n.\r\nnot the end\r\n. space\r\nbare\nline feed\n.\n"
        let message = testMessage(subject: "dots", body: body)
        _ = try await client.send(
            from: Server.sender.address,
            to: [Server.recipient.address],
            body: ChunkedBody(bytes: message, chunkSize: 3)
        )
        await client.quit()
        let inbox = try await server.recipientInbox(count: 1)
        let expected = testMessageNormalized(message)
        #expect(inbox.first?.hasSuffix(expected) == true, "got \(String(decoding: inbox.first ?? [], as: UTF8.self))")
    }

    /// The message as the recipient must see it: every bare LF made CRLF, nothing else changed.
    private func testMessageNormalized(_ message: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        for (index, byte) in message.enumerated() {
            if byte == 0x0A, index == 0 || message[index - 1] != 0x0D { out.append(0x0D) }
            out.append(byte)
        }
        return out
    }

    @Test(arguments: [
        (ServerEndpoint.Security.implicitTLS, ["b", "backup"], false),
        (.implicitTLS, ["a", "backup"], true),
        (.startTLS, ["b", "backup"], false),
        (.startTLS, ["a", "backup"], true),
    ])
    func aCertificateThatIsNotPinnedOrNotTrustedIsRefusedBeforeAuth(
        _ security: ServerEndpoint.Security,
        _ pins: [String],
        _ rogueCA: Bool
    ) async throws {
        let server = try await Server.start()
        defer { server.stop() }
        // Either a valid chain whose key is not pinned, or the right key under a CA the endpoint does not trust.
        let endpoint = try server.endpoint(
            security: security,
            pinned: pins,
            caFile: rogueCA ? "\(server.certs)/rogue-ca.pem" : nil
        )
        await #expect {
            _ = try await SMTPClient.connect(to: endpoint, credentials: Server.senderCredentials, timeouts: .tests)
        } throws: { error in
            guard let error = error as? SMTPError, case .transport(let transport) = error else { return false }
            switch transport {
            case .pinMismatch: return !rogueCA && error.failureClass == .security
            case .untrustedChain: return rogueCA && error.failureClass == .security
            default: return false
            }
        }
        // The server saw the connection end in the TLS handshake, with no authentication attempt.
        let line = try await server.waitForLogLine(containing: ["submission-login", "Disconnected", "TLS handshaking"])
        #expect(line?.contains("no auth attempts") == true, "log: \(server.log())")
        #expect(!server.log().contains("auth failed"))
        #expect(!server.log().contains("Login: user=<"))
    }

    @Test func aWrongPasswordIsAnAuthenticationErrorThatNamesNoPassword() async throws {
        let server = try await Server.start()
        defer { server.stop() }
        let wrong = "wrong-canary-password-4711"
        let endpoint = try server.endpoint()
        do throws(SMTPError) {
            _ = try await SMTPClient.connect(
                to: endpoint,
                credentials: SMTPCredentials(user: Server.sender.user, password: wrong),
                timeouts: .tests
            )
            Issue.record("the wrong password was accepted")
        } catch {
            guard case .authenticationFailed(let reply) = error else {
                Issue.record("expected authenticationFailed, got \(error)")
                return
            }
            #expect(reply.code == 535)
            #expect(error.failureClass == .permanent)
            #expect(!"\(error)".contains(wrong))
            #expect(!String(reflecting: error).contains(wrong))
            #expect(!"\(error)".contains(Data(wrong.utf8).base64EncodedString()))
        }
    }

    @Test func aRefusedRecipientFailsTheSendForEveryoneAndTheConnectionGoesOn() async throws {
        let server = try await Server.start()
        defer { server.stop() }
        let client = try await SMTPClient.connect(
            to: try server.endpoint(),
            credentials: Server.senderCredentials,
            timeouts: .tests
        )
        let message = testMessage(subject: "to two", body: "Hello.\r\n")
        do throws(SMTPError) {
            _ = try await client.send(
                from: Server.sender.address,
                to: [Server.recipient.address, "nobody@coffer.test"],
                body: ChunkedBody(bytes: message)
            )
            Issue.record("the unknown recipient was accepted")
        } catch {
            guard case .recipientsRefused(let refusals) = error else {
                Issue.record("expected recipientsRefused, got \(error)")
                return
            }
            #expect(refusals.map(\.address) == ["nobody@coffer.test"])
            #expect(refusals.first?.reply.code == 550)
            #expect(refusals.first?.reply.enhancedCode == "5.1.1")
            #expect(error.failureClass == .permanent)
        }
        // The transaction was reset: the same connection sends the next message, and only that one arrives.
        let second = testMessage(subject: "after the refusal", body: "Only this one.\r\n")
        _ = try await client.send(
            from: Server.sender.address,
            to: [Server.recipient.address],
            body: ChunkedBody(bytes: second, chunkSize: 4096)
        )
        await client.quit()
        let inbox = try await server.recipientInbox(count: 1)
        try await Task.sleep(for: .milliseconds(500))
        #expect(try await server.recipientCount() == 1)
        #expect(inbox.first?.hasSuffix(second) == true)
    }

    @Test func aRefusalAtTheEndOfDataIsPermanentWithTheServersReason() async throws {
        let server = try await Server.start(maxSize: 100_000, rejectSubject: "refuse-me-on-data")
        defer { server.stop() }
        let client = try await SMTPClient.connect(
            to: try server.endpoint(),
            credentials: Server.senderCredentials,
            timeouts: .tests
        )
        #expect(await client.capabilities.sizeLimit == 100_000)
        // The relay's content filter refuses it after the whole message was sent.
        let filtered = testMessage(subject: "refuse-me-on-data", body: "x\r\n")
        await #expect {
            _ = try await client.send(
                from: Server.sender.address,
                to: [Server.recipient.address],
                body: ChunkedBody(bytes: filtered)
            )
        } throws: { error in
            guard let error = error as? SMTPError, case .commandRefused(let command, let reply) = error else {
                return false
            }
            return command == "the message data" && reply.code == 550 && reply.enhancedCode == "5.7.1"
                && reply.text.contains("refuses this message") && error.failureClass == .permanent
        }
        // Over the size limit without a declared size: the server refuses it at the end of DATA.
        let large = testMessage(
            subject: "large",
            body: String(repeating: "0123456789abcdef0123456789\r\n", count: 5000)
        )
        await #expect {
            _ = try await client.send(
                from: Server.sender.address,
                to: [Server.recipient.address],
                body: ChunkedBody(bytes: large, chunkSize: 8192)
            )
        } throws: { error in
            guard let error = error as? SMTPError, case .commandRefused(_, let reply) = error else { return false }
            return reply.code == 552 && error.failureClass == .permanent
        }
        // With its size declared, it is refused before a byte of it is sent.
        if await client.isConnected {
            await #expect(throws: SMTPError.messageTooLarge(size: large.count, limit: 100_000)) {
                _ = try await client.send(
                    from: Server.sender.address,
                    to: [Server.recipient.address],
                    declaredSize: large.count,
                    body: ChunkedBody(bytes: large, chunkSize: 8192)
                )
            }
        }
        await client.quit()
        #expect(try await server.recipientCount() == 0)
    }
}

/// The 25 MB message: streamed to the socket with flat memory, and delivered whole. The growth measured is the whole
/// process's resident set, so scripts/test.sh runs this suite alone (other suites' allocations would count).
@Suite(.serialized) struct StreamedSubmissionTests {
    @Test func a25MBMessageIsSentWithFlatMemoryAndArrivesWhole() async throws {
        let server = try await LiveSubmission.start()
        defer { server.stop() }
        let client = try await SMTPClient.connect(
            to: try server.endpoint(),
            credentials: LiveSubmission.senderCredentials,
            timeouts: .tests
        )
        let header = testMessage(subject: "25 MB", body: "")
        let body = GeneratedBody(header: header, lines: 25 * 1024 * 1024 / 78)
        #expect(body.size > 25_000_000)
        let sampler = ResidentSetSampler()
        let before = ResidentSetSampler.current()
        let receipt = try await client.send(
            from: LiveSubmission.sender.address,
            to: [LiveSubmission.recipient.address],
            declaredSize: body.size,
            body: body
        )
        let peak = sampler.stop()
        await client.quit()
        let growth = peak - before
        print("25 MB send: \(body.size) bytes, peak resident set growth \(growth / 1024) KiB")
        #expect(receipt.dataBytes == body.size + 3)
        #expect(growth < 16 * 1024 * 1024, "the resident set grew by \(growth) bytes while sending")
        let sent = body.digest.withLockedValue { Array($0.finalize()) }

        // At the recipient: the same bytes after the trace fields, hashed as they stream in.
        _ = try await server.recipientInbox(count: 0)
        let imap = try await server.imap(
            user: LiveSubmission.recipient.user,
            password: LiveSubmission.recipient.password
        )
        var found = false
        for _ in 0..<300 where !found {
            _ = try await imap.select("INBOX", readOnly: true)
            found = try await !imap.uidSearch(["ALL"]).isEmpty
            if !found { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(found)
        let sizes = try await imap.uidFetch("1", body: false)
        let total = Int(sizes.first?.size ?? 0)
        let skip = total - body.size
        #expect(skip > 0)
        let received = NIOLockedValueBox((seen: 0, digest: SHA256()))
        _ = try await imap.uidFetch("1", body: true) { _, chunk in
            received.withLockedValue { state in
                let start = max(0, skip - state.seen)
                if start < chunk.count { state.digest.update(data: chunk[start...]) }
                state.seen += chunk.count
            }
        }
        await imap.logout()
        let (seen, digest) = received.withLockedValue { ($0.seen, Array($0.digest.finalize())) }
        #expect(seen == total)
        #expect(digest == sent)
    }
}

/// The relay's side of `DovecotServerOwnerTests`, run on its own by `scripts/test.sh` for the same reason.
@Suite struct SubmissionServerOwnerTests {
    /// A killed test run cannot stop its servers: the harness's watcher stops the relay Postfix and Dovecot once
    /// the process that started them has ended (a stand-in owner, killed here).
    @Test func bothServersStopOnceTheProcessThatStartedThemHasEnded() async throws {
        let owner = try TestServers.standInOwner()
        let server = try await LiveSubmission.start(owner: owner)
        defer { server.stop() }
        let pidFile = "\(server.dir)/relay/spool/pid/master.pid"
        let relay = try #require(
            Int32(try String(contentsOfFile: pidFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines))
        )
        #expect(!TestServers.hasEnded(server.pid) && !TestServers.hasEnded(relay), "Dovecot or its relay did not run")
        await TestServers.end(owner: owner, thenAwait: [server.pid, relay])
        #expect(TestServers.hasEnded(server.pid), "Dovecot still runs after its owner ended")
        #expect(TestServers.hasEnded(relay), "the relay Postfix still runs after its owner ended")
    }
}
