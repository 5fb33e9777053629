import CofferCrypto
import CofferKeymaker
import CofferTPM

/// The ``HardwareSealer`` on a TPM 2.0 reached through a tpm2-tss TCTI configuration: a secret sealed under the
/// storage key with a device-bound auth value and no dictionary-attack protection (the auth value is not guessable).
/// Each call opens its own connection and closes it.
public struct TPMKeySealer: HardwareSealer {
    /// The TCTI configuration (`device:/dev/tpmrm0`, `swtpm:host=127.0.0.1,port=P`).
    public let configuration: String

    /// A sealer on the TPM reached through `configuration`.
    public init(configuration: String) { self.configuration = configuration }

    /// The sealer of this machine: `COFFER_TPM_TCTI` if set, else `/dev/tpmrm0` when it exists, else `nil` (no
    /// TPM). Nothing is opened until a call needs the TPM.
    public static func fromEnvironment() -> TPMKeySealer? {
        TPMContext.defaultConfiguration().map(TPMKeySealer.init(configuration:))
    }

    /// See ``HardwareSealer/seal(_:authValue:)``: `nil` when no TPM answers.
    public func seal(_ secret: SecretBytes, authValue: SecretBytes) throws(KeymakerError) -> [UInt8]? {
        do {
            let context = try TPMContext(configuration: configuration)
            return try context.seal(secret, authValue: authValue, dictionaryAttackProtected: false).serialized
        } catch .unavailable {
            return nil
        } catch {
            throw KeymakerError(error)
        }
    }

    /// See ``HardwareSealer/unseal(_:authValue:)``.
    public func unseal(_ sealed: [UInt8], authValue: SecretBytes) throws(KeymakerError) -> SecretBytes {
        do {
            let object = try TPMSealedObject(serialized: sealed)
            return try TPMContext(configuration: configuration).unseal(object, authValue: authValue)
        } catch {
            throw KeymakerError(error)
        }
    }
}
