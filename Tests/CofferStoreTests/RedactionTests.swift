import CofferMIME
import CofferStore
import CofferTransport
import Foundation
import Testing

/// Issue 23: a settings type that holds a password prints and dumps without it.
@Suite struct RedactionTests {
    @Test func aServerAccountNeverPrintsOrDumpsItsPassword() {
        let password = "hunter2-canary-\(UUID().uuidString)"
        let smtpPassword = "smtp-canary-\(UUID().uuidString)"
        var account = ServerAccount(
            host: "imap.example.org",
            port: 993,
            username: "alice",
            password: password,
            pins: ["pin"],
            pinReportURL: "https://report.example.org/"
        )
        account.submission = SubmissionServer(
            endpoint: ServerEndpoint(host: "smtp.example.org", port: 465),
            address: MailAddress(name: "Alice", address: "alice@example.org"),
            username: "alice-smtp",
            password: smtpPassword
        )
        var dumped = ""
        dump(account, to: &dumped)
        for text in [
            String(describing: account), String(reflecting: account), "\(account)", dumped, "\([account])",
        ] {
            #expect(!text.contains(password) && !text.contains(smtpPassword), "\(text)")
            #expect(text.contains("alice") && text.contains("imap.example.org"), "\(text)")
        }
        #expect(dumped.contains("<redacted>") && dumped.contains("report.example.org"))
        #expect(dumped.contains("smtp.example.org") && dumped.contains("alice-smtp"))
    }
}
