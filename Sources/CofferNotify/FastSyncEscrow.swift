import CofferCrypto
import CofferPush
import Crypto
import Foundation
import GRDB
import Hummingbird

/// Where the FastSync escrow keeps its records, already sealed by ``FastSyncEscrow``: the SQLite engine's own file
/// (``SQLiteEscrowRecords``, `escrow.sqlite`) or the shared PostgreSQL database (``PostgresNotifyStorage``), so that
/// every instance on one database attaches a key escrowed through any of them.
public protocol EscrowRecords: Sendable {
    /// Stores the user's key pair unless the user has one; returns the public key that is stored (the first one
    /// wins when two instances race).
    func insertEscrowUser(
        user: String,
        publicKey: [UInt8],
        sealedPrivateKey: [UInt8]
    ) async throws(NotifyError)
        -> [UInt8]
    /// The user's sealed private key, nil when the user has no key pair.
    func sealedEscrowPrivateKey(user: String) async throws(NotifyError) -> [UInt8]?
    /// Stores the session's sealed KEK, replacing an earlier one.
    func putEscrowedKEK(sessionID: String, user: String, sealed: [UInt8], expires: Int64) async throws(NotifyError)
    /// The session's KEK unless it expired at `now` (Unix seconds); a read only (expired rows go in the purge).
    func escrowedKEK(sessionID: String, now: Int64) async throws(NotifyError) -> (sealed: [UInt8], expires: Int64)?
    /// The unexpired KEKs of these sessions, by session id (a session without one is absent), read at once.
    func escrowedKEKs(
        sessionIDs: [String],
        now: Int64
    ) async throws(NotifyError) -> [String: (sealed: [UInt8], expires: Int64)]
    /// Deletes the session's KEK.
    func deleteEscrowedKEK(sessionID: String) async throws(NotifyError)
    /// Deletes every KEK that expired at `now`; returns how many.
    func purgeEscrowedKEKs(now: Int64) async throws(NotifyError) -> Int
}

extension EscrowRecords {
    /// ``escrowedKEK(sessionID:now:)`` for each session in turn; engines that can read them at once do.
    public func escrowedKEKs(
        sessionIDs: [String],
        now: Int64
    ) async throws(NotifyError) -> [String: (sealed: [UInt8], expires: Int64)] {
        var found: [String: (sealed: [UInt8], expires: Int64)] = [:]
        for id in sessionIDs { found[id] = try await escrowedKEK(sessionID: id, now: now) }
        return found
    }
}

