import ArgumentParser
import CofferCrypto
import CofferKeychain
import CofferKeymaker

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
        return AccountSession(device: device, account: account, keymaker: device.keymaker(for: account))
    }

    /// Puts the MainKey in memory with the best available method: `none` silently, else the secure element when a
    /// terminal can confirm presence, else the PIN.
    func unlock(pinFromStdin: Bool, preference: UnlockPreference? = nil) async throws {
        let strategies = try await keymaker.strategies()
        if strategies.contains(.none) {
            try await keymaker.unlock(.none)
            return
        }
        let useElement: Bool
        switch preference {
        case .pin?: useElement = false
        case .secureElement?: useElement = true
        case nil: useElement = strategies.contains(.secureElement) && !(strategies.contains(.pin) && pinFromStdin)
        }
        if useElement {
            try await keymaker.unlock(.secureElement(reason: "Unlock Coffer account \(account)."))
        } else {
            let pin = try Terminal.readPIN(prompt: "PIN for \(account): ", fromStdin: pinFromStdin)
            try await keymaker.unlock(.pin(pin))
        }
    }
}
