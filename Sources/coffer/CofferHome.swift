import CofferCrypto
import CofferKeychain
import CofferKeymaker

#if canImport(Glibc)
import Glibc
#endif

/// Where Coffer keeps its files, and the objects built on them.
///
/// With `--home H` (or `$COFFER_HOME`): `H/data` (store and cache), `H/keychain`, `H/state/device-secret`,
/// `H/state/secure-element`. Without: `$XDG_DATA_HOME/coffer` (default `~/.local/share/coffer`) for data and
/// keychain, and `$XDG_STATE_HOME/coffer` (default `~/.local/state/coffer`) for the device secret and the software
/// secure element, so a copy of the data folder alone opens nothing.
struct CofferHome: Sendable {
    let data: String
    let keychain: String
    let state: String

    var deviceSecret: String { "\(state)/device-secret" }
    var secureElement: String { "\(state)/secure-element" }

    static func resolve(home: String?) throws(CLIError) -> CofferHome {
        let environment = { (name: String) -> String? in
            guard let value = getenv(name) else { return nil }
            let text = String(cString: value)
            return text.isEmpty ? nil : text
        }
        if let root = home ?? environment("COFFER_HOME") {
            let absolute = root.hasPrefix("/") ? root : "\(currentDirectory())/\(root)"
            return CofferHome(data: "\(absolute)/data", keychain: "\(absolute)/keychain", state: "\(absolute)/state")
        }
        guard let userHome = environment("HOME") else {
            throw CLIError("Neither --home, $COFFER_HOME nor $HOME is set, so Coffer does not know where to keep data.")
        }
        let dataRoot = environment("XDG_DATA_HOME") ?? "\(userHome)/.local/share"
        let stateRoot = environment("XDG_STATE_HOME") ?? "\(userHome)/.local/state"
        return CofferHome(
            data: "\(dataRoot)/coffer",
            keychain: "\(dataRoot)/coffer/keychain",
            state: "\(stateRoot)/coffer"
        )
    }

    private static func currentDirectory() -> String {
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getcwd(&buffer, buffer.count) != nil else { return "." }
        return String(cString: buffer)
    }

    /// Opens the device identity, keychain and software secure element of a home that has been set up.
    ///
    /// Creates nothing: only ``openForSetUp(presence:)`` (`coffer init`) makes folders or the device secret.
    ///
    /// - Throws: "no account" if the keychain holds no items, ``KeychainError/deviceSecretMissing`` if it does but
    ///   the device secret is gone, or another module error.
    func open(presence: any PresenceAuthenticator = TerminalPresence()) throws -> Device {
        guard let device = try openIfSetUp(presence: presence) else { throw CLIError.noAccount }
        return device
    }

    /// As ``open(presence:)``, but `nil` when the home has no keychain items yet (nothing was set up here).
    func openIfSetUp(presence: any PresenceAuthenticator = TerminalPresence()) throws -> Device? {
        guard try FileKeychain.hasItems(in: keychain) else { return nil }
        return try open(DeviceIdentity.load(secretPath: deviceSecret), presence: presence)
    }

    /// Opens the home for first set-up, creating its folders and the device secret if they are missing (never over
    /// a keychain that already has items).
    func openForSetUp(presence: any PresenceAuthenticator = TerminalPresence()) throws -> Device {
        try open(DeviceIdentity.loadOrCreate(secretPath: deviceSecret, keychainFolder: keychain), presence: presence)
    }

    private func open(_ identity: DeviceIdentity, presence: any PresenceAuthenticator) throws -> Device {
        let keychain = try FileKeychain(folder: keychain, device: identity)
        let element = try SoftwareSecureElement(folder: secureElement, device: identity, presence: presence)
        return Device(home: self, identity: identity, keychain: keychain, secureElement: element)
    }
}

/// The device-level objects of a home.
struct Device: Sendable {
    let home: CofferHome
    let identity: DeviceIdentity
    let keychain: FileKeychain
    let secureElement: SoftwareSecureElement

    /// The accounts that have a MainKey on this device.
    func accounts() throws -> [String] {
        try keychain.addresses(accessGroup: "coffer", service: "coffer.protection").map(\.account)
    }

    /// The Keymaker for `account`.
    func keymaker(for account: String, configuration: Keymaker.Configuration = Keymaker.Configuration()) -> Keymaker {
        Keymaker(
            account: account,
            keychain: keychain,
            device: identity,
            secureElement: secureElement,
            configuration: configuration
        )
    }

    /// The account named by `--account`, or the only one.
    func chooseAccount(_ requested: String?) throws -> String {
        let known = try accounts()
        if let requested {
            guard known.contains(requested) else {
                throw CLIError(
                    "There is no account named \(requested) on this device; run `coffer init --account NAME`."
                )
            }
            return requested
        }
        switch known.count {
        case 0: throw CLIError.noAccount
        case 1: return known[0]
        default: throw CLIError("There are \(known.count) accounts on this device; choose one with --account.")
        }
    }
}