/// The FastSync escrow (issue 11, seed `003_…`): a per-user X25519 key pair made by the service, and per session a
/// key-encryption key (KEK) the device sealed to it, with an expiry of at most 7 days. The service puts the KEK in
/// that session's new-mail pushes while it is unexpired and deletes it at expiry, revocation and unregistration.
///
/// Every secret is sealed at rest with AES-256-GCM under a key derived from the service's master key (`master.key`,
/// outside the database) before it reaches the ``EscrowRecords``. Formats: docs/FORMAT.md, "FastSync escrow v1".
///
/// Its description, debug description and mirror show no key (`FastSyncEscrow(<redacted>)`).
public final class FastSyncEscrow: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    private let records: any EscrowRecords
    private let userKeyKey: SymmetricKey
    private let kekKey: SymmetricKey

    /// The escrow over `records`; `masterKey` is the 32-octet master key (shared by every instance on one database).
    public init(records: any EscrowRecords, masterKey: SecretBytes) throws(NotifyError) {
        guard masterKey.count == 32, !masterKey.isWiped else {
            throw .configuration("the master key must be 32 bytes")
        }
        let master = masterKey.withUnsafeBytes { SymmetricKey(data: $0) }
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
        self.records = records
    }

    private static func aad(_ parts: String...) -> Data { Data(parts.joined(separator: "\u{0}").utf8) }

    /// `FastSyncEscrow(<redacted>)`.
    public var description: String { "FastSyncEscrow(<redacted>)" }
    /// `FastSyncEscrow(<redacted>)`.
    public var debugDescription: String { description }
    /// No children: the keys are not reflected.
    public var customMirror: Mirror { Mirror(self, children: [:]) }

    private func seal(_ data: Data, key: SymmetricKey, aad: Data) throws(NotifyError) -> [UInt8] {
        do {
            guard let combined = try AES.GCM.seal(data, using: key, authenticating: aad).combined else {
                throw NotifyError.storage("a seal failed")
            }
            return Array(combined)
        } catch {
            throw .storage("a seal failed")
        }
    }

    private func open(_ data: [UInt8], key: SymmetricKey, aad: Data) throws(NotifyError) -> Data {
        do {
            return try AES.GCM.open(AES.GCM.SealedBox(combined: data), using: key, authenticating: aad)
        } catch {
            throw .storage("an escrow record does not open under the master key")
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
        return try await records.insertEscrowUser(
            user: user,
            publicKey: Array(candidate.publicKey.rawRepresentation),
            sealedPrivateKey: sealed
        )
    }

    private func privateKey(user: String) async throws(NotifyError) -> Curve25519.KeyAgreement.PrivateKey {
        guard let sealed = try await records.sealedEscrowPrivateKey(user: user) else {
            throw .invalidRequest("fetch the escrow public key first")
        }
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
        try await records.putEscrowedKEK(
            sessionID: session.id,
            user: session.user,
            sealed: sealed,
            expires: upload.expires
        )
    }

    /// The session's KEK and expiry while unexpired and the session live (a session that is not live loses its KEK
    /// here; an expired KEK is never returned, and the purge deletes it).
    public func kek(
        for session: NotifySession,
        now: Date
    ) async throws(NotifyError) -> (
        kek: [UInt8], expires: Int64
    )? {
        guard session.isLive(at: now) else {
            try await delete(sessionID: session.id)
            return nil
        }
        guard
            let (sealed, expires) = try await records.escrowedKEK(
                sessionID: session.id,
                now: Int64(now.timeIntervalSince1970)
            )
        else { return nil }
        let kek = try open(sealed, key: kekKey, aad: Self.aad("kek", session.id, String(expires)))
        return (Array(kek), expires)
    }

    /// ``kek(for:now:)`` for several live sessions (an event's) in one read of the records, by session id; a
    /// session without an unexpired KEK is absent. A KEK that does not open is left out (that session's push goes
    /// without it), as the event path treats ``kek(for:now:)``'s error.
    public func keks(
        for sessions: [NotifySession],
        now: Date
    ) async throws(NotifyError) -> [String: (kek: [UInt8], expires: Int64)] {
        let live = sessions.filter { $0.isLive(at: now) }
        guard !live.isEmpty else { return [:] }
        let found = try await records.escrowedKEKs(sessionIDs: live.map(\.id), now: Int64(now.timeIntervalSince1970))
        var keks: [String: (kek: [UInt8], expires: Int64)] = [:]
        for (id, (sealed, expires)) in found {
            guard let kek = try? open(sealed, key: kekKey, aad: Self.aad("kek", id, String(expires))) else { continue }
            keks[id] = (Array(kek), expires)
        }
        return keks
    }

    /// Until when the session has an unexpired KEK, nil when it has none (never the KEK itself).
    public func kekExpiry(sessionID: String, now: Date) async throws(NotifyError) -> Int64? {
        try await records.escrowedKEK(sessionID: sessionID, now: Int64(now.timeIntervalSince1970))?.expires
    }

    /// Deletes the session's KEK (turned off, revoked, unregistered).
    public func delete(sessionID: String) async throws(NotifyError) {
        try await records.deleteEscrowedKEK(sessionID: sessionID)
    }

    /// Deletes every expired KEK; returns how many.
    public func purge(now: Date) async throws(NotifyError) -> Int {
        try await records.purgeEscrowedKEKs(now: Int64(now.timeIntervalSince1970))
    }
}

/// The SQLite engine's escrow records: their own file (`escrow.sqlite` beside `notify.sqlite`), so that the
/// session database's migrations stay untouched.
public final class SQLiteEscrowRecords: EscrowRecords {
    private let database: DatabaseQueue

