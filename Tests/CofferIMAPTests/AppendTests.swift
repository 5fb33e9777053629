import CofferTesting
import Foundation
import NIOConcurrencyHelpers
import Testing

@testable import CofferIMAP

/// APPEND streamed from chunks (the outbox's Sent copy): the server stores exactly the bytes sent, with the flags,
/// and says the UID; a message that does not match its announced size never becomes a message.
@Suite(.serialized) struct AppendTests {
    /// Chunks of `message`, `size` bytes each, handed out one at a time.
    final class Chunks: Sendable {
        private let remaining: NIOLockedValueBox<ArraySlice<UInt8>>
        private let size: Int

        init(_ message: [UInt8], size: Int) {
            remaining = NIOLockedValueBox(message[...])
            self.size = size
        }

        func next() -> [UInt8]? {
            remaining.withLockedValue { rest in
                guard !rest.isEmpty else { return nil }
                let chunk = Array(rest.prefix(size))
                rest = rest.dropFirst(size)
                return chunk
            }
        }
    }

    static func message(bodyLines: Int) -> [UInt8] {
        var text =
            "From: Alice <alice@coffer.test>\r\nTo: bob@coffer.test\r\nSubject: sent copy\r\n"
            + "Message-ID: <append-test@coffer.test>\r\nMIME-Version: 1.0\r\n\r\n"
        for line in 0..<bodyLines { text += "line \(line) of the sent copy, streamed in chunks\r\n" }
        return Array(text.utf8)
    }

    @Test func aStreamedAppendStoresTheExactBytesWithTheirFlagsAndUID() async throws {
        let server = try await LiveDovecot.start()
        defer { server.stop() }
        let client = try await IMAPClient.connect(try server.configuration())
        try await client.login(user: LiveDovecot.user, password: LiveDovecot.password)
        // About 2.3 MB in 64 KiB chunks.
        let message = Self.message(bodyLines: 45_000)
        let chunks = Chunks(message, size: 64 * 1024)
        let appended = try await client.append(mailbox: "INBOX", flags: ["\\Seen"], size: message.count) {
            chunks.next()
        }
        #expect(appended?.uid == 1)
        let stored = try await server.imaplibMessages()
        #expect(stored.count == 1)
        #expect(stored.first?.body == message)
        #expect(stored.first?.flags.contains("\\Seen") == true)
        await client.logout()
    }

    /// The Sent copy goes up beside the SMTP transaction and is kept only if the message was accepted: an APPEND
    /// whose verdict is "no" after its whole literal leaves nothing in the mailbox, one whose verdict is "yes" stores
    /// the message, and the verdict is asked only once every byte was written.
    @Test func anAppendHeldAfterItsLiteralIsStoredOnlyWhenKept() async throws {
        let server = try await LiveDovecot.start()
        defer { server.stop() }
        let message = Self.message(bodyLines: 20_000)
        let asked = NIOLockedValueBox<[Bool]>([])
        for keep in [false, true] {
            let client = try await IMAPClient.connect(try server.configuration())
            try await client.login(user: LiveDovecot.user, password: LiveDovecot.password)
            let chunks = Chunks(message, size: 64 * 1024)
            let append = {
                try await client.append(
                    mailbox: "INBOX",
                    flags: ["\\Seen"],
                    size: message.count,
                    keep: {
                        // Asked after the last chunk: nothing is left to read.
                        asked.withLockedValue { $0.append(chunks.next() == nil) }
                        // Give the server time to have read the whole literal before the verdict.
                        try? await Task.sleep(for: .milliseconds(300))
                        return keep
                    },
                    nextChunk: { chunks.next() }
                )
            }
            if keep {
                #expect(try await append() != nil)
                await client.logout()
            } else {
                await #expect(throws: IMAPError.appendWithdrawn) { _ = try await append() }
                await #expect(throws: IMAPError.connectionClosed) { _ = try await client.noop() }
                // Dovecot discards the message when the connection ends mid-command.
                await #expect(try server.imaplibMessages().isEmpty)
            }
        }
        #expect(asked.withLockedValue { $0 } == [true, true])
        let stored = try await server.imaplibMessages()
        #expect(stored.count == 1)
        #expect(stored.first?.body == message)
    }

    @Test func aMessageShorterOrLongerThanAnnouncedOrWithANulIsNeverStored() async throws {
        let server = try await LiveDovecot.start()
        defer { server.stop() }
        let message = Self.message(bodyLines: 10)
        var withNul = message
        withNul[withNul.count - 3] = 0
        let cases: [(announced: Int, bytes: [UInt8])] = [
            (message.count + 10, message), (message.count - 10, message), (withNul.count, withNul),
        ]
        for (announced, bytes) in cases {
            let client = try await IMAPClient.connect(try server.configuration())
            try await client.login(user: LiveDovecot.user, password: LiveDovecot.password)
            let chunks = Chunks(bytes, size: 100)
            await #expect(throws: IMAPError.self) {
                _ = try await client.append(mailbox: "INBOX", size: announced) { chunks.next() }
            }
            // The literal could not be finished: the connection is closed, not left mid-command.
            await #expect(throws: IMAPError.connectionClosed) { _ = try await client.noop() }
        }
        await #expect(try server.imaplibMessages().isEmpty)
    }

    @Test func aRefusedMailboxIsTheServersTypedRefusalBeforeAnyByteOfTheMessage() async throws {
        let server = try await LiveDovecot.start()
        defer { server.stop() }
        let client = try await IMAPClient.connect(try server.configuration())
        try await client.login(user: LiveDovecot.user, password: LiveDovecot.password)
        let read = NIOLockedValueBox(0)
        let message = Self.message(bodyLines: 10)
        do {
            _ = try await client.append(mailbox: "No/Such/Folder", size: message.count) {
                read.withLockedValue { $0 += 1 }
                return nil
            }
            Issue.record("an APPEND to a missing folder succeeded")
        } catch {
            guard case .commandFailed(let command, let status, _, _) = error else {
                Issue.record("expected commandFailed, got \(error)")
                return
            }
            #expect(command == "APPEND" && status == "NO")
        }
        #expect(read.withLockedValue { $0 } == 0, "message bytes were read before the server's '+'")
        // The connection is still usable.
        _ = try await client.noop()
        await client.logout()
    }
}
