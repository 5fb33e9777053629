import Crypto
import Foundation

/// Voluntary Application Server Identification (RFC 8292): an ES256 JWT that the application server signs for one push
/// service, sent as `Authorization: vapid t=<token>, k=<public key>`.
public enum VAPID {
    /// The longest a token may stay valid: 24 hours (RFC 8292 section 2).
    public static let maximumLifetime: TimeInterval = 24 * 60 * 60

    /// The claims of a VAPID token.
    public struct Claims: Sendable, Equatable {
        /// `aud`: the push service's origin, for example `https://push.example.net`.
        public var audience: String
        /// `exp`: when the token stops being valid, in whole seconds.
        public var expiry: Date
        /// `sub`: how the push service can reach the sender, a `mailto:` or `https:` URI.
        public var subject: String
    }

    /// The application server's signing key and contact.
    public struct Signer: Sendable, CustomStringConvertible {
        /// The P-256 signing key; its public half is the `k` parameter and the key a subscription may be bound to.
        public let privateKey: P256.Signing.PrivateKey
        /// The `sub` claim.
        public let subject: String

        /// Makes a signer.
        ///
        /// - Parameters:
        ///   - privateKey: the server's long-lived VAPID key.
        ///   - subject: a `mailto:` or `https:` URI for the push service operator to contact.
        /// - Throws: `CofferPushError.invalidSubject` for any other subject.
        public init(privateKey: P256.Signing.PrivateKey, subject: String) throws(CofferPushError) {
            guard VAPID.isValidSubject(subject) else { throw .invalidSubject }
            self.privateKey = privateKey
            self.subject = subject
        }

        /// The public key's 65-octet uncompressed form (the `k` parameter, base64url encoded).
        public var publicKey: [UInt8] { Array(privateKey.publicKey.x963Representation) }

        /// Signs a token for one push service.
        ///
        /// - Parameters:
        ///   - audience: the push service's origin (see ``VAPID/audience(for:)``).
        ///   - now: the current time.
        ///   - lifetime: how long the token stays valid, at most 24 hours; the default is 12 hours.
        /// - Returns: the compact JWT.
        /// - Throws: `CofferPushError.invalidParameter` for an audience that is not an origin, or
        ///   `.tokenLifetimeTooLong` for a lifetime over 24 hours or not positive.
        public func token(
            audience: String,
            now: Date,
            lifetime: TimeInterval = 12 * 60 * 60
        ) throws(CofferPushError)
            -> String
        {
            guard VAPID.isOrigin(audience) else { throw .invalidParameter("the audience must be an origin") }
            guard lifetime > 0, lifetime <= VAPID.maximumLifetime else { throw .tokenLifetimeTooLong }
            let expiry = Int64((now.timeIntervalSince1970 + lifetime).rounded(.down))
            let header = #"{"typ":"JWT","alg":"ES256"}"#
            let payload = try VAPID.json(TokenPayload(aud: audience, exp: expiry, sub: subject))
            let signingInput = Base64URL.encode(header.utf8) + "." + Base64URL.encode(payload)
            let signature: P256.Signing.ECDSASignature
            do {
                signature = try privateKey.signature(for: Array(signingInput.utf8))
            } catch {
                throw .invalidParameter("ECDSA refused to sign")
            }
            return signingInput + "." + Base64URL.encode(signature.rawRepresentation)
        }

        /// The `Authorization` header value: `vapid t=<token>, k=<public key>`.
        ///
        /// - Throws: as ``token(audience:now:lifetime:)``.
        public func authorization(
            audience: String,
            now: Date,
            lifetime: TimeInterval = 12 * 60 * 60
        )
            throws(CofferPushError) -> String
        {
            "vapid t=\(try token(audience: audience, now: now, lifetime: lifetime)), k=\(Base64URL.encode(publicKey))"
        }

        /// Names the public key by a short fingerprint; the private key is never printed.
        public var description: String { "VAPID.Signer(key \(WebPush.fingerprint(publicKey)), <redacted>)" }
    }

    /// The origin of a push endpoint URL, the `aud` claim for it: `scheme://host[:port]`.
    ///
    /// - Throws: `CofferPushError.invalidParameter` for a URL without an http(s) scheme or a host.
    public static func audience(for endpoint: URL) throws(CofferPushError) -> String {
        guard let components = URLComponents(url: endpoint, resolvingAgainstBaseURL: false),
            let scheme = components.scheme?.lowercased(), scheme == "https" || scheme == "http",
            let host = components.host, !host.isEmpty
        else { throw .invalidParameter("the endpoint is not an http(s) URL with a host") }
        let port = components.port.map { ":\($0)" } ?? ""
        return "\(scheme)://\(host.lowercased())\(port)"
    }

