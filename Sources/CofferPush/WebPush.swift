import Crypto
import Foundation

/// Message encryption for Web Push (RFC 8291): one `aes128gcm` record whose key comes from an ephemeral-static P-256
/// ECDH between the application server and the user agent, mixed with the user agent's 16-octet auth secret.
///
/// The application server (coffer-notify) calls ``seal(_:to:padding:)``; the user agent (the client's push handler)
/// holds ``UserAgentKeys`` and calls ``UserAgentKeys/open(_:)``.
public enum WebPush {
    /// The length of the auth secret.
    public static let authSecretLength = 16
    /// The length of an uncompressed P-256 public key, as it appears in subscriptions and the header's key id.
    public static let publicKeyLength = 65
    /// The header length of every Web Push body: salt, record size, key id length and a 65-octet public key.
    public static let headerLength = ContentCoding.minimumHeaderLength + publicKeyLength
    /// The body length that ``Padding/standard`` pads every message to: 4096 octets, the payload size RFC 8030
    /// push services must accept.
    public static let standardBodyLength = 4096
    /// The largest plaintext that fits a ``standardBodyLength`` body (4096 - 86 header - 16 tag - 1 delimiter).
    public static let maximumPlaintextLength = standardBodyLength - headerLength - ContentCoding.tagLength - 1

    /// How a message is padded before encryption.
    public enum Padding: Sendable, Equatable {
        /// No padding: the body's length reveals the plaintext's length.
        case none
        /// Pad so that every body is exactly this many octets long, whatever the plaintext's length.
        case bodyLength(Int)

        /// Every body exactly ``WebPush/standardBodyLength`` (4096) octets: lengths reveal nothing of subjects.
        public static let standard = Padding.bodyLength(WebPush.standardBodyLength)
    }

    /// What the application server needs to encrypt to one user agent: its public key and auth secret.
    public struct Subscription: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible,
        CustomReflectable
    {
        /// The user agent's P-256 public key.
        public let publicKey: P256.KeyAgreement.PublicKey
        /// The 16-octet auth secret shared with the user agent.
        public let authSecret: SymmetricKey

        /// Makes a subscription from the key and secret a user agent registered.
        ///
        /// - Parameters:
        ///   - publicKey: the 65-octet uncompressed P-256 point (`p256dh` in a browser's subscription).
        ///   - authSecret: the 16-octet auth secret.
        /// - Throws: `CofferPushError.invalidPublicKey` for a point that is not on the curve or not uncompressed,
        ///   `.invalidLength` for an auth secret that is not 16 octets.
        public init(publicKey: some Collection<UInt8>, authSecret: some Collection<UInt8>) throws(CofferPushError) {
            let bytes = Array(publicKey)
            self.publicKey = try WebPush.publicKey(bytes)
            self.publicKeyBytes = bytes
            self.authSecret = try WebPush.authSecret(Array(authSecret))
        }

        init(publicKey: P256.KeyAgreement.PublicKey, authSecret: SymmetricKey) {
            self.publicKey = publicKey
            self.publicKeyBytes = Array(publicKey.x963Representation)
            self.authSecret = authSecret
        }

        /// The public key's 65-octet uncompressed form (kept, since every seal puts it in the key derivation).
        public let publicKeyBytes: [UInt8]

        /// Names the key by a short fingerprint; the auth secret is never printed.
        public var description: String {
            "WebPush.Subscription(key \(WebPush.fingerprint(publicKeyBytes)), authSecret: <redacted>)"
        }

        /// Same as `description`.
        public var debugDescription: String { description }
        /// Empty: the auth secret is not reflected.
        public var customMirror: Mirror { Mirror(self, children: [:]) }

        /// Compares key and secret (the secret in constant time).
        public static func == (lhs: Subscription, rhs: Subscription) -> Bool {
            lhs.publicKeyBytes == rhs.publicKeyBytes && lhs.authSecret == rhs.authSecret
        }
    }

    /// The user agent's side: the session's key pair and auth secret, which open the pushes sealed to it.
    public struct UserAgentKeys: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
        /// The P-256 private key.
        public let privateKey: P256.KeyAgreement.PrivateKey
        /// The 16-octet auth secret.
        public let authSecret: SymmetricKey

