import Crypto
import Foundation

/// The FastSync escrow upload (docs/FORMAT.md, "FastSync escrow v1"): the device seals its key-encryption key to
/// the service's per-user X25519 public key with HPKE (RFC 9180, base mode, DHKEM(X25519, HKDF-SHA256),
/// HKDF-SHA256, ChaCha20-Poly1305), bound to the session and the expiry as associated data. One definition for
/// the client (``seal(kek:to:sessionID:expires:)``) and coffer-notify (``open(_:with:sessionID:)``).
public enum FastSyncEscrowFormat {
    /// The HPKE suite.
    public static let ciphersuite = HPKE.Ciphersuite.Curve25519_SHA256_ChachaPoly
    /// The HPKE info string.
    public static let info = Data("coffer-notify fastsync kek v1".utf8)
    /// The KEK's length.
    public static let kekLength = 32
    /// The longest a KEK may live: 7 days.
    public static let maximumLifetime: TimeInterval = 7 * 24 * 3600

    /// `PUT /v1/fastsync/kek`'s body.
    public struct Upload: Codable, Sendable, Equatable {
        /// The HPKE encapsulated key (32 octets), base64url.
        public var enc: String
        /// The sealed KEK (32 + 16 octets), base64url.
        public var ciphertext: String
        /// The expiry, Unix seconds; authenticated as associated data.
        public var expires: Int64

        /// Creates an upload.
        public init(enc: String, ciphertext: String, expires: Int64) {
            self.enc = enc
            self.ciphertext = ciphertext
            self.expires = expires
        }
    }

    /// `"coffer.fastsync.v1" 0x00 sessionID 0x00 expires-in-decimal`.
    public static func associatedData(sessionID: String, expires: Int64) -> Data {
        Data("coffer.fastsync.v1".utf8) + [0] + Data(sessionID.utf8) + [0] + Data(String(expires).utf8)
    }

    /// Seals `kek` to the service's public key (32 raw X25519 octets).
    public static func seal(
        kek: some ContiguousBytes,
        to publicKey: [UInt8],
        sessionID: String,
        expires: Int64
    ) throws(CofferPushError) -> Upload {
        do {
            let recipient = try Curve25519.KeyAgreement.PublicKey(rawRepresentation: publicKey)
            var sender = try HPKE.Sender(recipientKey: recipient, ciphersuite: ciphersuite, info: info)
            let plaintext = kek.withUnsafeBytes { Data($0) }
            guard plaintext.count == kekLength else {
                throw CofferPushError.invalidLength(what: "FastSync KEK", expected: kekLength, actual: plaintext.count)
            }
            let sealed = try sender.seal(
                plaintext,
                authenticating: associatedData(sessionID: sessionID, expires: expires)
            )
            return Upload(
                enc: Base64URL.encode(sender.encapsulatedKey),
                ciphertext: Base64URL.encode(sealed),
                expires: expires
            )
        } catch let error as CofferPushError {
            throw error
        } catch {
            throw .invalidPublicKey
        }
    }

    /// Opens an upload with the user's private key; the KEK is returned as a swift-crypto key.
    ///
    /// - Throws: `CofferPushError.authenticationFailed` for a changed upload, another session or expiry, or the wrong
    ///   key; `.invalidLength` for a KEK that is not 32 octets.
    public static func open(
        _ upload: Upload,
        with privateKey: Curve25519.KeyAgreement.PrivateKey,
        sessionID: String
    ) throws(CofferPushError) -> SymmetricKey {
        guard let enc = Base64URL.decode(upload.enc), let sealed = Base64URL.decode(upload.ciphertext) else {
            throw .invalidParameter("enc and ciphertext must be base64url")
        }
        let plaintext: Data
        do {
            var recipient = try HPKE.Recipient(
                privateKey: privateKey,
                ciphersuite: ciphersuite,
                info: info,
                encapsulatedKey: Data(enc)
            )
            plaintext = try recipient.open(
                Data(sealed),
                authenticating: associatedData(sessionID: sessionID, expires: upload.expires)
            )
        } catch {
            throw .authenticationFailed
        }
        guard plaintext.count == kekLength else {
            throw .invalidLength(what: "FastSync KEK", expected: kekLength, actual: plaintext.count)
        }
        return SymmetricKey(data: plaintext)
    }
}
