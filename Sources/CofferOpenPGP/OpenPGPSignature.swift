import CRNP

/// One signature found on a message or given detached, and what checking it showed.
public struct OpenPGPSignature: Sendable, Hashable, CustomStringConvertible {
    /// What checking a signature showed.
    public enum Status: Sendable, Hashable, CustomStringConvertible {
        /// The signature is good and was made by ``OpenPGPSignature/signerFingerprint`` over exactly these bytes.
        case valid
        /// The signature was good but has expired.
        case expired
        /// The signature does not match the data or the key: the message or the signature was changed.
        case invalid
        /// None of the given keys made it: it cannot be checked.
        case unknownKey
        /// The signature is of a kind or algorithm RNP cannot check.
        case unsupported
        /// The key that made it has been revoked: compromised or with no reason given (then no signature it ever
        /// made is trusted), or retired or superseded before the signature says it was made.
        case revoked

        /// A word for people.
        public var description: String {
            switch self {
            case .valid: "valid"
            case .expired: "expired"
            case .invalid: "invalid"
            case .unknownKey: "unknown key"
            case .unsupported: "unsupported"
            case .revoked: "revoked"
            }
        }

        init(_ code: rnp_result_t) {
            switch code {
            case RNPCode.success: self = .valid
            case RNPCode.signatureExpired: self = .expired
            case RNPCode.keyNotFound: self = .unknownKey
            case RNPCode.signatureUnknown, RNPCode.notSupported: self = .unsupported
            default: self = .invalid
            }
        }
    }

    /// What checking the signature showed.
    public let status: Status
    /// The fingerprint of the signer's primary key when it is among the given keys; otherwise the issuer fingerprint
    /// the signature names, if it names one (a subkey's when a subkey signed). A claim until ``status`` is
    /// ``Status/valid``.
    public let signerFingerprint: String?
    /// The key id (16 hex digits) of the key that made the signature (a subkey's id when a subkey signed).
    public let keyID: String?
    /// When the signature says it was made, in seconds since 1970.
    public let created: UInt32

    /// Whether the signature is valid.
    public var isValid: Bool { status == .valid }

    /// The status and signer.
    public var description: String { "\(status) signature by \(signerFingerprint ?? keyID ?? "an unnamed key")" }

    /// Reads the verification results of an executed verify operation in `session`.
    static func all(
        of operation: rnp_op_verify_t,
        in session: borrowing RNPSession
    ) throws(OpenPGPError) -> [OpenPGPSignature] {
        var count = 0
        let code = rnp_op_verify_get_signature_count(operation, &count)
        guard code == RNPCode.success else { throw OpenPGPError.failed("signature check", code) }
        var signatures: [OpenPGPSignature] = []
        for index in 0..<count {
            var signature: rnp_op_verify_signature_t?
            let code = rnp_op_verify_get_signature_at(operation, index, &signature)
            guard code == RNPCode.success, let signature else { throw OpenPGPError.failed("signature check", code) }
            signatures.append(try OpenPGPSignature(signature, in: session))
        }
        return signatures
    }

    private init(_ signature: rnp_op_verify_signature_t, in session: borrowing RNPSession) throws(OpenPGPError) {
        var status = Status(rnp_op_verify_signature_get_status(signature))
        var created: UInt32 = 0
        _ = rnp_op_verify_signature_get_times(signature, &created, nil)
        self.created = created
        var keyID: String?
        var issuer: String?
        var handle: rnp_signature_handle_t?
        if rnp_op_verify_signature_get_handle(signature, &handle) == RNPCode.success, let handle {
            defer { rnp_signature_handle_destroy(handle) }
            var value: UnsafeMutablePointer<CChar>?
            if rnp_signature_get_keyid(handle, &value) == RNPCode.success, let value {
                keyID = RNPBuffer.takeString(value)
            }
            value = nil
            if rnp_signature_get_key_fprint(handle, &value) == RNPCode.success, let value {
                issuer = RNPBuffer.takeString(value)
            }
        }
        self.keyID = keyID
        var key: rnp_key_handle_t?
        if rnp_op_verify_signature_get_key(signature, &key) == RNPCode.success, let key {
            let signer = RNPKey(handle: key)
            let isPrimary = try signer.flag(rnp_key_is_primary)
            let primary =
                isPrimary ? signer : try session.locate(fingerprint: signer.string(rnp_key_get_primary_fprint))
            signerFingerprint = try primary.fingerprint()
            // RNP believes a key revoked with no reason until the revocation's date, and reports a signature made
            // after a revocation as merely invalid. Only retiring or superseding a key leaves the signatures made
            // before it good; any other revocation (compromised, no reason, a reason this code does not know) means
            // the key may be in someone else's hands, whenever the signature says it was made.
            for key in isPrimary ? [signer] : [signer, primary] where try key.flag(rnp_key_is_revoked) {
                let retired = try key.flag(rnp_key_is_retired)
                let superseded = try key.flag(rnp_key_is_superseded)
                if !(retired || superseded) || status != .valid { status = .revoked }
            }
        } else {
            signerFingerprint = issuer
        }
        self.status = status
    }
}