        /// Makes a fresh key pair and auth secret for a new session.
        public init() {
            self.privateKey = P256.KeyAgreement.PrivateKey()
            self.authSecret = SymmetricKey(size: .bits128)
        }

        /// Restores keys kept from an earlier session (for example from the keychain).
        ///
        /// - Parameters:
        ///   - privateKey: the 32-octet raw P-256 private scalar.
        ///   - authSecret: the 16-octet auth secret.
        /// - Throws: `CofferPushError.invalidLength` or `.invalidParameter` for a key or secret that is not valid.
        public init(privateKey: some Collection<UInt8>, authSecret: some Collection<UInt8>) throws(CofferPushError) {
            let raw = Array(privateKey)
            guard raw.count == 32 else {
                throw .invalidLength(what: "P-256 private key", expected: 32, actual: raw.count)
            }
            do {
                self.privateKey = try P256.KeyAgreement.PrivateKey(rawRepresentation: raw)
            } catch {
                throw .invalidParameter("the P-256 private key is not a valid scalar")
            }
            self.authSecret = try WebPush.authSecret(Array(authSecret))
        }

        /// What the application server needs: the public key and the auth secret.
        public var subscription: Subscription { Subscription(publicKey: privateKey.publicKey, authSecret: authSecret) }

        /// Decrypts a push message body sealed to these keys.
        ///
        /// - Returns: the plaintext, padding removed.
        /// - Throws: `CofferPushError.invalidKeyID` when the header's key id is not 65 octets, `.invalidPublicKey` when
        ///   it is no P-256 point, `.malformedRecord` when the body holds more than one record, `.authenticationFailed`
        ///   for a wrong key or auth secret or a changed byte, `.truncated` for a short body, `.invalidPadding`.
        public func open(_ body: some Collection<UInt8>) throws(CofferPushError) -> [UInt8] {
            let bytes = Array(body)
            let (header, headerLength) = try ContentCoding.Header.parse(bytes)
            guard header.keyID.count == WebPush.publicKeyLength else {
                throw .invalidKeyID(expected: WebPush.publicKeyLength, actual: header.keyID.count)
            }
            let senderKey = try WebPush.publicKey(header.keyID)
            // RFC 8291 section 4: a push message is a single record.
            guard bytes.count - headerLength <= Int(header.recordSize) else {
                throw .malformedRecord("a push message must be a single record")
            }
            let ikm = try WebPush.inputKey(
                privateKey: privateKey,
                peer: senderKey,
                authSecret: authSecret,
                userAgentPublicKey: Array(privateKey.publicKey.x963Representation),
                serverPublicKey: header.keyID
            )
            return try ContentCoding.openRecords(bytes[headerLength...], header: header, ikm: ikm)
        }

