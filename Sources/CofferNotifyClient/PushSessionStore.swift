import CofferCrypto
import CofferKeychain
import CofferPush
import Foundation

/// What the device keeps of one account's push session, in the keychain (docs/FORMAT.md, "Push session items").
///
/// Two items, both `afterFirstUnlockThisDeviceOnly` so that the push handler reads them without the MainKey and
/// without a PIN, and bound to this device:
/// - `coffer.push-key`: the session's P-256 private scalar and RFC 8291 auth secret (binary, version 1);
/// - `coffer.push-session`: the service, its pins, the session id and expiry, and the session token sealed under a
///   subkey of the MainKey (JSON, version 1). Reading the token needs the account unlocked.
public struct PushSessionStore: Sendable {
    /// The keychain service of the push key item.
    public static let keyService = "coffer.push-key"
    /// The keychain service of the session record.
    public static let sessionService = "coffer.push-session"
    /// The keychain service of the note a remote logout leaves for `status`.
    public static let endedService = "coffer.push-ended"
    /// The MainKey subkey label the token is sealed under.
    public static let tokenSubkey = "coffer.notify.token"
    /// The key item's format version.
    public static let keyItemVersion: UInt8 = 1

    /// The keychain.
    public let keychain: any Keychain
    /// The Coffer account.
    public let account: String

    /// Creates a store for one account.
    public init(keychain: any Keychain, account: String) {
        self.keychain = keychain
        self.account = account
    }

    private func address(_ service: String) -> KeychainAddress { KeychainAddress(service: service, account: account) }

    // MARK: The push key

    /// Stores fresh push keys (`afterFirstUnlockThisDeviceOnly`), replacing none: registration makes new keys.
    public func saveKeys(_ keys: WebPush.UserAgentKeys) throws(NotifyClientError) {
        var bytes = [Self.keyItemVersion] + Array(keys.privateKey.rawRepresentation)
        keys.authSecret.withUnsafeBytes { bytes += $0 }
        defer { for index in bytes.indices { bytes[index] = 0 } }
        let secret = SecretBytes(copying: bytes)
        defer { secret.wipe() }
        do {
            try keychain.set(secret, at: address(Self.keyService), accessibility: .afterFirstUnlockThisDeviceOnly)
        } catch {
            throw .keychain(error)
        }
    }

    /// The push keys, read without the MainKey.
    ///
    /// - Throws: ``NotifyClientError/notRegistered`` when there are none, `.invalidRecord` for another version.
    public func loadKeys() throws(NotifyClientError) -> WebPush.UserAgentKeys {
        let item: SecretBytes?
        do {
            item = try keychain.readIfPresent(address(Self.keyService))
        } catch {
            throw .keychain(error)
        }
        guard let item else { throw .notRegistered }
        defer { item.wipe() }
        return try item.withUnsafeBytes { raw throws(NotifyClientError) -> WebPush.UserAgentKeys in
            guard raw.count == 1 + 32 + WebPush.authSecretLength, raw[0] == Self.keyItemVersion else {
                throw .invalidRecord("the push key item is not version \(Self.keyItemVersion)")
            }
            do {
                return try WebPush.UserAgentKeys(
                    privateKey: raw[1..<33],
                    authSecret: raw[33..<(33 + WebPush.authSecretLength)]
                )
            } catch {
                throw .invalidRecord("the push key item holds no valid key")
            }
        }
    }

    // MARK: The session record

    /// The session record: everything but the token is readable without the MainKey.
    public struct Record: Codable, Sendable, Equatable {
        /// The format version (1).
        public var v: Int
        /// The service and its pins.
        public var server: NotifyServer
        /// The service's session id.
        public var sessionID: String
        /// When the token expires unless refreshed.
        public var expires: Date
        /// The device name the service shows.
        public var deviceName: String
        /// The token sealed under the MainKey subkey ``PushSessionStore/tokenSubkey`` (Coffer envelope, base64),
        /// context `["coffer.notify.token.v1", account, sessionID]`.
        public var sealedToken: String
    }

