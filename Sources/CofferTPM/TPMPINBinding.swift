import CofferCrypto
import Crypto

/// Binds a PIN key-encryption key to this machine's TPM: a random 32-byte share sealed in the TPM under an auth
/// value derived from the PIN's KEK, and a monotonic NV counter for the attempt record.
///
/// The key that wraps the MainKey is then `HKDF-SHA256(ikm: pin KEK, salt: share, info: "coffer.pin-tpm-kek.v1")`:
/// without this TPM, or past its dictionary-attack lockout, no PIN guess can be checked, on any copy of the files.
/// The PIN KEK is the existing ``PINKeyDerivation`` output (scrypt, then HKDF with the device pepper), so the TPM
/// adds to the scrypt cost and never replaces it.
public struct TPMPINBinding: Sendable, Equatable {
    /// The share, sealed by the TPM (TPM sealed object v1).
    public let sealedShare: TPMSealedObject
    /// The attempt counter the attempt record follows.
    public let counter: TPMNVCounter

    /// The HKDF info of the TPM auth value.
    static let authInfo = Array("coffer.pin-tpm-auth.v1".utf8)
    /// The HKDF info of the bound KEK.
    static let kekInfo = Array("coffer.pin-tpm-kek.v1".utf8)
    /// The HKDF info of the counter's auth value.
    static let counterInfo = Array("coffer.pin-tpm-counter.v1".utf8)

    /// Wraps the stored parts.
    public init(sealedShare: TPMSealedObject, counter: TPMNVCounter) {
        self.sealedShare = sealedShare
        self.counter = counter
    }

    /// Creates a binding on the TPM of `context` for `pinKEK`: seals a fresh share and defines an NV counter.
    ///
    /// - Parameters:
    ///   - pinKEK: the PIN's KEK (``PINKeyDerivation/deriveKey(pin:salt:parameters:devicePepper:allowInsecureParameters:)``).
    ///   - devicePepper: the device pepper, the counter's auth value source (the counter is not PIN-protected: it
    ///     is read before the PIN is tried).
    /// - Returns: the binding to store and the bound KEK that wraps the MainKey.
    public static func create(
        in context: TPMContext,
        pinKEK: SymmetricKey,
        devicePepper: SecretBytes
    ) throws(TPMError) -> (binding: TPMPINBinding, boundKEK: SymmetricKey) {
        let share = SecretBytes(randomCount: 32)
        let sealed = try context.seal(share, authValue: authValue(pinKEK: pinKEK))
        let counter = try context.defineCounter(authValue: counterAuth(devicePepper: devicePepper))
        return (TPMPINBinding(sealedShare: sealed, counter: counter), boundKEK(pinKEK: pinKEK, share: share))
    }

    /// Creates a binding for `pinKEK` that keeps an existing `counter` (a change of PIN): seals a fresh share only,
    /// so an attempt record written for the old binding stays valid for the new one.
    public static func create(
        in context: TPMContext,
        pinKEK: SymmetricKey,
        keeping counter: TPMNVCounter
    ) throws(TPMError) -> (binding: TPMPINBinding, boundKEK: SymmetricKey) {
        let share = SecretBytes(randomCount: 32)
        let sealed = try context.seal(share, authValue: authValue(pinKEK: pinKEK))
        return (TPMPINBinding(sealedShare: sealed, counter: counter), boundKEK(pinKEK: pinKEK, share: share))
    }

    /// Unseals the share with the auth value from `pinKEK` and returns the bound KEK.
    ///
    /// - Throws: ``TPMError/authorizationFailed`` for a wrong PIN (counted by the TPM), ``TPMError/lockedOut``,
    ///   ``TPMError/foreignObject`` on another TPM.
    public func boundKEK(in context: TPMContext, pinKEK: SymmetricKey) throws(TPMError) -> SymmetricKey {
        let share = try context.unseal(sealedShare, authValue: Self.authValue(pinKEK: pinKEK))
        defer { share.wipe() }
        return Self.boundKEK(pinKEK: pinKEK, share: share)
    }

