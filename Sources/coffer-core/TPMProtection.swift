import CofferCommandLine
import CofferKeymaker
import CofferKeymakerTPM
import CofferReading

/// The CLI's side of the TPM-bound PIN: whether a TPM answers.
enum TPMCheck {
    /// What `protect pin --tpm` says instead of the offline-cost estimate: the TPM's lockout bounds the guesses.
    static let sentence =
        "The PIN is bound to this machine's TPM: a wrong PIN is counted by the TPM itself, which locks out past its "
        + "threshold, and a copy of this disk cannot try PINs anywhere else."

    /// Fails with one sentence, before anything is asked or changed, when no TPM answers.
    static func require() throws {
        guard let binder = TPMPINBinder.fromEnvironment() else {
            throw CLIError(
                "No TPM on this machine (no /dev/tpmrm0 and COFFER_TPM_TCTI is not set), so nothing was changed; "
                    + "`coffer protect pin` without --tpm sets a software PIN."
            )
        }
        do {
            try binder.probe()
        } catch {
            throw CLIError(
                "The TPM at \(binder.configuration) does not answer, so nothing was changed; "
                    + "`coffer protect pin` without --tpm sets a software PIN."
            )
        }
    }
}
