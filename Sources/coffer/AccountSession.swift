import ArgumentParser
import CofferApp
import CofferCrypto
import CofferKeychain
import CofferKeymaker
import CofferNotifyClient

/// Which strategy to authenticate with when several are active.
enum UnlockPreference: String, ExpressibleByArgument, CaseIterable {
    case pin
    case secureElement = "secure-element"
}

/// One account opened by a one-shot command: like the seeds' Share extension, it authenticates by itself and drops
/// the key when the process exits.
struct AccountSession {
    let device: Device
    let account: String
    let keymaker: Keymaker

    static func open(_ options: HomeOptions) throws -> AccountSession {
        let device = try options.resolve().open()
        let account = try device.chooseAccount(options.account)
        let keymaker = device.keymaker(
            for: account,
            configuration: .oneShot(device.home, pushKeys: device.keychain)
        )
        return AccountSession(device: device, account: account, keymaker: keymaker)
    }

    /// Puts the MainKey in memory with the best available method: `none` silently, else the secure element when a
    /// terminal can confirm presence, else the PIN.
    func unlock(pinFromStdin: Bool, preference: UnlockPreference? = nil) async throws {
        try await keymaker.unlock(proof(pinFromStdin: pinFromStdin, preference: preference, purpose: "Unlock"))
    }

    /// A fresh proof by a current strategy, chosen as ``unlock(pinFromStdin:preference:)`` chooses: `none` when
    /// unprotected, else presence or the PIN (read from the terminal or standard input's next line).
    func proof(
        pinFromStdin: Bool,
        preference: UnlockPreference?,
        purpose: String
    ) async throws -> Keymaker.UnlockMethod {
        let strategies = try await keymaker.strategies()
        if strategies.contains(.none) { return .none }
        let useElement: Bool
        switch preference {
        case .pin?: useElement = false
        case .secureElement?: useElement = true
        case nil: useElement = strategies.contains(.secureElement) && !(strategies.contains(.pin) && pinFromStdin)
        }
        if useElement { return .secureElement(reason: "\(purpose) Coffer account \(account).") }
        return .pin(try Terminal.readPIN(prompt: "PIN for \(account): ", fromStdin: pinFromStdin))
    }
}

extension Keymaker.Configuration {
    /// The production configuration, whose ``Keymaker/Configuration/onDestroy`` deletes the account's mail folder
    /// (store and attachment cache): after too many wrong PINs nothing of the account stays on disk.
    /// With `pushKeys`, it also deletes the account's push session items (logout drops the push keys).
    static func oneShot(_ home: CofferHome, pushKeys: (any Keychain)? = nil) -> Keymaker.Configuration {
        let paths = AppPaths(data: home.data, keychain: home.keychain, state: home.state)
        return Keymaker.Configuration(onDestroy: { account in
            SecureFile.removeTree(paths.mail(account))
            if let pushKeys { try? PushSessionStore(keychain: pushKeys, account: account).delete() }
        })
    }
}
