import ArgumentParser
import CofferAgentProtocol
import CofferCommandLine
import CofferCrypto
import CofferKeychain
import CofferKeymaker
import CofferNotifyClient
import CofferReading
import CofferSync

#if canImport(Glibc)
import Glibc
#endif

extension CLIError {
    /// Nothing has been set up in this home.
    static let noAccount = CLIError("There is no account on this device yet; run `coffer init --account NAME`.")

    /// The keychain was sealed by another device, or this device lost its secret.
    static let otherDevice = CLIError(
        "These files belong to another device (or the device secret is gone), so Coffer cannot open them here; "
            + "nothing was changed. Use them on the machine that made them, or put its device secret back."
    )

    /// The sentence for any error the modules throw; their descriptions never contain secrets. The modules never
    /// name a command; where the way out is one, it is added here.
    init(wrapping error: any Error) {
        if let error = error as? CLIError {
            self = error
        } else if case AppError.noAccount = error {
            self = .noAccount
        } else if case AppError.unknownAccount = error {
            self.init("\(error) Run `coffer init --account NAME` to make one.")
        } else if case AppError.locked = error {
            // The dispatcher and the agent client turn every module's "locked" into this one case.
            self.init("\(error) Run `coffer unlock` to give Coffer the key again.")
        } else if let hint = Self.hint(for: error) {
            self.init("\(error) \(hint)")
        } else if let keychain = Self.keychainError(in: error),
            keychain == .deviceMismatch
                || keychain == .deviceSecretMissing
        {
            self = .otherDevice
        } else {
            // Every module error's description is a sentence written for people (on Linux every error has one).
            self.init(String(describing: error))
        }
    }
}

extension CLIError {
    /// The command that is the way out of a module's error, where there is one (the modules never name commands).
    fileprivate static func hint(for error: any Error) -> String? {
        switch error {
        case KeymakerError.notSetUp: "Run `coffer init` to log in."
        case SyncError.noAccount: "Run `coffer account add` first."
        case NotifyClientError.notRegistered: "Run `coffer notify register` first."
        case NotifyClientError.alreadyRegistered: "Run `coffer notify unregister` before registering again."
        default: nil
        }
    }

    /// The keychain error inside `error`, directly or as the Keymaker's cause.
    fileprivate static func keychainError(in error: any Error) -> KeychainError? {
        if let error = error as? KeychainError { return error }
        if case .keychain(let inner)? = error as? KeymakerError { return inner }
        return nil
    }
}

/// Runs a command body; any error becomes one sentence on standard error and exit status 1.
func runReportingErrors(_ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let exit as ExitCode {
        throw exit
    } catch {
        Terminal.printError(CLIError(wrapping: error).description)
        throw ExitCode(1)
    }
}
