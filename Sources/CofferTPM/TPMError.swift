import CTSS2
import NIOConcurrencyHelpers

/// Why a TPM operation failed. No message carries an auth value, a PIN or a sealed secret: only the operation, the
/// TPM's response code and tpm2-tss's decoding of it.
public enum TPMError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No TPM could be reached through the TCTI configuration (no device, no permission, no simulator listening).
    case unavailable(configuration: String, detail: String)
    /// The auth value (the PIN's derivative) was wrong. The TPM counted the failure against its dictionary-attack
    /// threshold.
    case authorizationFailed
    /// The TPM is in dictionary-attack lockout: it refuses every DA-protected authorization, right or wrong, until
    /// its recovery time has passed.
    case lockedOut
    /// The sealed object was not made by this TPM (another machine, a cleared TPM) or was altered.
    case foreignObject
    /// Stored TPM bytes do not parse; `what` names the record.
    case malformed(what: String)
    /// An argument is out of range; `reason` says which and why.
    case invalidArgument(reason: String)
    /// The NV index is already defined on this TPM.
    case nvIndexInUse(index: UInt32)
    /// The NV index is not defined on this TPM (deleted, another machine, a cleared TPM).
    case nvIndexMissing(index: UInt32)
    /// A record's NV counter value is not the TPM's: the record is older than the TPM's state (restored from a
    /// copy) or the counter was advanced without it. Callers treat it as exhausted attempts.
    case counterMismatch
    /// Any other failure: the operation, the TSS response code and its decoding.
    case failed(operation: String, code: UInt32, detail: String)

    /// A sentence for people.
    public var description: String {
        switch self {
        case .unavailable(let configuration, let detail):
            "No TPM is reachable through \"\(configuration)\" (\(detail))."
        case .authorizationFailed: "The TPM refused the PIN; the failure counts toward its lockout."
        case .lockedOut:
            "The TPM is locked out after too many wrong PINs; it accepts none, right or wrong, until its recovery time passes."
        case .foreignObject:
            "The sealed key was not made by this TPM (another machine, or a cleared TPM) or was altered."
        case .malformed(let what): "The stored \(what) is damaged."
        case .invalidArgument(let reason): "Invalid TPM argument: \(reason)."
        case .nvIndexInUse(let index): "The TPM's NV index \(hex(index)) is already in use."
        case .nvIndexMissing(let index): "The TPM has no NV index \(hex(index)) (deleted, or another TPM)."
        case .counterMismatch:
            "The attempt record does not match the TPM's counter: it was restored from an older copy or tampered with."
        case .failed(let operation, let code, let detail): "TPM \(operation) failed: \(detail) (\(hex(code)))."
        }
    }

    /// Maps a tpm2-tss response code of `operation` to an error, recognising the dictionary-attack answers.
    static func from(_ rc: TSS2_RC, operation: String) -> TPMError {
        switch TPMResponse(rc) {
        case .authFail: .authorizationFailed
        case .lockout: .lockedOut
        case .integrity: .foreignObject
        default: .failed(operation: operation, code: rc, detail: decode(rc))
        }
    }

    /// tpm2-tss's text for `rc` (Tss2_RC_Decode writes a static buffer, so calls are serialised).
    static func decode(_ rc: TSS2_RC) -> String {
        decodeLock.withLock {
            guard let text = Tss2_RC_Decode(rc) else { return "unknown response code" }
            return String(cString: text)
        }
    }

    private static let decodeLock = NIOLock()
}

/// The TPM answers a caller treats specially, read from a response code (TPM 2.0 Part 2, 6.6).
enum TPMResponse: Equatable {
    case success, authFail, lockout, integrity, nvDefined, handle, other

    init(_ rc: TSS2_RC) {
        guard rc != 0 else {
            self = .success
            return
        }
        // Only codes of the TPM itself (layer 0) or passed through a resource manager carry TPM meanings.
        let layer = rc & 0x00FF_0000
        guard layer == 0 || layer == 12 << 16 else {  // TSS2_RESMGR_TPM_RC_LAYER
            self = .other
            return
        }
        let code = rc & 0xFFFF
        if code & 0x80 != 0 {
            // Format 1: the error number in bits 0-5, the parameter, handle or session number above it.
            switch code & 0x3F {
            case 0x0E, 0x22: self = .authFail  // AUTH_FAIL, or BAD_AUTH on a noDA object
            case 0x1F: self = .integrity
            case 0x0B: self = .handle
            default: self = .other
            }
        } else if code == 0x921 {
            self = .lockout
        } else if code == 0x14C {
            self = .nvDefined
        } else {
            self = .other
        }
    }
}

func hex(_ value: UInt32) -> String {
    let digits = String(value, radix: 16)
    return "0x" + String(repeating: "0", count: max(0, 8 - digits.count)) + digits
}
