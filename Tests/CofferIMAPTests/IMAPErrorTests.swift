import Testing

@testable import CofferIMAP

@Suite struct IMAPErrorTests {
    static let all: [IMAPError] = [
        .lineTooLong(limit: 10), .literalTooLarge(size: 11, limit: 10), .responseTooLarge(limit: 10),
        .syntax(expected: "a number", offset: 3), .nestingTooDeep(limit: 8), .unencodable(reason: "a NUL byte"),
        .commandFailed(command: "LOGIN", status: "NO", code: "AUTHENTICATIONFAILED", text: "Authentication failed"),
        .missingCapability("UIDPLUS"), .connectionClosed, .unexpectedResponse(expected: "'+'"), .cancelled,
        .transport("The connection to mail.coffer.test was refused."),
    ]

    @Test(arguments: all)
    func descriptionIsASentence(_ error: IMAPError) {
        let text = error.description
        #expect(text.first?.isUppercase == true)
        #expect(text.hasSuffix("."))
    }

    @Test func descriptionsAreDistinct() {
        #expect(Set(Self.all.map(\.description)).count == Self.all.count)
    }

    @Test func serverTextIsShortenedAndStrippedOfControlBytes() {
        let text = IMAPError.serverText("bad\r\n\u{1B}[31m" + String(repeating: "x", count: 500))
        #expect(text.count == 160)
        #expect(!text.contains("\r") && !text.contains("\u{1B}"))
        #expect(IMAPError.serverText("\r\n") == "(no reason given)")
    }
}
