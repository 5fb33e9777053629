import CofferCrypto
import Crypto
import Foundation

/// coffer-notify's folder: `$XDG_DATA_HOME/coffer-notify` (default `~/.local/share/coffer-notify`), mode 0700,
/// holding `notify.sqlite` (with its WAL), `master.key` (32 random bytes, 0600; for the FastSync escrow, which a
/// later slice seals with it) and `event-secret` (the Dovecot secret, 0600). Both files are made on first start.
public struct NotifyHome: Sendable {
    /// The folder.
    public let path: String

    /// The folder from `explicit` or the environment, created 0700 if missing.
    ///
    /// - Throws: `NotifyError.configuration` when it cannot be made or is open to others.
    public init(
        explicit: String?,
        environment: [String: String] = ProcessInfo.processInfo.environment
    )
        throws(NotifyError)
    {
        let root =
            explicit
            ?? environment["XDG_DATA_HOME"].map { "\($0)/coffer-notify" }
            ?? "\(environment["HOME"] ?? NSHomeDirectory())/.local/share/coffer-notify"
        do {
            try SecureFile.makePrivateDirectory(root)
        } catch {
            throw .configuration("the folder \(root) cannot be used (\(error))")
        }
        path = root
    }

    /// The SQLite database file.
    public var database: String { "\(path)/notify.sqlite" }

    /// The database files the service writes (`notify.sqlite`, `escrow.sqlite` and their WAL, shared-memory and
    /// journal files).
    public var databaseFiles: [String] {
        ["notify.sqlite", "escrow.sqlite"].flatMap { name in
            ["", "-wal", "-shm", "-journal"].map { "\(path)/\(name)\($0)" }
        }
    }

    /// Makes every existing database file 0600 (files made by an older version, or under a wider umask, were
    /// 0644); `coffer-notify` also sets its umask to 077, so files made later are private from the start.
    public func restrictDatabaseFiles() {
        for file in databaseFiles where FileManager.default.fileExists(atPath: file) {
            _ = chmod(file, 0o600)
        }
    }

    /// The master key, made (32 random bytes, 0600) on first use, in locked memory that is wiped when it is released
    /// (the bytes read from the file are wiped at once).
    public func masterKey() throws(NotifyError) -> SecretBytes {
        var bytes = try secret(named: "master.key") { SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) } }
        defer { bytes.withUnsafeMutableBytes { if let base = $0.baseAddress { explicit_bzero(base, $0.count) } } }
        return SecretBytes(copying: bytes)
    }

    /// The VAPID signing key (a raw 32-byte P-256 scalar, 0600), made on first use.
    public func vapidKey() throws(NotifyError) -> P256.Signing.PrivateKey {
        let raw = try secret(named: "vapid.key") { P256.Signing.PrivateKey().rawRepresentation.map { $0 } }
        do {
            return try P256.Signing.PrivateKey(rawRepresentation: raw)
        } catch {
            throw .configuration("\(path)/vapid.key is not a P-256 key")
        }
    }

    /// The Dovecot event secret (base64url text, 0600), made on first use.
    public func eventSecret() throws(NotifyError) -> [UInt8] {
        try secret(named: "event-secret") { Array(SessionToken().text.dropFirst(SessionToken.prefix.count).utf8) }
    }

    private func secret(named name: String, make: () -> [UInt8]) throws(NotifyError) -> [UInt8] {
        let file = "\(path)/\(name)"
        do {
            if let existing = try SecureFile.read(file, maxBytes: 4096) {
                try SecureFile.checkPrivate(file, folder: false)
                guard !existing.isEmpty else { throw NotifyError.configuration("\(file) is empty") }
                return existing
            }
            let fresh = make()
            try SecureFile.writeAtomically(fresh, to: file)
            return fresh
        } catch let error as NotifyError {
            throw error
        } catch {
            throw .configuration("\(file) cannot be read or made (\(error))")
        }
    }
}
