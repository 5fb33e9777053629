import CofferPush
import Crypto
import Foundation
import GRDB
import Hummingbird

/// The FastSync escrow (issue 11, seed `003_…`): a per-user X25519 key pair made by the service, and per session a
/// key-encryption key (KEK) the device sealed to it, with an expiry of at most 7 days. The service puts the KEK in
/// that session's new-mail pushes while it is unexpired and deletes it at expiry, revocation and unregistration.
///
/// Its own SQLite file (`escrow.sqlite` beside `notify.sqlite`), every secret sealed at rest with AES-256-GCM under
/// a key derived from the service's master key (`master.key`, outside the database). Formats: docs/FORMAT.md,
/// "FastSync escrow v1".
public final class FastSyncEscrow: Sendable {
    private let database: DatabaseQueue
    private let userKeyKey: SymmetricKey
    private let kekKey: SymmetricKey

    /// Opens (and makes) the escrow database; `masterKey` is the 32-octet master key.
    public init(path: String, masterKey: [UInt8]) throws(NotifyError) {
        guard masterKey.count == 32 else { throw .configuration("the master key must be 32 bytes") }
        let master = SymmetricKey(data: masterKey)
        func derive(_ label: String) -> SymmetricKey {
            HKDF<SHA256>.deriveKey(
                inputKeyMaterial: master,
                salt: Data("coffer-notify.escrow.v1".utf8),
                info: Data(label.utf8),
                outputByteCount: 32
            )
        }
        userKeyKey = derive("user-key")
        kekKey = derive("kek")
        do {
            var configuration = Configuration()
            configuration.busyMode = .timeout(10)
            database = try DatabaseQueue(path: path, configuration: configuration)
            var migrator = DatabaseMigrator()
            migrator.registerMigration("escrow-v1") { db in
                try db.execute(
                    sql: """
                        CREATE TABLE escrow_user (user TEXT PRIMARY KEY, public_key BLOB NOT NULL,
                          sealed_private_key BLOB NOT NULL);
                        CREATE TABLE escrow_kek (session_id TEXT PRIMARY KEY, user TEXT NOT NULL,
                          sealed_kek BLOB NOT NULL, expires INTEGER NOT NULL);
                        """
                )
            }
            try migrator.migrate(database)
        } catch {
            throw .storage("the escrow database could not be opened")
        }
    }

    private static func aad(_ parts: String...) -> Data { Data(parts.joined(separator: "\u{0}").utf8) }

    private func seal(_ data: Data, key: SymmetricKey, aad: Data) throws(NotifyError) -> Data {
        do {
            guard let combined = try AES.GCM.seal(data, using: key, authenticating: aad).combined else {
                throw NotifyError.storage("a seal failed")
            }
            return combined
        } catch {
            throw .storage("a seal failed")
        }
    }

    private func open(_ data: Data, key: SymmetricKey, aad: Data) throws(NotifyError) -> Data {
        do {
            return try AES.GCM.open(AES.GCM.SealedBox(combined: data), using: key, authenticating: aad)
        } catch {
            throw .storage("an escrow record does not open under the master key")
        }
    }

    private func run<T: Sendable>(_ body: @Sendable @escaping (Database) throws -> T) async throws(NotifyError) -> T {
        do {
            return try await database.write(body)
        } catch let error as NotifyError {
            throw error
        } catch {
            throw .storage("an escrow read or write failed")
        }
    }

    /// The user's escrow public key (32 raw X25519 octets), made on first use.
    public func publicKey(user: String) async throws(NotifyError) -> [UInt8] {
        let candidate = Curve25519.KeyAgreement.PrivateKey()
        let sealed = try seal(
            candidate.rawRepresentation,
            key: userKeyKey,
            aad: Self.aad("user-key", user)
        )
        let publicKey = candidate.publicKey.rawRepresentation
        return try await run { db in
            if let existing = try Data.fetchOne(
                db,
                sql: "SELECT public_key FROM escrow_user WHERE user = ?",
                arguments: [user]
            ) {
                return Array(existing)
            }
            try db.execute(
                sql: "INSERT INTO escrow_user (user, public_key, sealed_private_key) VALUES (?, ?, ?)",
                arguments: [user, publicKey, sealed]
            )
            return Array(publicKey)
        }
    }