    /// Opens (and makes) the escrow database.
    public init(path: String) throws(NotifyError) {
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
            // escrow-v2 (issue 24): user names in their canonical form (``MailUser``). A case variant's key pair
            // gives way to the canonical name's (or takes the canonical name when there is none); every KEK row
            // names its user canonically.
            migrator.registerMigration("escrow-v2") { db in
                for user in try String.fetchAll(db, sql: "SELECT user FROM escrow_user ORDER BY user")
                where MailUser.canonical(user) != user {
                    try db.execute(
                        sql: "UPDATE OR IGNORE escrow_user SET user = ? WHERE user = ?",
                        arguments: [MailUser.canonical(user), user]
                    )
                    try db.execute(sql: "DELETE FROM escrow_user WHERE user = ?", arguments: [user])
                }
                for user in try String.fetchAll(db, sql: "SELECT DISTINCT user FROM escrow_kek")
                where MailUser.canonical(user) != user {
                    try db.execute(
                        sql: "UPDATE escrow_kek SET user = ? WHERE user = ?",
                        arguments: [MailUser.canonical(user), user]
                    )
                }
            }
            try migrator.migrate(database)
        } catch {
            throw .storage("the escrow database could not be opened")
        }
    }

    private func run<T: Sendable>(_ body: @Sendable @escaping (Database) throws -> T) async throws(NotifyError) -> T {
        do {
            return try await database.write(body)
        } catch {
            throw .storage("an escrow read or write failed")
        }
    }

    /// See ``EscrowRecords/insertEscrowUser(user:publicKey:sealedPrivateKey:)``.
    public func insertEscrowUser(
        user: String,
        publicKey: [UInt8],
        sealedPrivateKey: [UInt8]
    ) async throws(NotifyError) -> [UInt8] {
        try await run { db in
            try db.execute(
                sql: "INSERT OR IGNORE INTO escrow_user (user, public_key, sealed_private_key) VALUES (?, ?, ?)",
                arguments: [user, Data(publicKey), Data(sealedPrivateKey)]
            )
            let stored = try Data.fetchOne(
                db,
                sql: "SELECT public_key FROM escrow_user WHERE user = ?",
                arguments: [user]
            )
            return stored.map(Array.init) ?? publicKey
        }
    }

    /// See ``EscrowRecords/sealedEscrowPrivateKey(user:)``.
    public func sealedEscrowPrivateKey(user: String) async throws(NotifyError) -> [UInt8]? {
        try await run { db in
            try Data.fetchOne(db, sql: "SELECT sealed_private_key FROM escrow_user WHERE user = ?", arguments: [user])
                .map(Array.init)
        }
    }

    /// See ``EscrowRecords/putEscrowedKEK(sessionID:user:sealed:expires:)``.
    public func putEscrowedKEK(
        sessionID: String,
        user: String,
        sealed: [UInt8],
        expires: Int64
    ) async throws(NotifyError) {
        try await run { db in
            try db.execute(
                sql: "INSERT OR REPLACE INTO escrow_kek (session_id, user, sealed_kek, expires) VALUES (?, ?, ?, ?)",
                arguments: [sessionID, user, Data(sealed), expires]
            )
        }
    }

    /// See ``EscrowRecords/escrowedKEK(sessionID:now:)``.
    public func escrowedKEK(
        sessionID: String,
        now: Int64
    ) async throws(NotifyError) -> (
        sealed: [UInt8], expires: Int64
    )? {
        do {
            return try await database.read { db -> (sealed: [UInt8], expires: Int64)? in
                guard
                    let row = try Row.fetchOne(
                        db,
                        sql: "SELECT sealed_kek, expires FROM escrow_kek WHERE session_id = ? AND expires > ?",
                        arguments: [sessionID, now]
                    )
                else { return nil }
                return (Array(row["sealed_kek"] as Data), row["expires"])
            }
        } catch {
            throw .storage("an escrow read or write failed")
        }
    }

    /// See ``EscrowRecords/escrowedKEKs(sessionIDs:now:)``: one read for all of them.
    public func escrowedKEKs(
        sessionIDs: [String],
        now: Int64
    ) async throws(NotifyError) -> [String: (sealed: [UInt8], expires: Int64)] {
        guard !sessionIDs.isEmpty else { return [:] }
        do {
            return try await database.read { db -> [String: (sealed: [UInt8], expires: Int64)] in
                let select = try db.cachedStatement(
                    sql: "SELECT sealed_kek, expires FROM escrow_kek WHERE session_id = ? AND expires > ?"
                )
                var found: [String: (sealed: [UInt8], expires: Int64)] = [:]
                for id in sessionIDs {
                    if let row = try Row.fetchOne(select, arguments: [id, now]) {
                        found[id] = (Array(row["sealed_kek"] as Data), row["expires"])
                    }
                }
                return found
            }
        } catch {
            throw .storage("an escrow read or write failed")
        }
    }

    /// See ``EscrowRecords/deleteEscrowedKEK(sessionID:)``.
    public func deleteEscrowedKEK(sessionID: String) async throws(NotifyError) {
        try await run { db in
            try db.execute(sql: "DELETE FROM escrow_kek WHERE session_id = ?", arguments: [sessionID])
        }
    }

    /// See ``EscrowRecords/purgeEscrowedKEKs(now:)``.
    public func purgeEscrowedKEKs(now: Int64) async throws(NotifyError) -> Int {
        try await run { db in
            try db.execute(sql: "DELETE FROM escrow_kek WHERE expires <= ?", arguments: [now])
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