    static func tokenContext(account: String, sessionID: String) -> EnvelopeContext {
        EnvelopeContext(["coffer.notify.token.v1", account, sessionID])
    }

    /// Seals the token under `key` (the MainKey subkey) and stores the record.
    public func saveSession(
        server: NotifyServer,
        sessionID: String,
        expires: Date,
        deviceName: String,
        token: String,
        key: EnvelopeKey
    ) throws(NotifyClientError) {
        let sealed: [UInt8]
        do {
            sealed = try Envelope.seal(
                Array(token.utf8),
                with: key,
                context: Self.tokenContext(account: account, sessionID: sessionID)
            )
        } catch {
            throw .crypto(error)
        }
        let record = Record(
            v: 1,
            server: server,
            sessionID: sessionID,
            expires: expires,
            deviceName: deviceName,
            sealedToken: Data(sealed).base64EncodedString()
        )
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys]
        guard let data = try? encoder.encode(record) else {
            throw .invalidRecord("the session record cannot be written")
        }
        do {
            try keychain.set(
                SecretBytes(copying: data),
                at: address(Self.sessionService),
                accessibility: .afterFirstUnlockThisDeviceOnly
            )
            try keychain.delete(address(Self.endedService))
        } catch {
            throw .keychain(error)
        }
    }

    /// The session record, or nil when the account has no push session.
    public func loadSession() throws(NotifyClientError) -> Record? {
        let item: SecretBytes?
        do {
            item = try keychain.readIfPresent(address(Self.sessionService))
        } catch {
            throw .keychain(error)
        }
        guard let item else { return nil }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        let record = item.withUnsafeBytes { try? decoder.decode(Record.self, from: Data($0)) }
        guard let record, record.v == 1 else { throw .invalidRecord("the push session record is not version 1") }
        return record
    }

    /// Opens the token with the MainKey subkey.
    public func token(of record: Record, key: EnvelopeKey) throws(NotifyClientError) -> String {
        guard let sealed = Data(base64Encoded: record.sealedToken) else {
            throw .invalidRecord("the sealed token is not base64")
        }
        do {
            let plain = try Envelope.open(
                Array(sealed),
                with: key,
                context: Self.tokenContext(account: account, sessionID: record.sessionID)
            )
            return String(decoding: plain, as: UTF8.self)
        } catch {
            throw .crypto(error)
        }
    }

    /// Deletes the push key, the session record and the FastSync record (logout, unregister, remote logout). With
    /// `reason`, leaves a note (no secret) that `coffer notify status` shows.
    public func delete(reason: String? = nil) throws(NotifyClientError) {
        do {
            try keychain.delete(address(Self.keyService))
            try keychain.delete(address(Self.sessionService))
            try keychain.delete(address(FastSync.service))
            try keychain.delete(address(FastSync.endedService))
            if let reason {
                try keychain.set(
                    SecretBytes(copying: Array(reason.utf8)),
                    at: address(Self.endedService),
                    accessibility: .afterFirstUnlockThisDeviceOnly
                )
            }
        } catch {
            throw .keychain(error)
        }
    }

    /// Forgets why an earlier session ended (a new login of the account name starts afresh).
    public func forgetEnded() throws(NotifyClientError) {
        do { try keychain.delete(address(Self.endedService)) } catch { throw .keychain(error) }
    }

    /// The accounts of `keychain` that a remote logout ended, with the reason each was given.
    public static func endedSessions(
        in keychain: any Keychain
    ) throws(NotifyClientError) -> [(
        account: String, reason: String
    )] {
        let addresses: [KeychainAddress]
        do { addresses = try keychain.addresses(accessGroup: "coffer", service: endedService) } catch {
            throw .keychain(error)
        }
        return addresses.compactMap { address in
            PushSessionStore(keychain: keychain, account: address.account).endedReason().map { (address.account, $0) }
        }
    }

    /// Why the last session ended, when a remote logout ended it.
    public func endedReason() -> String? {
        guard let item = try? keychain.readIfPresent(address(Self.endedService)) else { return nil }
        return item.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
    }
}
