import Foundation
import Testing

@testable import CofferSMTP

@Suite struct SMTPCommandTests {
    private func line(_ command: SMTPCommand) throws(SMTPError) -> String {
        String(decoding: try command.encoded(), as: UTF8.self)
    }

    @Test func commandsAreOneCRLFLine() throws {
        #expect(try line(.ehlo("[127.0.0.1]")) == "EHLO [127.0.0.1]\r\n")
        #expect(try line(.mail(from: "a@b.test", size: 42)) == "MAIL FROM:<a@b.test> SIZE=42\r\n")
        #expect(try line(.mail(from: "", size: nil)) == "MAIL FROM:<>\r\n")
        #expect(try line(.rcpt(to: "c@d.test")) == "RCPT TO:<c@d.test>\r\n")
        #expect(try line(.data) == "DATA\r\n")
        #expect(try line(.quit) == "QUIT\r\n")
    }

    @Test func authPlainCarriesTheRFC4616Token() throws {
        let encoded = try line(.authPlain(user: "alice", password: "pw"))
        #expect(encoded == "AUTH PLAIN " + Data("\0alice\0pw".utf8).base64EncodedString() + "\r\n")
        // The verb, which is all that errors and the command hook ever see, holds no credential.
        #expect(SMTPCommand.authPlain(user: "alice", password: "pw").verb == "AUTH")
    }

    @Test(arguments: [
        "a@b.test\r\nRCPT TO:<evil@x.test>", "a@b.test>", "<a@b.test", "a b@c.test", "a@b.test\n", "ä@b.test",
        "no-at-sign", "@b.test", "a@", "a@b@c.test", "a\"@b.test", String(repeating: "a", count: 250) + "@b.test",
        "a@b.test SIZE=1", "a@b.test\0",
    ])
    func addressesThatCouldBreakTheCommandAreRefused(_ address: String) {
        #expect(throws: SMTPError.self) { try SMTPCommand.rcpt(to: address).encoded() }
        #expect(throws: SMTPError.self) { try SMTPCommand.mail(from: address, size: nil).encoded() }
    }

    @Test func anEmptyRecipientIsRefusedButTheNullSenderIsNot() throws {
        #expect(throws: SMTPError.self) { try SMTPCommand.rcpt(to: "").encoded() }
        #expect(try line(.mail(from: "", size: nil)) == "MAIL FROM:<>\r\n")
    }

    @Test(arguments: ["bad name", "x\r\nQUIT", "", "a_b"])
    func aBadHelloNameIsRefused(_ name: String) {
        #expect(throws: SMTPError.self) { try SMTPCommand.ehlo(name).encoded() }
    }

    @Test func credentialsNeverPrintThePassword() {
        let credentials = SMTPCredentials(user: "alice", password: "canary-password-77")
        #expect(!"\(credentials)".contains("canary"))
        #expect(!String(reflecting: credentials).contains("canary"))
        var dumped = ""
        dump(credentials, to: &dumped)
        #expect(!dumped.contains("canary"))
    }

    @Test func failuresAreClassified() {
        let transient = SMTPServerReply(code: 451, enhancedCode: "4.3.0", text: "try later")
        let permanent = SMTPServerReply(code: 554, enhancedCode: "5.7.1", text: "no")
        #expect(SMTPError.commandRefused(command: "DATA", reply: transient).failureClass == .transient)
        #expect(SMTPError.commandRefused(command: "DATA", reply: permanent).failureClass == .permanent)
        #expect(SMTPError.authenticationFailed(permanent).failureClass == .permanent)
        #expect(SMTPError.plaintextAfterStartTLS.failureClass == .security)
        #expect(SMTPError.startTLSNotOffered.failureClass == .security)
        #expect(SMTPError.transport(.pinMismatch(host: "h", expected: [], seen: [])).failureClass == .security)
        #expect(SMTPError.transport(.untrustedChain(host: "h", reason: "r")).failureClass == .security)
        #expect(SMTPError.transport(.connectFailed(host: "h", port: 1, reason: "r")).failureClass == .transient)
        #expect(SMTPError.timedOut(seconds: 5).failureClass == .transient)
        #expect(SMTPError.replyLostAfterData.failureClass == .transient)
        let mixed = SMTPError.recipientsRefused([
            SMTPRecipientRefusal(address: "a@b.test", reply: transient),
            SMTPRecipientRefusal(address: "c@d.test", reply: permanent),
        ])
        #expect(mixed.failureClass == .permanent)
        let onlyTransient = SMTPError.recipientsRefused([SMTPRecipientRefusal(address: "a@b.test", reply: transient)])
        #expect(onlyTransient.failureClass == .transient)
    }
}
