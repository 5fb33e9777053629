import CofferCrypto
import Crypto

#if canImport(Glibc)
import Glibc
#endif

/// Where one Coffer home keeps its files (the CLI resolves `--home`, `$COFFER_HOME` or the XDG folders into this).
public struct AppPaths: Sendable, Equatable {
    /// Store and cache: `<data>/mail/<folder>/{store,cache}`, where `<folder>` is ``AccountName/folderName(_:)``.
    public var data: String
    /// The keychain folder.
    public var keychain: String
    /// The device secret and the software secure element.
    public var state: String

    /// Paths from their three roots.
    public init(data: String, keychain: String, state: String) {
        self.data = data
        self.keychain = keychain
        self.state = state
    }

    /// The device secret file.
    public var deviceSecret: String { "\(state)/device-secret" }
    /// The software secure element's folder.
    public var secureElement: String { "\(state)/secure-element" }
    /// One account's mail folder: `<data>/mail/` and ``AccountName/folderName(_:)``, never the raw name.
    public func mail(_ account: String) -> String { "\(data)/mail/\(AccountName.folderName(account))" }
    /// Moves the folder an earlier version named after the raw account name (`<data>/mail/<name>`) to
    /// ``mail(_:)``, once: only for a valid name, only a real folder of this user (not a link), and only when the new
    /// folder does not exist yet. Whoever opens an account's store or cache, or logs it out, calls this first.
    public func migrateLegacyMail(_ account: String) {
        guard AccountName.problem(account) == nil else { return }
        let legacy = "\(data)/mail/\(account)"
        let current = mail(account)
        guard legacy != current else { return }
        var status = stat()
        guard lstat(legacy, &status) == 0, status.st_mode & S_IFMT == S_IFDIR, status.st_uid == getuid() else { return }
        guard lstat(current, &status) != 0, errno == ENOENT else { return }
        _ = rename(legacy, current)
    }

    /// One account's store folder.
    public func store(_ account: String) -> String { "\(mail(account))/store" }
    /// One account's attachment cache folder.
    public func cache(_ account: String) -> String { "\(mail(account))/cache" }

    /// The folder of agent sockets: `$XDG_RUNTIME_DIR/coffer`, else `<state>/agent`.
    public var agentFolder: String {
        if let runtime = getenv("XDG_RUNTIME_DIR").map({ String(cString: $0) }), runtime.hasPrefix("/") {
            return "\(runtime)/coffer"
        }
        return "\(state)/agent"
    }

    /// This home's agent socket: `agent-<16 hex digits of SHA-256 of the data folder>.sock` in ``agentFolder``, so
    /// every home (a test's temporary one too) has its own agent.
    public var agentSocket: String { "\(agentFolder)/\(agentSocketName)" }

    /// The socket's file name: `agent-<16 hex digits of SHA-256 of the data folder>.sock`.
    public var agentSocketName: String {
        let digest = SHA256.hash(data: Array(data.utf8))
        return "agent-\(Array(digest.prefix(8)).hexString).sock"
    }
}
