import CofferTesting
import Foundation
import NIOConcurrencyHelpers
import Testing

@testable import CofferIMAP

/// IMAP ID (RFC 2971), which coffer-notify sends before LOGIN to name the client it logs in for: every field and value
/// quoted (an address would otherwise go out as an atom, which the ID grammar does not allow), and nothing that could
/// end the line or smuggle a second command.
@Suite(.serialized) struct IDCommandTests {
    @Test func theFieldsAreQuotedStrings() throws {
        var encoder = IMAPCommandEncoder()
        let fields: [IMAPArgument] = [
            .quoted(Array("x-originating-ip".utf8)), .quoted(Array("2001:db8::5".utf8)),
            .quoted(Array("x-originating-port".utf8)), .quoted(Array("51234".utf8)),
            .quoted(Array("name".utf8)), .quoted(Array("a \"b\" \\c".utf8)),
        ]
        let encoded = try encoder.encode(IMAPCommand("ID", [.list(fields)]))
        #expect(
            encoded.parts.map { String(decoding: $0, as: UTF8.self) } == [
                "C1 ID (\"x-originating-ip\" \"2001:db8::5\" \"x-originating-port\" \"51234\" \"name\" \"a \\\"b\\\" \\\\c\")\r\n"
            ]
        )
    }

    @Test(arguments: [
        "192.0.2.7\r\nC2 LOGIN alice secret", "192.0.2.7\n", "192.0.2.7\r", "192.0.2.7\0", "Grüße",
        String(repeating: "a", count: 1025),
    ])
    func aQuotedStringThatCouldEndTheLineIsRefused(_ value: String) {
        var encoder = IMAPCommandEncoder()
        #expect(throws: IMAPError.self) {
            _ = try encoder.encode(IMAPCommand("ID", [.list([.quoted(Array("x".utf8)), .quoted(Array(value.utf8))])]))
        }
    }

    @Test func dovecotTakesTheIDAndAnInjectionIsRefusedBeforeAnythingIsSent() async throws {
        let server = try await LiveDovecot.start()
        defer { server.stop() }
        let sent = NIOLockedValueBox<[String]>([])
        var configuration = try server.configuration()
        configuration.onCommand = { name in sent.withLockedValue { $0.append(name) } }
        let client = try await IMAPClient.connect(configuration)
        let before = sent.withLockedValue { $0 }
        for fields in [
            [("x-originating-ip", "192.0.2.7\r\nC9 LOGOUT")],
            [("x-originating-ip", "192.0.2.7\0")],
            [("x-originating-ip", String(repeating: "1", count: 1025))],
            [(String(repeating: "x", count: 31), "1")],
            Array(repeating: ("x-a", "1"), count: 31),
        ] {
            await #expect(throws: IMAPError.self) { try await client.id(fields) }
        }
        #expect(sent.withLockedValue { $0 } == before)
        // The connection is untouched: the ID goes through and the login is logged with the address it names.
        try await client.id([("x-originating-ip", "192.0.2.7"), ("x-originating-port", "51234")])
        #expect(sent.withLockedValue { $0 }.last == "ID")
        try await client.login(user: LiveDovecot.user, password: LiveDovecot.password)
        await client.logout()
        let log = try String(contentsOfFile: "\(server.server.dir)/dovecot.log", encoding: .utf8)
        let login = log.split(separator: "\n").filter { $0.contains("Login: user=<\(LiveDovecot.user)>") }
        #expect(login.count == 1)
        #expect(login.first?.contains("rip=192.0.2.7") == true, "\(login)")
    }
}