    /// Checks that the attempt record's counter value `recorded` is the TPM's current one, then advances the
    /// counter and returns the value the record must hold from now on. Run before each PIN attempt, under the
    /// attempt lock, and write the returned value into the record with the attempt.
    ///
    /// - Throws: ``TPMError/counterMismatch`` when the record is older (restored) or newer than the TPM: the caller
    ///   treats it as exhausted attempts.
    public func advanceAttemptCounter(
        in context: TPMContext,
        recorded: UInt64,
        devicePepper: SecretBytes
    ) throws(TPMError) -> UInt64 {
        let auth = Self.counterAuth(devicePepper: devicePepper)
        guard try context.read(counter, authValue: auth) == recorded else { throw .counterMismatch }
        return try context.increment(counter, authValue: auth)
    }

    /// Advances the counter without a check and returns its new value: the second half of a write-ahead attempt
    /// (the record already holds the value this returns).
    public func incrementAttemptCounter(in context: TPMContext, devicePepper: SecretBytes) throws(TPMError) -> UInt64 {
        try context.increment(counter, authValue: Self.counterAuth(devicePepper: devicePepper))
    }

    /// The counter's current value (for a new attempt record).
    public func attemptCounterValue(in context: TPMContext, devicePepper: SecretBytes) throws(TPMError) -> UInt64 {
        try context.read(counter, authValue: Self.counterAuth(devicePepper: devicePepper))
    }

    /// Deletes the counter (logout or a change of strategy); the sealed share is only a file.
    public func delete(in context: TPMContext) throws(TPMError) { try context.deleteCounter(counter) }

    static func authValue(pinKEK: SymmetricKey) -> SecretBytes {
        derive(pinKEK, info: authInfo)
    }

    static func counterAuth(devicePepper: SecretBytes) -> SecretBytes {
        derive(devicePepper.withUnsafeBytes { SymmetricKey(data: $0) }, info: counterInfo)
    }

    static func boundKEK(pinKEK: SymmetricKey, share: SecretBytes) -> SymmetricKey {
        share.withUnsafeBytes { salt in
            HKDF<SHA256>.deriveKey(inputKeyMaterial: pinKEK, salt: salt, info: kekInfo, outputByteCount: 32)
        }
    }

    private static func derive(_ key: SymmetricKey, info: [UInt8]) -> SecretBytes {
        let derived = HKDF<SHA256>.deriveKey(inputKeyMaterial: key, info: info, outputByteCount: 32)
        return derived.withUnsafeBytes { SecretBytes(copying: $0) }
    }
}

extension TPMPINBinding {
    /// The record's magic, "CFTB".
    static let magic: [UInt8] = Array("CFTB".utf8)

    /// The stored form, TPM PIN binding v1 (docs/FORMAT.md): `"CFTB" ‖ 0x01 ‖ NV index (u32) ‖ TPM sealed object v1`.
    public var serialized: [UInt8] {
        let index = counter.index
        return Self.magic + [1, UInt8(index >> 24), UInt8(index >> 16 & 0xFF), UInt8(index >> 8 & 0xFF)]
            + [UInt8(index & 0xFF)] + sealedShare.serialized
    }

    /// Reads a stored TPM PIN binding v1.
    ///
    /// - Throws: ``TPMError/malformed(what:)`` for another magic or version, an index outside the owner range or a
    ///   damaged sealed object.
    public init(serialized bytes: [UInt8]) throws(TPMError) {
        guard bytes.count > 9, Array(bytes.prefix(4)) == Self.magic, bytes[4] == 1 else {
            throw .malformed(what: "TPM PIN binding record")
        }
        let index = bytes[5..<9].reduce(UInt32(0)) { ($0 << 8) | UInt32($1) }
        guard let counter = try? TPMNVCounter(index: index) else { throw .malformed(what: "TPM PIN binding record") }
        self.init(sealedShare: try TPMSealedObject(serialized: Array(bytes[9...])), counter: counter)
    }
}
