import CofferAgentProtocol

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if canImport(Glibc)
import Glibc
#endif

extension AppPaths {
    /// Where Coffer keeps its files. With `--home H` (or `$COFFER_HOME`): `H/data` (store and cache), `H/keychain`,
    /// `H/state` (device secret, software secure element). Without: `$XDG_DATA_HOME/coffer` (default
    /// `~/.local/share/coffer`) for data and keychain, and `$XDG_STATE_HOME/coffer` (default `~/.local/state/coffer`)
    /// for the device secret and the secure element, so a copy of the data folder alone opens nothing.
    public static func forHome(_ home: String?) throws(CLIError) -> AppPaths {
        let environment = { (name: String) -> String? in
            guard let value = getenv(name) else { return nil }
            let text = String(cString: value)
            return text.isEmpty ? nil : text
        }
        if let root = home ?? environment("COFFER_HOME") {
            let absolute = absolutePath(root)
            return AppPaths(data: "\(absolute)/data", keychain: "\(absolute)/keychain", state: "\(absolute)/state")
        }
        guard let userHome = environment("HOME") else {
            throw CLIError("Neither --home, $COFFER_HOME nor $HOME is set, so Coffer does not know where to keep data.")
        }
        let dataRoot = environment("XDG_DATA_HOME") ?? "\(userHome)/.local/share"
        let stateRoot = environment("XDG_STATE_HOME") ?? "\(userHome)/.local/state"
        return AppPaths(
            data: "\(dataRoot)/coffer",
            keychain: "\(dataRoot)/coffer/keychain",
            state: "\(stateRoot)/coffer"
        )
    }
}

/// An error for the person at the terminal: one sentence, printed to standard error.
public struct CLIError: Error, CustomStringConvertible {
    /// The sentence.
    public let description: String

    /// An error that says `sentence`.
    public init(_ sentence: String) { description = sentence }
}

/// `path` made absolute against the current folder (the agent runs elsewhere).
public func absolutePath(_ path: String) -> String {
    if path.hasPrefix("/") { return path }
    return FileManager.default.currentDirectoryPath + "/" + path
}
