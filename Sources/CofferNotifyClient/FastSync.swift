import CofferCrypto
import CofferKeychain
import CofferKeymaker
import CofferPush
import Crypto
import Foundation

/// FastSync on the device (seed `003_…`): a random key-encryption key (KEK) wraps the MainKey in a record kept on
/// the device; the KEK itself is only escrowed to the notification service, which puts it in new-mail pushes while
/// it is unexpired. Formats: docs/FORMAT.md, "FastSync record v1" and "FastSync escrow v1".
public enum FastSync {
    /// The keychain service of the record.
    public static let service = "coffer.fastsync"
    /// The longest lifetime: 7 days.
    public static let maximumLifetime = FastSyncEscrowFormat.maximumLifetime

    /// The record on the device: the MainKey sealed under the KEK, with account, session and expiry authenticated.
    public struct Record: Codable, Sendable, Equatable {
        /// The format version (1).
        public var v: Int
        /// The Coffer account.
        public var account: String
        /// The push session the KEK is escrowed for.
        public var sessionID: String
        /// The expiry, Unix seconds (wall clock).
        public var expires: Int64
        /// A sealed envelope v1 of the 32 MainKey octets under the KEK, base64; context
        /// `["coffer.fastsync.mainkey.v1", account, sessionID, expires in decimal]`.
        public var wrappedMainKey: String

        /// The envelope context that binds account, session and expiry.
        static func context(account: String, sessionID: String, expires: Int64) -> EnvelopeContext {
            EnvelopeContext(["coffer.fastsync.mainkey.v1", account, sessionID, String(expires)])
        }
    }

    static func address(_ account: String) -> KeychainAddress { KeychainAddress(service: service, account: account) }

    /// The account's record, or nil.
    public static func load(keychain: any Keychain, account: String) throws(NotifyClientError) -> Record? {
        let item: SecretBytes?
        do {
            item = try keychain.readIfPresent(address(account))
        } catch {
            throw .keychain(error)
        }
        guard let item else { return nil }
        let record = item.withUnsafeBytes { try? JSONDecoder().decode(Record.self, from: Data($0)) }
        guard let record, record.v == 1, record.account == account else {
            throw .invalidRecord("the FastSync record is not version 1 of this account")
        }
        return record
    }

    /// The keychain service of the note that a record was deleted here while the service may still hold its key:
    /// the session id, nothing secret (class `afterFirstUnlockThisDeviceOnly`).
    public static let endedService = "coffer.fastsync.ended"

    static func endedAddress(_ account: String) -> KeychainAddress {
        KeychainAddress(service: endedService, account: account)
    }

    /// Turns FastSync off here: deletes the account's record (without it an escrowed key opens nothing) and, when
    /// there was one, leaves a note that the service's key is still to be deleted, which
    /// ``deleteEscrowedKey(keychain:account:session:token:)`` acts on.
    ///
    /// - Returns: Whether there was a record.
    @discardableResult
    public static func end(keychain: any Keychain, account: String) throws(NotifyClientError) -> Bool {
        do {
            guard let record = try load(keychain: keychain, account: account) else { return false }
            try keychain.set(
                SecretBytes(copying: Array(record.sessionID.utf8)),
                at: endedAddress(account),
                accessibility: .afterFirstUnlockThisDeviceOnly
            )
            try keychain.delete(address(account))
            return true
        } catch let error as NotifyClientError {
            throw error
        } catch let error as KeychainError {
            throw .keychain(error)
        } catch {
            throw .invalidRecord("the FastSync record could not be deleted")
        }
    }

    /// Whether a record ended here and the service has not yet confirmed deleting its key.
    public static func escrowDeletionPending(keychain: any Keychain, account: String) throws(NotifyClientError) -> Bool
    {
        do {
            return try keychain.readIfPresent(endedAddress(account)) != nil
        } catch {
            throw .keychain(error)
        }
    }

    /// When a record ended here (``end(keychain:account:)``) and `session` is the one its key was escrowed for, asks
    /// the service to delete that key, then clears the note. A note of another session (since revoked) is cleared
    /// without a request.
    ///
    /// - Returns: Whether the service confirmed deleting a key (false when there was nothing to do).
    /// - Throws: The request's error; the note stays for the next try.
    public static func deleteEscrowedKey(
        keychain: any Keychain,
        account: String,
        session: PushSessionStore.Record,
        token: String
    ) async throws(NotifyClientError) -> Bool {
        let note: SecretBytes?
        do {
            note = try keychain.readIfPresent(endedAddress(account))
        } catch {
            throw .keychain(error)
        }
        guard let note else { return false }
        let sessionID = note.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        if sessionID == session.sessionID {
            try await NotifyClient(server: session.server).deleteKEK(token: token)
        }
        do {
            try keychain.delete(endedAddress(account))
        } catch {
            throw .keychain(error)
        }
        return sessionID == session.sessionID
    }