    /// Verifies a token against a known public key.
    ///
    /// - Parameters:
    ///   - token: the compact JWT.
    ///   - publicKey: the sender's VAPID public key.
    ///   - audience: the origin this push service answers on; the token's `aud` must equal it.
    ///   - now: the current time.
    /// - Returns: the verified claims.
    /// - Throws: `CofferPushError.malformedToken`, `.invalidSignature`, `.tokenExpired`, `.tokenLifetimeTooLong`,
    ///   `.wrongAudience` or `.invalidSubject`. The signature is checked before any claim.
    public static func verify(
        token: String,
        publicKey: P256.Signing.PublicKey,
        audience: String,
        now: Date
    )
        throws(CofferPushError) -> Claims
    {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw .malformedToken("a JWT has three parts") }
        guard let headerBytes = Base64URL.decode(parts[0]), let payloadBytes = Base64URL.decode(parts[1]),
            let signatureBytes = Base64URL.decode(parts[2])
        else { throw .malformedToken("a part is not base64url") }
        guard let header = try? JSONDecoder().decode(TokenHeader.self, from: Data(headerBytes)) else {
            throw .malformedToken("the header is not a JSON object with alg")
        }
        guard header.alg == "ES256" else { throw .malformedToken("the algorithm is not ES256") }
        guard signatureBytes.count == 64,
            let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureBytes)
        else { throw .malformedToken("the signature is not 64 octets") }
        let signingInput = Array(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        guard publicKey.isValidSignature(signature, for: signingInput) else { throw .invalidSignature }
        guard let payload = try? JSONDecoder().decode(TokenPayload.self, from: Data(payloadBytes)) else {
            throw .malformedToken("the claims are not a JSON object with aud, exp and sub")
        }
        let expiry = Date(timeIntervalSince1970: TimeInterval(payload.exp))
        guard expiry > now else { throw .tokenExpired }
        guard expiry.timeIntervalSince(now) <= maximumLifetime else { throw .tokenLifetimeTooLong }
        guard payload.aud == audience else { throw .wrongAudience }
        guard isValidSubject(payload.sub) else { throw .invalidSubject }
        return Claims(audience: payload.aud, expiry: expiry, subject: payload.sub)
    }

    /// Verifies an `Authorization: vapid t=..., k=...` header value, taking the public key from its `k` parameter.
    ///
    /// - Parameters:
    ///   - authorization: the header's value.
    ///   - audience: the origin this push service answers on.
    ///   - now: the current time.
    /// - Returns: the verified claims and the sender's 65-octet public key (compare it with the key the
    ///   subscription was bound to, if any).
    /// - Throws: `CofferPushError.malformedToken` for a header that is not `vapid` with `t` and `k`, or a `k` that
    ///   is no P-256 point; otherwise as ``verify(token:publicKey:audience:now:)``.
    public static func verify(
        authorization: String,
        audience: String,
        now: Date
    ) throws(CofferPushError)
        -> (claims: Claims, publicKey: [UInt8])
    {
        let trimmed = authorization.trimmingCharacters(in: .whitespaces)
        guard trimmed.count > 6, trimmed.prefix(6).lowercased() == "vapid " else {
            throw .malformedToken("the scheme is not vapid")
        }
        var parameters: [String: String] = [:]
        for item in trimmed.dropFirst(6).split(separator: ",") {
            let pair = item.split(separator: "=", maxSplits: 1)
            guard pair.count == 2 else { throw .malformedToken("a parameter has no value") }
            let name = pair[0].trimmingCharacters(in: .whitespaces).lowercased()
            guard parameters[name] == nil else { throw .malformedToken("a parameter appears twice") }
            parameters[name] = pair[1].trimmingCharacters(in: .whitespaces)
        }
        guard let token = parameters["t"], let key = parameters["k"] else {
            throw .malformedToken("the t or k parameter is missing")
        }
        guard let keyBytes = Base64URL.decode(key), keyBytes.count == WebPush.publicKeyLength,
            let publicKey = try? P256.Signing.PublicKey(x963Representation: keyBytes)
        else { throw .malformedToken("k is not a P-256 public key") }
        let claims = try verify(token: token, publicKey: publicKey, audience: audience, now: now)
        return (claims, keyBytes)
    }

    struct TokenHeader: Codable {
        var typ: String?
        var alg: String
    }

    struct TokenPayload: Codable {
        var aud: String
        var exp: Int64
        var sub: String
    }

    static func json(_ payload: TokenPayload) throws(CofferPushError) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            return Array(try encoder.encode(payload))
        } catch {
            throw .invalidParameter("the claims could not be encoded")
        }
    }

    static func isValidSubject(_ subject: String) -> Bool {
        let lower = subject.lowercased()
        if lower.hasPrefix("mailto:") { return subject.count > 7 && subject.contains("@") }
        if lower.hasPrefix("https://") { return subject.count > 8 }
        return false
    }

    static func isOrigin(_ audience: String) -> Bool {
        guard let url = URL(string: audience), let origin = try? self.audience(for: url) else { return false }
        return origin == audience
    }
}
