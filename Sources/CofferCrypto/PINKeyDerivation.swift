import Crypto
import CryptoExtras

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// scrypt cost parameters, stored beside every PIN-derived key so they can be raised later without locking anyone
/// out.
public struct ScryptParameters: Sendable, Hashable, CustomStringConvertible {
    /// log2 of the CPU/memory cost N.
    public let logN: UInt8
    /// Block size r.
    public let r: UInt32
    /// Parallelism p.
    public let p: UInt32

    /// The default for new PINs: N = 2^18, r = 8, p = 1 (256 MiB), about half a second on the 2-core machines this
    /// was tuned on (`coffer-bench unlock`). Eight times Proton's N = 2^15.
    public static let standard = ScryptParameters(unchecked: 18, r: 8, p: 1)

    /// The weakest parameters accepted for a PIN that protects real data: N = 2^15, r = 8, p = 1.
    public static let minimum = ScryptParameters(unchecked: 15, r: 8, p: 1)

    /// Cheap parameters so that tests run quickly.
    ///
    /// - Warning: Tests only. Never a default; ``PINKeyDerivation`` refuses them unless the caller passes
    ///   `allowInsecureParameters: true`.
    package static let insecureForTestingOnly = ScryptParameters(unchecked: 10, r: 8, p: 1)

    /// Validated parameters: logN 10...22, r 1...32, p 1...16.
    public init(logN: UInt8, r: UInt32, p: UInt32) throws(CofferCryptoError) {
        guard (10...22).contains(logN) else { throw .invalidKDFParameters("log2 N must be between 10 and 22") }
        guard (1...32).contains(r) else { throw .invalidKDFParameters("r must be between 1 and 32") }
        guard (1...16).contains(p) else { throw .invalidKDFParameters("p must be between 1 and 16") }
        self.init(unchecked: logN, r: r, p: p)
    }

    private init(unchecked logN: UInt8, r: UInt32, p: UInt32) {
        self.logN = logN
        self.r = r
        self.p = p
    }

    /// Whether these parameters are at least as costly as ``minimum``.
    public var meetsMinimum: Bool { memoryBytes >= Self.minimum.memoryBytes && logN >= Self.minimum.logN }

    /// Approximate memory use: 128 · N · r · p bytes.
    public var memoryBytes: Int { 128 * (1 << Int(logN)) * Int(r) * Int(p) }

    /// For example `scrypt(N=2^17, r=8, p=1)`.
    public var description: String { "scrypt(N=2^\(logN), r=\(r), p=\(p))" }
}

/// Derives a key-encryption key from a PIN or password.
///
/// `KEK = HKDF-SHA256(ikm: scrypt(PIN, salt, N, r, p, 32), salt: device pepper, info: "coffer.pin-kek.v1")`.
/// The device pepper comes from the device secret, which lives outside the data folders, so an offline guesser
/// needs the device secret as well as the wrapped key.
public enum PINKeyDerivation {
    /// Derives the 32-byte KEK.
    ///
    /// - Parameters:
    ///   - pin: The PIN's UTF-8 bytes.
    ///   - salt: 16 or more random bytes stored beside the result.
    ///   - parameters: scrypt cost.
    ///   - devicePepper: A secret bound to this device.
    ///   - allowInsecureParameters: Accept parameters below ``ScryptParameters/minimum`` (tests only).
    /// - Throws: ``CofferCryptoError/invalidKDFParameters(_:)`` for weak parameters or a short salt.
    /// - Warning: swift-crypto's scrypt returns its output through an ordinary buffer it does not zero; the copy is
    ///   short-lived and is immediately fed through HKDF.
    public static func deriveKey(
        pin: SecretBytes,
        salt: [UInt8],
        parameters: ScryptParameters,
        devicePepper: SecretBytes,
        allowInsecureParameters: Bool = false
    ) throws(CofferCryptoError) -> SymmetricKey {
        guard salt.count >= 16 else { throw .invalidKDFParameters("the salt must be at least 16 bytes") }
        guard parameters.meetsMinimum || allowInsecureParameters else {
            throw .invalidKDFParameters("\(parameters) is below the minimum \(ScryptParameters.minimum)")
        }
        let stretched: SymmetricKey
        do {
            stretched = try pin.withUnsafeBytes { password in
                try KDF.Scrypt.deriveKey(
                    from: password,
                    salt: salt,
                    outputByteCount: 32,
                    rounds: 1 << Int(parameters.logN),
                    blockSize: Int(parameters.r),
                    parallelism: Int(parameters.p)
                )
            }
        } catch {
            throw .primitiveFailure("scrypt")
        }
        return devicePepper.withUnsafeBytes { pepper in
            HKDF<SHA256>.deriveKey(
                inputKeyMaterial: stretched,
                salt: pepper,
                info: Array("coffer.pin-kek.v1".utf8),
                outputByteCount: 32
            )
        }
    }
}
