import CTSS2
import CofferCrypto

/// A secret sealed by a TPM: its public and private areas in the TPM's own encoding (TPM2B_PUBLIC and
/// TPM2B_PRIVATE, marshaled by tpm2-tss). The private area is encrypted by the TPM's storage key, which never leaves
/// that TPM, so the pair opens only on the TPM that made it and only with the auth value.
public struct TPMSealedObject: Sendable, Equatable {
    /// The marshaled TPM2B_PUBLIC (the object's attributes and name; not secret).
    public var publicArea: [UInt8]
    /// The marshaled TPM2B_PRIVATE (wrapped by the TPM's storage key).
    public var privateArea: [UInt8]

    /// Wraps the two areas as stored.
    public init(publicArea: [UInt8], privateArea: [UInt8]) {
        self.publicArea = publicArea
        self.privateArea = privateArea
    }
}

extension TPMContext {
    /// The largest secret ``seal(_:authValue:)`` accepts, in bytes.
    public static let maximumSecretBytes = 64
    /// The length of an auth value, in bytes (a SHA-256-sized KDF output).
    public static let authValueBytes = 32

    /// Seals `secret` into a KEYEDHASH sealed-data object under the owner hierarchy's storage key, opened only by
    /// `authValue` and subject to the TPM's dictionary-attack protection (no `noDA`): every wrong auth value counts
    /// toward the TPM's lockout.
    ///
    /// The command runs in a session salted to the storage key with parameter encryption, so neither the secret
    /// nor the auth value crosses the bus in clear.
    /// - Parameter dictionaryAttackProtected: `false` sets noDA, for an auth value that is not a guessable secret
    ///   (a device-bound key): its unseal then also works while the TPM is in lockout.
    /// - Throws: ``TPMError/invalidArgument(reason:)`` for a secret over 64 bytes or an auth value that is not 32.
    public func seal(
        _ secret: SecretBytes,
        authValue: SecretBytes,
        dictionaryAttackProtected: Bool = true
    ) throws(TPMError) -> TPMSealedObject {
        guard secret.count > 0, secret.count <= Self.maximumSecretBytes else {
            throw .invalidArgument(reason: "a sealed secret has 1 to \(Self.maximumSecretBytes) bytes")
        }
        guard authValue.count == Self.authValueBytes else {
            throw .invalidArgument(reason: "an auth value has \(Self.authValueBytes) bytes")
        }
        var sensitive = TPM2B_SENSITIVE_CREATE()
        defer { wipe(&sensitive) }
        try fill(
            &sensitive.sensitive.userAuth.buffer,
            size: &sensitive.sensitive.userAuth.size,
            from: authValue,
            what: "auth value"
        )
        try fill(&sensitive.sensitive.data.buffer, size: &sensitive.sensitive.data.size, from: secret, what: "secret")

        var template = TPM2B_PUBLIC()
        template.publicArea.type = TPM2_ALG_KEYEDHASH
        template.publicArea.nameAlg = TPM2_ALG_SHA256
        // A sealed-data object: no sign or decrypt; the TPM keeps it bound to this TPM and this parent; the auth
        // value opens it; no TPMA_OBJECT_NODA, so failures count toward the lockout.
        template.publicArea.objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_USERWITHAUTH
        if !dictionaryAttackProtected { template.publicArea.objectAttributes |= TPMA_OBJECT_NODA }
        template.publicArea.parameters.keyedHashDetail.scheme.scheme = TPM2_ALG_NULL
        var outsideInfo = TPM2B_DATA()
        var creationPCR = TPML_PCR_SELECTION()

        let primary = try createPrimary()
        defer { flush(primary) }
        let session = try startSession(salt: primary)
        defer { flush(session) }
        var outPrivate: UnsafeMutablePointer<TPM2B_PRIVATE>?
        var outPublic: UnsafeMutablePointer<TPM2B_PUBLIC>?
        defer {
            Esys_Free(outPrivate)
            Esys_Free(outPublic)
        }
        try check(
            Esys_Create(
                esys,
                primary,
                session,
                ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE),
                &sensitive,
                &template,
                &outsideInfo,
                &creationPCR,
                &outPrivate,
                &outPublic,
                nil,
                nil,
                nil
            ),
            "Create"
        )
        guard let outPrivate, let outPublic else {
            throw .failed(operation: "Create", code: 0, detail: "no object returned")
        }
        return TPMSealedObject(
            publicArea: try marshal(outPublic, Tss2_MU_TPM2B_PUBLIC_Marshal),
            privateArea: try marshal(outPrivate, Tss2_MU_TPM2B_PRIVATE_Marshal)
        )
    }

    /// Loads `object` under this TPM's storage key and unseals it with `authValue`.
    ///
    /// - Throws: ``TPMError/authorizationFailed`` for a wrong auth value (counted by the TPM),
    ///   ``TPMError/lockedOut`` while the TPM is in lockout (even for the right one), ``TPMError/foreignObject`` when
    ///   the object was made by another TPM, ``TPMError/malformed(what:)`` for bytes that do not parse.
    public func unseal(_ object: TPMSealedObject, authValue: SecretBytes) throws(TPMError) -> SecretBytes {
        guard authValue.count == Self.authValueBytes else {
            throw .invalidArgument(reason: "an auth value has \(Self.authValueBytes) bytes")
        }
        var inPublic = TPM2B_PUBLIC()
        var inPrivate = TPM2B_PRIVATE()
        try unmarshal(object.publicArea, into: &inPublic, Tss2_MU_TPM2B_PUBLIC_Unmarshal, what: "sealed public area")
        try unmarshal(
            object.privateArea,
            into: &inPrivate,
            Tss2_MU_TPM2B_PRIVATE_Unmarshal,
            what: "sealed private area"
        )
        let primary = try createPrimary()
        defer { flush(primary) }
        let session = try startSession(salt: primary)
        defer { flush(session) }
        var loaded = ESYS_TR(ESYS_TR_NONE)
        try check(
            Esys_Load(
                esys,
                primary,
                session,
                ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE),
                &inPrivate,
                &inPublic,
                &loaded
            ),
            "Load"
        )
        defer { flush(loaded) }
        try setAuth(loaded, authValue)
        var out: UnsafeMutablePointer<TPM2B_SENSITIVE_DATA>?
        defer {
            if let out { wipe(&out.pointee) }
            Esys_Free(out)
        }
        try check(
            Esys_Unseal(esys, loaded, session, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &out),
            "Unseal"
        )
        guard let out, Int(out.pointee.size) <= MemoryLayout.size(ofValue: out.pointee.buffer) else {
            throw .failed(operation: "Unseal", code: 0, detail: "no data returned")
        }
        let count = Int(out.pointee.size)
        return withUnsafeBytes(of: &out.pointee.buffer) { raw in SecretBytes(copying: raw.prefix(count)) }
    }

    /// The owner hierarchy's storage key, recreated from the TCG's standard ECC P-256 SRK template: the same TPM
    /// seed gives the same key every time, so nothing about it is stored.
    func createPrimary() throws(TPMError) -> ESYS_TR {
        var sensitive = TPM2B_SENSITIVE_CREATE()
        var template = TPM2B_PUBLIC()
        template.publicArea.type = TPM2_ALG_ECC
        template.publicArea.nameAlg = TPM2_ALG_SHA256
        template.publicArea.objectAttributes =
            TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN
            | TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA | TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT
        template.publicArea.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_AES
        template.publicArea.parameters.eccDetail.symmetric.keyBits.aes = 128
        template.publicArea.parameters.eccDetail.symmetric.mode.aes = TPM2_ALG_CFB
        template.publicArea.parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL
        template.publicArea.parameters.eccDetail.curveID = TPM2_ECC_NIST_P256
        template.publicArea.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL
        template.publicArea.unique.ecc.x.size = 32
        template.publicArea.unique.ecc.y.size = 32
        var outsideInfo = TPM2B_DATA()
        var creationPCR = TPML_PCR_SELECTION()
        var handle = ESYS_TR(ESYS_TR_NONE)
        try check(
            Esys_CreatePrimary(
                esys,
                ESYS_TR(ESYS_TR_RH_OWNER),
                ESYS_TR(ESYS_TR_PASSWORD),
                ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE),
                &sensitive,
                &template,
                &outsideInfo,
                &creationPCR,
                &handle,
                nil,
                nil,
                nil,
                nil
            ),
            "CreatePrimary"
        )
        return handle
    }

    /// An HMAC session salted to `salt` (the storage key) with AES-128-CFB parameter encryption both ways.
    func startSession(salt: ESYS_TR) throws(TPMError) -> ESYS_TR {
        var symmetric = TPMT_SYM_DEF()
        symmetric.algorithm = TPM2_ALG_AES
        symmetric.keyBits.aes = 128
        symmetric.mode.aes = TPM2_ALG_CFB
        var session = ESYS_TR(ESYS_TR_NONE)
        try check(
            Esys_StartAuthSession(
                esys,
                salt,
                ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE),
                ESYS_TR(ESYS_TR_NONE),
                nil,
                TPM2_SE_HMAC,
                &symmetric,
                TPM2_ALG_SHA256,
                &session
            ),
            "StartAuthSession"
        )
        let attributes = TPMA_SESSION_DECRYPT | TPMA_SESSION_ENCRYPT | TPMA_SESSION_CONTINUESESSION
        do {
            try check(Esys_TRSess_SetAttributes(esys, session, attributes, 0xFF), "TRSess_SetAttributes")
        } catch {
            flush(session)
            throw error
        }
        return session
    }

    private func marshal<Value>(
        _ value: UnsafeMutablePointer<Value>,
        _ function: (UnsafePointer<Value>?, UnsafeMutablePointer<UInt8>?, Int, UnsafeMutablePointer<Int>?) -> TSS2_RC
    ) throws(TPMError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: MemoryLayout<Value>.size + 2)
        var offset = 0
        let rc = bytes.withUnsafeMutableBufferPointer { function(value, $0.baseAddress, $0.count, &offset) }
        try check(rc, "marshal")
        return Array(bytes.prefix(offset))
    }

    private func unmarshal<Value>(
        _ bytes: [UInt8],
        into value: inout Value,
        _ function: (UnsafePointer<UInt8>?, Int, UnsafeMutablePointer<Int>?, UnsafeMutablePointer<Value>?) -> TSS2_RC,
        what: String
    ) throws(TPMError) {
        var offset = 0
        let rc = bytes.withUnsafeBufferPointer { function($0.baseAddress, $0.count, &offset, &value) }
        guard rc == 0, offset == bytes.count else { throw .malformed(what: what) }
    }
}