    private func privateKey(user: String) async throws(NotifyError) -> Curve25519.KeyAgreement.PrivateKey {
        let sealed = try await run { db in
            try Data.fetchOne(db, sql: "SELECT sealed_private_key FROM escrow_user WHERE user = ?", arguments: [user])
        }
        guard let sealed else { throw .invalidRequest("fetch the escrow public key first") }
        let raw = try open(sealed, key: userKeyKey, aad: Self.aad("user-key", user))
        do {
            return try Curve25519.KeyAgreement.PrivateKey(rawRepresentation: raw)
        } catch {
            throw .storage("an escrow key is not valid")
        }
    }

    /// Stores a session's KEK from the device's upload, replacing an earlier one (renewal).
    ///
    /// - Throws: `.invalidRequest` for an expiry in the past or more than 7 days ahead, or an upload that does not
    ///   open for this session and expiry under the user's key.
    public func put(
        _ upload: FastSyncEscrowFormat.Upload,
        for session: NotifySession,
        now: Date
    )
        async throws(NotifyError)
    {
        let current = Int64(now.timeIntervalSince1970)
        guard upload.expires > current else { throw .invalidRequest("expires is in the past") }
        guard upload.expires <= current + Int64(FastSyncEscrowFormat.maximumLifetime) else {
            throw .invalidRequest("expires is more than 7 days ahead")
        }
        let key = try await privateKey(user: session.user)
        let kek: SymmetricKey
        do {
            kek = try FastSyncEscrowFormat.open(upload, with: key, sessionID: session.id)
        } catch {
            throw .invalidRequest("the sealed key does not open for this session and expiry")
        }
        let sealed = try seal(
            kek.withUnsafeBytes { Data($0) },
            key: kekKey,
            aad: Self.aad("kek", session.id, String(upload.expires))
        )
        let (id, user, expires) = (session.id, session.user, upload.expires)
        try await run { db in
            try db.execute(
                sql: "INSERT OR REPLACE INTO escrow_kek (session_id, user, sealed_kek, expires) VALUES (?, ?, ?, ?)",
                arguments: [id, user, sealed, expires]
            )
        }
    }

    /// The session's KEK and expiry while unexpired and the session live; an expired one is deleted.
    public func kek(
        for session: NotifySession,
        now: Date
    ) async throws(NotifyError) -> (
        kek: [UInt8], expires: Int64
    )? {
        let id = session.id
        guard session.isLive(at: now) else {
            try await delete(sessionID: id)
            return nil
        }
        let current = Int64(now.timeIntervalSince1970)
        let row = try await run { db -> (Data, Int64)? in
            try db.execute(sql: "DELETE FROM escrow_kek WHERE expires <= ?", arguments: [current])
            guard
                let row = try Row.fetchOne(
                    db,
                    sql: "SELECT sealed_kek, expires FROM escrow_kek WHERE session_id = ?",
                    arguments: [id]
                )
            else { return nil }
            return (row["sealed_kek"], row["expires"])
        }
        guard let (sealed, expires) = row else { return nil }
        let kek = try open(sealed, key: kekKey, aad: Self.aad("kek", id, String(expires)))
        return (Array(kek), expires)
    }

    /// Whether the session has an unexpired KEK (never the KEK itself).
    public func hasKEK(sessionID: String, now: Date) async throws(NotifyError) -> Int64? {
        let current = Int64(now.timeIntervalSince1970)
        return try await run { db in
            try Int64.fetchOne(
                db,
                sql: "SELECT expires FROM escrow_kek WHERE session_id = ? AND expires > ?",
                arguments: [sessionID, current]
            )
        }
    }

    /// Deletes the session's KEK (turned off, revoked, unregistered).
    public func delete(sessionID: String) async throws(NotifyError) {
        try await run { db in
            try db.execute(sql: "DELETE FROM escrow_kek WHERE session_id = ?", arguments: [sessionID])
        }
    }

    /// Deletes every expired KEK; returns how many.
    public func purge(now: Date) async throws(NotifyError) -> Int {
        let current = Int64(now.timeIntervalSince1970)
        return try await run { db in
            try db.execute(sql: "DELETE FROM escrow_kek WHERE expires <= ?", arguments: [current])
            return db.changesCount
        }
    }
}

/// `GET /v1/fastsync/key`.
public struct FastSyncKeyResponse: Codable, Sendable, ResponseEncodable {
    /// The user's 32-octet X25519 public key, base64url.
    public var publicKey: String
    /// The HPKE suite, for the reader: "DHKEM(X25519,HKDF-SHA256)/HKDF-SHA256/ChaCha20Poly1305".
    public var suite: String
}

/// `GET /v1/fastsync/kek`: whether a KEK is escrowed for this session, and until when.
public struct FastSyncStatusResponse: Codable, Sendable, ResponseEncodable {
    /// Unix seconds, absent when none.
    public var expires: Int64?
}
