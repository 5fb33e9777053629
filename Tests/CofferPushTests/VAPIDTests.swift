import Crypto
import Foundation
import Testing

@testable import CofferPush

@Suite("RFC 8292 VAPID")
struct VAPIDTests {
    static let audience = "https://push.example.net"
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    static func signer() throws -> VAPID.Signer {
        try VAPID.Signer(privateKey: P256.Signing.PrivateKey(), subject: "mailto:ops@example.org")
    }

    @Test("A signed token verifies with its claims, through the Authorization header too")
    func signAndVerify() throws {
        let signer = try Self.signer()
        let token = try signer.token(audience: Self.audience, now: Self.now, lifetime: 3600)
        let claims = try VAPID.verify(
            token: token,
            publicKey: signer.privateKey.publicKey,
            audience: Self.audience,
            now: Self.now
        )
        #expect(
            claims == VAPID.Claims(audience: Self.audience, expiry: Self.now + 3600, subject: "mailto:ops@example.org")
        )
        let header = try signer.authorization(audience: Self.audience, now: Self.now)
        #expect(header.hasPrefix("vapid t="))
        let verified = try VAPID.verify(authorization: header, audience: Self.audience, now: Self.now)
        #expect(verified.publicKey == signer.publicKey)
        #expect(verified.claims.expiry == Self.now + 12 * 3600)
    }

    @Test("The header's JOSE header and claims are what RFC 8292 names")
    func tokenShape() throws {
        let token = try Self.signer().token(audience: Self.audience, now: Self.now)
        let parts = token.split(separator: ".")
        #expect(parts.count == 3)
        #expect(
            Base64URL.decode(parts[0]).map { String(decoding: $0, as: UTF8.self) } == #"{"typ":"JWT","alg":"ES256"}"#
        )
        let claims = try JSONDecoder().decode(
            VAPID.TokenPayload.self,
            from: Data(try #require(Base64URL.decode(parts[1])))
        )
        #expect(claims.aud == Self.audience)
        #expect(claims.sub == "mailto:ops@example.org")
        #expect(claims.exp == 1_800_000_000 + 12 * 3600)
        #expect(try #require(Base64URL.decode(parts[2])).count == 64)
    }

    @Test("An expired token is refused")
    func expired() throws {
        let signer = try Self.signer()
        let token = try signer.token(audience: Self.audience, now: Self.now, lifetime: 60)
        #expect(throws: CofferPushError.tokenExpired) {
            try VAPID.verify(
                token: token,
                publicKey: signer.privateKey.publicKey,
                audience: Self.audience,
                now: Self.now + 60
            )
        }
    }

    @Test("A lifetime over 24 hours is refused when signing and when verifying")
    func tooLong() throws {
        let signer = try Self.signer()
        #expect(throws: CofferPushError.tokenLifetimeTooLong) {
            try signer.token(audience: Self.audience, now: Self.now, lifetime: 24 * 3600 + 1)
        }
        // Signed "now" for 24 h, checked by a verifier whose clock is an hour behind: 25 h ahead of it.
        let token = try signer.token(audience: Self.audience, now: Self.now, lifetime: 24 * 3600)
        #expect(throws: CofferPushError.tokenLifetimeTooLong) {
            try VAPID.verify(
                token: token,
                publicKey: signer.privateKey.publicKey,
                audience: Self.audience,
                now: Self.now - 3600
            )
        }
    }

    @Test("A token for another push service is refused")
    func wrongAudience() throws {
        let signer = try Self.signer()
        let token = try signer.token(audience: "https://other.example.com", now: Self.now)
        #expect(throws: CofferPushError.wrongAudience) {
            try VAPID.verify(
                token: token,
                publicKey: signer.privateKey.publicKey,
                audience: Self.audience,
                now: Self.now
            )
        }
    }

    @Test("A token verified under another key, or with a key swapped in the header, is refused")
    func wrongKey() throws {
        let signer = try Self.signer()
        let other = try Self.signer()
        let token = try signer.token(audience: Self.audience, now: Self.now)
        #expect(throws: CofferPushError.invalidSignature) {
            try VAPID.verify(
                token: token,
                publicKey: other.privateKey.publicKey,
                audience: Self.audience,
                now: Self.now
            )
        }
        let header = "vapid t=\(token), k=\(Base64URL.encode(other.publicKey))"
        #expect(throws: CofferPushError.invalidSignature) {
            try VAPID.verify(authorization: header, audience: Self.audience, now: Self.now)
        }
    }

    @Test("Changed claims break the signature")
    func tamperedClaims() throws {
        let signer = try Self.signer()
        let parts = try signer.token(audience: Self.audience, now: Self.now).split(separator: ".").map(String.init)
        let forged = Base64URL.encode(
            Array(#"{"aud":"https://push.example.net","exp":1800086400,"sub":"mailto:ops@example.org"}"#.utf8)
        )
        #expect(throws: CofferPushError.invalidSignature) {
            try VAPID.verify(
                token: parts[0] + "." + forged + "." + parts[2],
                publicKey: signer.privateKey.publicKey,
                audience: Self.audience,
                now: Self.now
            )
        }
    }

    @Test(
        "Malformed tokens and headers are typed errors",
        arguments: [
            "", "vapid", "Bearer abc", "vapid t=a.b.c", "vapid t=a.b, k=AAAA", "vapid k=AAAA", "vapid t=x.y.z, k=!!",
            "vapid t=eyJhbGciOiJub25lIn0.e30., k=BAAA",
        ]
    )
    func malformed(header: String) throws {
        #expect(throws: CofferPushError.self) {
            try VAPID.verify(authorization: header, audience: Self.audience, now: Self.now)
        }
    }

    @Test("alg none, a short signature and non-JSON claims are refused", arguments: ["none", "short", "claims"])
    func malformedTokens(kind: String) throws {
        let signer = try Self.signer()
        let parts = try signer.token(audience: Self.audience, now: Self.now).split(separator: ".").map(String.init)
        let token: String
        switch kind {
        case "none": token = Base64URL.encode(Array(#"{"alg":"none"}"#.utf8)) + "." + parts[1] + "."
        case "short": token = parts[0] + "." + parts[1] + "." + String(parts[2].dropLast(4))
        default:
            let input = parts[0] + "." + Base64URL.encode(Array("not json".utf8))
            let signature = try signer.privateKey.signature(for: Array(input.utf8))
            token = input + "." + Base64URL.encode(signature.rawRepresentation)
        }
        #expect(throws: CofferPushError.self) {
            try VAPID.verify(
                token: token,
                publicKey: signer.privateKey.publicKey,
                audience: Self.audience,
                now: Self.now
            )
        }
    }

    @Test("Subjects must be mailto: or https:", arguments: ["http://example.org", "ops@example.org", "mailto:", ""])
    func badSubject(subject: String) {
        #expect(throws: CofferPushError.invalidSubject) {
            try VAPID.Signer(privateKey: P256.Signing.PrivateKey(), subject: subject)
        }
    }

    @Test("The audience of an endpoint is its origin")
    func audienceOfEndpoint() throws {
        #expect(
            try VAPID.audience(for: URL(string: "https://Push.Example.net/wpush/v2/abc")!) == "https://push.example.net"
        )
        #expect(try VAPID.audience(for: URL(string: "http://127.0.0.1:8080/push/1")!) == "http://127.0.0.1:8080")
        #expect(throws: CofferPushError.self) { try VAPID.audience(for: URL(string: "file:///tmp/x")!) }
        #expect(throws: CofferPushError.self) {
            try Self.signer().token(audience: "https://push.example.net/path", now: Self.now)
        }
    }
}
