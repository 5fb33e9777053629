import CTSS2
import CofferCrypto

#if canImport(Glibc)
import Glibc
#endif

/// An open connection to a TPM 2.0 through tpm2-tss's ESAPI, over a TCTI the loader picks from a configuration
/// string (`device:/dev/tpmrm0` on a machine, `swtpm:host=127.0.0.1,port=P` for the tests' software TPM).
///
/// One context is used by one task at a time (ESAPI contexts are not thread-safe); it is closed when released.
public final class TPMContext {
    /// The TCTI configuration used when none is given: `COFFER_TPM_TCTI` if set, else the kernel's resource
    /// manager `device:/dev/tpmrm0` when that device exists, else `nil` (no TPM on this machine).
    public static func defaultConfiguration() -> String? {
        if let value = getenv("COFFER_TPM_TCTI"), value.pointee != 0 { return String(cString: value) }
        return access("/dev/tpmrm0", F_OK) == 0 ? "device:/dev/tpmrm0" : nil
    }

    /// tpm2-tss logs every refused command to stderr; Coffer reports errors itself (TPMError). Set once, before the
    /// first context; an explicit TSS2_LOG from the user still wins.
    private static let quietLogging: Void = { setenv("TSS2_LOG", "all+NONE", 0) }()

    /// The TCTI configuration this context was opened with.
    public let configuration: String
    let esys: OpaquePointer
    private var tcti: OpaquePointer?

    /// Opens the TPM reached through `configuration` (a tpm2-tss TCTI loader string).
    ///
    /// - Throws: ``TPMError/unavailable(configuration:detail:)`` when no TPM answers.
    public init(configuration: String) throws(TPMError) {
        self.configuration = configuration
        _ = Self.quietLogging
        var tcti: OpaquePointer?
        let loaded = Tss2_TctiLdr_Initialize(configuration, &tcti)
        guard loaded == 0, let tcti else {
            throw .unavailable(configuration: configuration, detail: TPMError.decode(loaded))
        }
        var esys: OpaquePointer?
        let opened = Esys_Initialize(&esys, tcti, nil)
        guard opened == 0, let esys else {
            var loose: OpaquePointer? = tcti
            Tss2_TctiLdr_Finalize(&loose)
            throw .unavailable(configuration: configuration, detail: TPMError.decode(opened))
        }
        self.tcti = tcti
        self.esys = esys
    }

    deinit {
        var context: OpaquePointer? = esys
        Esys_Finalize(&context)
        Tss2_TctiLdr_Finalize(&tcti)
    }

    /// Sets the TPM's dictionary-attack parameters through the lockout hierarchy.
    ///
    /// - Parameters:
    ///   - maxTries: failed authorizations before lockout.
    ///   - recoveryTime: seconds after which one failure is forgotten (0 turns DA protection off: refused here).
    ///   - lockoutRecovery: seconds before the lockout hierarchy may be tried again after its own failure.
    ///   - lockoutAuth: the lockout hierarchy's auth value (empty on a fresh TPM).
    /// - Warning: This changes a machine-wide TPM setting; on a real machine it belongs to provisioning.
    public func setDictionaryAttackParameters(
        maxTries: UInt32,
        recoveryTime: UInt32,
        lockoutRecovery: UInt32,
        lockoutAuth: SecretBytes? = nil
    ) throws(TPMError) {
        guard maxTries > 0, recoveryTime > 0 else {
            throw .invalidArgument(reason: "maxTries and recoveryTime must be above 0 (0 disables the lockout)")
        }
        if let lockoutAuth { try setAuth(ESYS_TR(ESYS_TR_RH_LOCKOUT), lockoutAuth) }
        defer { if lockoutAuth != nil { clearAuth(ESYS_TR(ESYS_TR_RH_LOCKOUT)) } }
        try check(
            Esys_DictionaryAttackParameters(
                esys,
                ESYS_TR(ESYS_TR_RH_LOCKOUT),
                ESYS_TR(ESYS_TR_PASSWORD),
                ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE),
                maxTries,
                recoveryTime,
                lockoutRecovery
            ),
            "DictionaryAttackParameters"
        )
    }

    /// Sends TPM2_Shutdown(STATE) so the TPM saves its state orderly before it is powered off or stopped.
    public func shutdown() throws(TPMError) {
        try check(
            Esys_Shutdown(
                esys,
                ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE),
                TPM2_SU(TPM2_SU_STATE)
            ),
            "Shutdown"
        )
    }

    // MARK: - Helpers shared by the sealing and NV files

    func check(_ rc: TSS2_RC, _ operation: String) throws(TPMError) {
        guard rc == 0 else { throw TPMError.from(rc, operation: operation) }
    }

    /// Gives `handle` the auth value `auth` for the next commands that authorize it.
    func setAuth(_ handle: ESYS_TR, _ auth: SecretBytes) throws(TPMError) {
        var value = TPM2B_AUTH()
        defer { wipe(&value) }
        try fill(&value.buffer, size: &value.size, from: auth, what: "auth value")
        try check(Esys_TR_SetAuth(esys, handle, &value), "TR_SetAuth")
    }

    func clearAuth(_ handle: ESYS_TR) {
        var empty = TPM2B_AUTH()
        _ = Esys_TR_SetAuth(esys, handle, &empty)
    }

    func flush(_ handle: ESYS_TR) { _ = Esys_FlushContext(esys, handle) }
}

/// Copies `bytes` into a TPM2B's fixed buffer (a C array Swift sees as a tuple) and sets its size.
func fill<Buffer>(_ buffer: inout Buffer, size: inout UInt16, from bytes: SecretBytes, what: String) throws(TPMError) {
    guard bytes.count <= MemoryLayout<Buffer>.size, let count = UInt16(exactly: bytes.count) else {
        throw .invalidArgument(reason: "the \(what) is longer than the TPM accepts")
    }
    withUnsafeMutableBytes(of: &buffer) { target in
        bytes.withUnsafeBytes { source in
            target.baseAddress!.copyMemory(from: source.baseAddress!, byteCount: Int(count))
        }
    }
    size = count
}

/// Zeroes a C structure that held a secret.
func wipe<Value>(_ value: inout Value) {
    withUnsafeMutableBytes(of: &value) { raw in
        guard let base = raw.baseAddress else { return }
        explicit_bzero(base, raw.count)
    }
}
