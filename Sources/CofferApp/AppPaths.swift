import Crypto

#if canImport(Glibc)
import Glibc
#endif

/// Where one Coffer home keeps its files (the CLI resolves `--home`, `$COFFER_HOME` or the XDG folders into this).
public struct AppPaths: Sendable, Equatable {
    /// Store and cache: `<data>/mail/<account>/{store,cache}`.
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
    /// One account's mail folder.
    public func mail(_ account: String) -> String { "\(data)/mail/\(account)" }
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
        let hex = digest.prefix(8).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
        return "agent-\(hex).sock"
    }
}
