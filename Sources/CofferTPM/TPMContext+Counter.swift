import CTSS2
import CofferCrypto

/// A monotonic TPM NV counter: an index in the owner range whose 8-byte value only TPM2_NV_Increment changes and
/// which never goes down, whatever happens to the files on disk.
public struct TPMNVCounter: Sendable, Equatable, Hashable {
    /// The owner-defined NV index range (TCG handle registry): 0x01000000 through 0x013FFFFF.
    public static let ownerRange: ClosedRange<UInt32> = 0x0100_0000...0x013F_FFFF
    /// The NV index.
    public let index: UInt32

    /// Names the counter at `index`, which must lie in ``ownerRange``.
    ///
    /// - Throws: ``TPMError/invalidArgument(reason:)`` outside the owner range.
    public init(index: UInt32) throws(TPMError) {
        guard Self.ownerRange.contains(index) else {
            throw .invalidArgument(reason: "an NV counter index lies in the owner range 0x01000000-0x013FFFFF")
        }
        self.index = index
    }
}

extension TPMContext {
    /// Defines a counter (TPMA_NV_COUNTER, read and written with `authValue`) at a random free index of the owner
    /// range and increments it once, so it has a value to read; returns it.
    ///
    /// A new counter starts at the highest value any counter on this TPM has had, never below.
    public func defineCounter(authValue: SecretBytes) throws(TPMError) -> TPMNVCounter {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<16 {
            let counter = try TPMNVCounter(index: UInt32.random(in: TPMNVCounter.ownerRange, using: &generator))
            do {
                try defineCounter(counter, authValue: authValue)
                return counter
            } catch .nvIndexInUse {
                continue
            }
        }
        throw .failed(operation: "NV_DefineSpace", code: 0, detail: "no free index found in the owner range")
    }

    /// Defines `counter` (TPMA_NV_COUNTER | AUTHREAD | AUTHWRITE with `authValue`) and increments it once.
    ///
    /// - Throws: ``TPMError/nvIndexInUse(index:)`` if the index is already defined.
    public func defineCounter(_ counter: TPMNVCounter, authValue: SecretBytes) throws(TPMError) {
        var auth = TPM2B_AUTH()
        defer { wipe(&auth) }
        try fill(&auth.buffer, size: &auth.size, from: authValue, what: "NV auth value")
        var info = TPM2B_NV_PUBLIC()
        info.nvPublic.nvIndex = counter.index
        info.nvPublic.nameAlg = TPM2_ALG_SHA256
        info.nvPublic.attributes =
            (TPMA_NV(TPM2_NT_COUNTER) << TPMA_NV_TPM2_NT_SHIFT) | TPMA_NV_AUTHREAD | TPMA_NV_AUTHWRITE | TPMA_NV_NO_DA
        info.nvPublic.dataSize = 8
        var handle = ESYS_TR(ESYS_TR_NONE)
        let rc = Esys_NV_DefineSpace(
            esys,
            ESYS_TR(ESYS_TR_RH_OWNER),
            ESYS_TR(ESYS_TR_PASSWORD),
            ESYS_TR(ESYS_TR_NONE),
            ESYS_TR(ESYS_TR_NONE),
            &auth,
            &info,
            &handle
        )
        if TPMResponse(rc) == .nvDefined { throw .nvIndexInUse(index: counter.index) }
        try check(rc, "NV_DefineSpace")
        defer { close(handle) }
        try setAuth(handle, authValue)
        try increment(handle)
    }

    /// Increments `counter` and returns its new value.
    public func increment(_ counter: TPMNVCounter, authValue: SecretBytes) throws(TPMError) -> UInt64 {
        let handle = try open(counter, authValue: authValue)
        defer { close(handle) }
        try increment(handle)
        return try read(handle)
    }

    /// The current value of `counter`.
    public func read(_ counter: TPMNVCounter, authValue: SecretBytes) throws(TPMError) -> UInt64 {
        let handle = try open(counter, authValue: authValue)
        defer { close(handle) }
        return try read(handle)
    }

    /// Undefines `counter` (owner authorization); succeeds if it is not defined.
    public func deleteCounter(_ counter: TPMNVCounter) throws(TPMError) {
        let handle: ESYS_TR
        do {
            handle = try open(counter, authValue: nil)
        } catch .nvIndexMissing {
            return
        }
        let rc = Esys_NV_UndefineSpace(
            esys,
            ESYS_TR(ESYS_TR_RH_OWNER),
            handle,
            ESYS_TR(ESYS_TR_PASSWORD),
            ESYS_TR(ESYS_TR_NONE),
            ESYS_TR(ESYS_TR_NONE)
        )
        if rc != 0 { close(handle) }  // on success ESAPI has already released the handle
        try check(rc, "NV_UndefineSpace")
    }

    private func open(_ counter: TPMNVCounter, authValue: SecretBytes?) throws(TPMError) -> ESYS_TR {
        var handle = ESYS_TR(ESYS_TR_NONE)
        let rc = Esys_TR_FromTPMPublic(
            esys,
            counter.index,
            ESYS_TR(ESYS_TR_NONE),
            ESYS_TR(ESYS_TR_NONE),
            ESYS_TR(ESYS_TR_NONE),
            &handle
        )
        if TPMResponse(rc) == .handle { throw .nvIndexMissing(index: counter.index) }
        try check(rc, "TR_FromTPMPublic")
        if let authValue {
            do {
                try setAuth(handle, authValue)
            } catch {
                close(handle)
                throw error
            }
        }
        return handle
    }

    /// NV_Increment on an open counter, authorized by its own auth value.
    private func increment(_ handle: ESYS_TR) throws(TPMError) {
        try check(
            Esys_NV_Increment(
                esys,
                handle,
                handle,
                ESYS_TR(ESYS_TR_PASSWORD),
                ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE)
            ),
            "NV_Increment"
        )
    }

    private func read(_ handle: ESYS_TR) throws(TPMError) -> UInt64 {
        var data: UnsafeMutablePointer<TPM2B_MAX_NV_BUFFER>?
        defer { Esys_Free(data) }
        try check(
            Esys_NV_Read(
                esys,
                handle,
                handle,
                ESYS_TR(ESYS_TR_PASSWORD),
                ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE),
                8,
                0,
                &data
            ),
            "NV_Read"
        )
        guard let data, data.pointee.size == 8 else { throw .malformed(what: "NV counter value") }
        // The TPM returns the counter big-endian.
        return withUnsafeBytes(of: &data.pointee.buffer) { raw in
            raw.prefix(8).reduce(UInt64(0)) { ($0 << 8) | UInt64($1) }
        }
    }

    private func close(_ handle: ESYS_TR) {
        var handle = handle
        _ = Esys_TR_Close(esys, &handle)
    }
}