        /// Names the public key by a short fingerprint; no secret is printed.
        public var description: String {
            "WebPush.UserAgentKeys(key \(WebPush.fingerprint(subscription.publicKeyBytes)), <redacted>)"
        }
        /// Same as `description`.
        public var debugDescription: String { description }
        /// Empty: the keys are not reflected.
        public var customMirror: Mirror { Mirror(self, children: [:]) }
    }

    /// Encrypts a push message to a subscription with a fresh ephemeral key pair and salt.
    ///
    /// - Parameters:
    ///   - plaintext: the message.
    ///   - subscription: the user agent's public key and auth secret.
    ///   - padding: ``Padding/standard`` (the default) makes every body 4096 octets.
    /// - Returns: the body to send (`Content-Encoding: aes128gcm`).
    /// - Throws: `CofferPushError.plaintextTooLarge` when the message does not fit the padded length.
    public static func seal(
        _ plaintext: some Collection<UInt8>,
        to subscription: Subscription,
        padding: Padding = .standard
    ) throws(CofferPushError) -> [UInt8] {
        try seal(
            plaintext,
            to: subscription,
            padding: padding,
            ephemeralKey: ephemeralKey(),
            salt: ContentCoding.randomSalt()
        )
    }

    /// A fresh ephemeral P-256 private key, one per message (RFC 8291 section 3.1): 32 octets from the system's
    /// random generator taken as the scalar, drawn again in the rare case (under 2^-32) that it is not in [1, n-1]
    /// (FIPS 186-5 A.2.2, rejection sampling; BoringSSL refuses such a scalar). The public key is one fixed-base
    /// multiplication. `P256.KeyAgreement.PrivateKey()` costs several times that: it runs BoringSSL's FIPS pairwise
    /// test (an ECDSA signature and its verification) on every key and draws again until the key is compact
    /// representable, which an ephemeral ECDH key does not need.
    static func ephemeralKey() -> P256.KeyAgreement.PrivateKey {
        while true {
            let candidate = SymmetricKey(size: .bits256)
            if let key = candidate.withUnsafeBytes({ try? P256.KeyAgreement.PrivateKey(rawRepresentation: $0) }) {
                return key
            }
        }
    }

    /// Encrypts with a given ephemeral key and salt: for known-answer tests only.
    ///
    /// - Warning: reusing an ephemeral key and salt for two messages to one subscription repeats the key and nonce.
    @_spi(Testing)
    public static func seal(
        _ plaintext: some Collection<UInt8>,
        to subscription: Subscription,
        padding: Padding,
        ephemeralKey: P256.KeyAgreement.PrivateKey,
        salt: [UInt8]
    ) throws(CofferPushError) -> [UInt8] {
        let data = Array(plaintext)
        let minimumRecord = data.count + ContentCoding.tagLength + 1
        let paddingLength: Int
        switch padding {
        case .none:
            paddingLength = 0
        case .bodyLength(let length):
            let maximum = length - headerLength - ContentCoding.tagLength - 1
            guard maximum >= 0 else { throw .invalidParameter("the padded body length is shorter than the overhead") }
            guard data.count <= maximum else { throw .plaintextTooLarge(maximum: maximum, actual: data.count) }
            paddingLength = maximum - data.count
        }
        let record = minimumRecord + paddingLength
        guard record <= Int(UInt32.max) else { throw .plaintextTooLarge(maximum: Int(UInt32.max), actual: data.count) }
        let serverPublicKey = Array(ephemeralKey.publicKey.x963Representation)
        let ikm = try inputKey(
            privateKey: ephemeralKey,
            peer: subscription.publicKey,
            authSecret: subscription.authSecret,
            userAgentPublicKey: subscription.publicKeyBytes,
            serverPublicKey: serverPublicKey
        )
        return try ContentCoding.seal(
            data,
            key: ikm,
            salt: salt,
            recordSize: UInt32(max(4096, record)),
            keyID: serverPublicKey,
            padding: paddingLength
        )
    }

    /// RFC 8291 section 3.4: IKM = HKDF(salt: auth secret, ikm: ECDH secret, info: "WebPush: info" 0 ua as, 32).
    static func inputKey(
        privateKey: P256.KeyAgreement.PrivateKey,
        peer: P256.KeyAgreement.PublicKey,
        authSecret: SymmetricKey,
        userAgentPublicKey: [UInt8],
        serverPublicKey: [UInt8]
    ) throws(CofferPushError) -> SymmetricKey {
        let shared: SharedSecret
        do {
            shared = try privateKey.sharedSecretFromKeyAgreement(with: peer)
        } catch {
            throw .invalidPublicKey
        }
        let info = Array("WebPush: info\0".utf8) + userAgentPublicKey + serverPublicKey
        return authSecret.withUnsafeBytes { secret in
            shared.hkdfDerivedSymmetricKey(
                using: SHA256.self,
                salt: Array(secret),
                sharedInfo: info,
                outputByteCount: 32
            )
        }
    }

    /// The first four octets of the key's SHA-256, in hex: enough to tell keys apart in a log.
    static func fingerprint(_ publicKey: [UInt8]) -> String {
        SHA256.hash(data: publicKey).prefix(4).map { String(format: "%02x", $0) }.joined()
    }

    static func publicKey(_ bytes: [UInt8]) throws(CofferPushError) -> P256.KeyAgreement.PublicKey {
        guard bytes.count == publicKeyLength, bytes.first == 0x04 else { throw .invalidPublicKey }
        do {
            return try P256.KeyAgreement.PublicKey(x963Representation: bytes)
        } catch {
            throw .invalidPublicKey
        }
    }

    static func authSecret(_ bytes: [UInt8]) throws(CofferPushError) -> SymmetricKey {
        guard bytes.count == authSecretLength else {
            throw .invalidLength(what: "auth secret", expected: authSecretLength, actual: bytes.count)
        }
        return SymmetricKey(data: bytes)
    }
}