    /// Turns FastSync on (or renews it): a fresh KEK wraps the MainKey, the KEK is sealed to the service's escrow
    /// key for this session and expiry and uploaded, then the record is stored. The KEK is never written here.
    ///
    /// The caller must have authenticated the user for this (the one-shot command always does).
    /// - Returns: the record stored.
    public static func enable(
        mainKey: MainKey,
        keychain: any Keychain,
        account: String,
        session: PushSessionStore.Record,
        token: String,
        lifetime: TimeInterval,
        now: Date = Date()
    ) async throws(NotifyClientError) -> Record {
        guard lifetime >= 1, lifetime <= maximumLifetime else {
            throw .invalidRecord("a FastSync lifetime must be from 1 second to 7 days")
        }
        let expires = Int64(now.timeIntervalSince1970 + lifetime)
        let kek = SymmetricKey(size: .bits256)
        let envelopeKey: EnvelopeKey
        do { envelopeKey = try EnvelopeKey(kek) } catch { throw .crypto(error) }
        let wrapped: [UInt8]
        do {
            wrapped = try mainKey.sealed(
                under: envelopeKey,
                context: Record.context(account: account, sessionID: session.sessionID, expires: expires)
            )
        } catch {
            throw .keymaker(error)
        }
        let client = NotifyClient(server: session.server)
        let publicKey = try await client.fastSyncKey(token: token)
        let upload: FastSyncEscrowFormat.Upload
        do {
            upload = try FastSyncEscrowFormat.seal(
                kek: kek,
                to: publicKey,
                sessionID: session.sessionID,
                expires: expires
            )
        } catch {
            throw .malformedResponse("the service's escrow key is not an X25519 key")
        }
        try await client.putKEK(token: token, upload: upload)
        // The new key replaced any the service kept for an ended record: nothing is left to delete.
        try? keychain.delete(endedAddress(account))
        let record = Record(
            v: 1,
            account: account,
            sessionID: session.sessionID,
            expires: expires,
            wrappedMainKey: Data(wrapped).base64EncodedString()
        )
        guard let data = try? JSONEncoder().encode(record) else { throw .invalidRecord("the record cannot be written") }
        do {
            try keychain.set(
                SecretBytes(copying: data),
                at: address(account),
                accessibility: .afterFirstUnlockThisDeviceOnly
            )
        } catch {
            throw .keychain(error)
        }
        return record
    }

    /// The MainKey a push's FastSync key opens: `nil` when the push carries no key or this device keeps no FastSync
    /// record for the account; otherwise the record is checked against the wall clock and the session
    /// (``unwrap(record:kek:kekExpires:sessionID:now:)``). The caller hands the bytes to the account's coordinator,
    /// which grants them to one background sync and wipes them.
    ///
    /// - Returns: the MainKey's 32 octets, or `nil`.
    public static func mainKey(
        for push: PushMessage,
        keychain: any Keychain,
        account: String,
        sessionID: String
    ) throws(NotifyClientError) -> SecretBytes? {
        guard let key = push.fastSync, let record = try load(keychain: keychain, account: account) else { return nil }
        return try unwrap(record: record, kek: key.kek, kekExpires: key.expires, sessionID: sessionID)
    }

    /// Opens the MainKey with a KEK that came in a push, after checking with the wall clock that the record is
    /// unexpired and that the push's expiry and session are the record's: an expired KEK is refused even when the
    /// service sends it, and a replayed push never brings back an expired or replaced record.
    ///
    /// - Returns: the MainKey's 32 octets; the caller wipes them.
    /// - Throws: ``NotifyClientError/fastSyncExpired`` or ``NotifyClientError/fastSyncRefused(_:)``.
    public static func unwrap(
        record: Record,
        kek kekText: String,
        kekExpires: Int64,
        sessionID: String,
        now: Date = Date()
    ) throws(NotifyClientError) -> SecretBytes {
        guard record.expires > Int64(now.timeIntervalSince1970) else { throw .fastSyncExpired }
        guard kekExpires == record.expires, sessionID == record.sessionID else {
            throw .fastSyncRefused("the key in the push is not the one of the current FastSync record")
        }
        guard var kekBytes = Base64URL.decode(kekText), kekBytes.count == FastSyncEscrowFormat.kekLength else {
            throw .fastSyncRefused("the key in the push is not 32 bytes")
        }
        defer { for index in kekBytes.indices { kekBytes[index] = 0 } }
        guard let wrapped = Data(base64Encoded: record.wrappedMainKey) else {
            throw .invalidRecord("the wrapped MainKey is not base64")
        }
        do {
            let key = try EnvelopeKey(SymmetricKey(data: kekBytes))
            return try Envelope.openSecret(
                Array(wrapped),
                with: key,
                context: Record.context(account: record.account, sessionID: record.sessionID, expires: record.expires)
            )
        } catch {
            throw .fastSyncRefused("the key in the push does not open the FastSync record")
        }
    }
}
