import Foundation
import Logging
import PostgresNIO

/// `coffer-notify --config FILE`: a JSON file choosing the storage engine (the rest stays on the command line).
///
/// ```json
/// {"storage": "postgres",
///  "postgres": {"host": "db.example.org", "port": 5432, "user": "coffer", "password": "…", "database": "notify",
///               "tls": true}}
/// ```
/// `storage` is `sqlite` (the default: the data folder's `notify.sqlite`) or `postgres`. With `tls` (the default)
/// the connection requires TLS checked against the system trust store. A file holding a password must be private
/// (0600), like the other secrets.
public struct NotifyConfig: Codable, Sendable, Equatable {
    /// The PostgreSQL connection.
    public struct Postgres: Codable, Sendable, Equatable {
        /// The server's host name or address.
        public var host: String
        /// The server's port (default 5432).
        public var port: Int?
        /// The role.
        public var user: String
        /// The role's password, if it has one.
        public var password: String?
        /// The database.
        public var database: String
        /// Whether to require TLS (default true).
        public var tls: Bool?

        /// Creates a connection description.
        public init(
            host: String,
            port: Int? = nil,
            user: String,
            password: String? = nil,
            database: String,
            tls: Bool? = nil
        ) {
            self.host = host
            self.port = port
            self.user = user
            self.password = password
            self.database = database
            self.tls = tls
        }
    }

    /// `sqlite` or `postgres`.
    public var storage: String?
    /// Required when `storage` is `postgres`.
    public var postgres: Postgres?

    /// A config choosing `storage` (nil: SQLite).
    public init(storage: String? = nil, postgres: Postgres? = nil) {
        self.storage = storage
        self.postgres = postgres
    }

    /// Reads and checks a config file.
    ///
    /// - Throws: `NotifyError.configuration` for an unreadable or malformed file, an unknown engine, a missing
    ///   `postgres` section, or a password in a file that others can read.
    public static func load(path: String) throws(NotifyError) -> NotifyConfig {
        let config: NotifyConfig
        do {
            config = try JSONDecoder().decode(NotifyConfig.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
        } catch {
            throw .configuration("\(path) is not a readable JSON config (\(type(of: error)))")
        }
        switch config.storage ?? "sqlite" {
        case "sqlite": break
        case "postgres":
            guard let postgres = config.postgres else {
                throw .configuration("\(path) chooses postgres but has no \"postgres\" section")
            }
            if postgres.password != nil {
                let mode = (try? FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) ?? 0o777
                guard mode & 0o077 == 0 else {
                    throw .configuration("\(path) holds a password and others can read it (chmod 600)")
                }
            }
        default: throw .configuration("\(path): storage must be \"sqlite\" or \"postgres\"")
        }
        return config
    }

    /// The postgres-nio configuration, when the engine is PostgreSQL.
    public var postgresConfiguration: PostgresClient.Configuration? {
        guard storage == "postgres", let postgres else { return nil }
        return PostgresClient.Configuration(
            host: postgres.host,
            port: postgres.port ?? 5432,
            username: postgres.user,
            password: postgres.password,
            database: postgres.database,
            tls: postgres.tls ?? true ? .require(.makeClientConfiguration()) : .disable
        )
    }

    /// Opens the chosen storage and the FastSync escrow's records: the home's SQLite files (`notify.sqlite`,
    /// `escrow.sqlite`), or PostgreSQL for both (also returned on its own, for its ``PostgresWakeService``).
    public func openStorage(
        home: NotifyHome,
        logger: Logger
    ) async throws(NotifyError) -> (
        storage: any NotifyStorage, escrow: any EscrowRecords, postgres: PostgresNotifyStorage?
    ) {
        let masterKey = try home.masterKey()
        // The storage keeps only the keys derived from it.
        defer { masterKey.wipe() }
        if let configuration = postgresConfiguration {
            let storage = try await PostgresNotifyStorage(
                configuration: configuration,
                masterKey: masterKey,
                logger: logger
            )
            return (storage, storage, storage)
        }
        let storage = try SQLiteNotifyStorage(path: home.database, masterKey: masterKey)
        let escrow = try SQLiteEscrowRecords(path: "\(home.path)/escrow.sqlite")
        home.restrictDatabaseFiles()
        return (storage, escrow, nil)
    }
}
