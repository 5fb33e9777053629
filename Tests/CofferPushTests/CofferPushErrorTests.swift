import Testing

@testable import CofferPush

@Suite("CofferPushError descriptions")
struct CofferPushErrorTests {
    static let all: [CofferPushError] = [
        .truncated, .invalidRecordSize(17), .invalidKeyID(expected: 65, actual: 3), .malformedRecord("a reason"),
        .invalidPadding, .authenticationFailed, .invalidPublicKey,
        .invalidLength(what: "auth secret", expected: 16, actual: 15), .plaintextTooLarge(maximum: 3993, actual: 4000),
        .invalidParameter("a reason"), .malformedToken("a reason"), .invalidSignature, .tokenExpired,
        .tokenLifetimeTooLong, .wrongAudience, .invalidSubject,
    ]

    @Test("Every description is a distinct sentence for people")
    func sentences() {
        let texts = Self.all.map(\.description)
        for text in texts {
            #expect(text.first?.isUppercase == true, "\(text)")
            #expect(text.hasSuffix("."), "\(text)")
        }
        #expect(Set(texts).count == texts.count)
    }
}
