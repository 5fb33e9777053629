import CofferPush
import Testing

/// Issue 23: a push's sender, subject and FastSync key never appear in its description or dump.
@Suite struct PushRedactionTests {
    @Test func aPushPrintsAndDumpsNeitherItsTextNorItsKey() {
        var push = PushMessage(
            folder: "INBOX",
            uidValidity: 7,
            uid: 42,
            from: "sender-canary@example.org",
            subject: "subject canary 91f3"
        )
        push.fastSync = .init(kek: "kek-canary-3bd01e", expires: 1_900_000_000)
        var dumped = ""
        dump(push, to: &dumped)
        for text in [String(describing: push), String(reflecting: push), "\([push])", dumped] {
            for secret in ["sender-canary", "subject canary", "kek-canary"] {
                #expect(!text.contains(secret), "\(text)")
            }
            #expect(text.contains("INBOX"), "\(text)")
        }
    }
}
