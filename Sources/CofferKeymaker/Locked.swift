import CofferCrypto

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A value sealed under a MainKey subkey of its own label: tokens, account details, settings.
///
/// The value is JSON-encoded and sealed in an envelope whose context is the label, under
/// `MainKey.subkey("locked.<label>")`; a `Locked` value moved to another label does not open.
public struct Locked<T: Codable & Sendable>: Sendable {
    /// The envelope bytes (safe to store anywhere).
    public let encrypted: [UInt8]
    /// What the value is, for example `settings.autolock`.
    public let label: String

    /// Seals `value` under `key`.
    public init(clearValue value: T, with key: MainKey, label: String) throws(KeymakerError) {
        var json: [UInt8]
        do { json = Array(try JSONEncoder().encode(value)) } catch { throw .corrupt("value to seal") }
        defer { for index in json.indices { json[index] = 0 } }
        do {
            encrypted = try Envelope.seal(json, with: key.subkey("locked.\(label)"), context: Self.context(label))
        } catch let error as KeymakerError {
            throw error
        } catch {
            throw .crypto(error as? CofferCryptoError ?? .primitiveFailure("seal"))
        }
        self.label = label
    }

    /// Wraps stored envelope bytes.
    public init(encrypted: [UInt8], label: String) {
        self.encrypted = encrypted
        self.label = label
    }

    /// Opens and decodes the value.
    ///
    /// - Throws: ``KeymakerError/locked`` if the key was wiped, ``KeymakerError/crypto(_:)`` if the bytes were
    ///   changed or belong elsewhere, ``KeymakerError/corrupt(_:)`` if they do not decode.
    public func unlock(with key: MainKey) throws(KeymakerError) -> T {
        var json: [UInt8]
        do {
            json = try Envelope.open(encrypted, with: key.subkey("locked.\(label)"), context: Self.context(label))
        } catch let error as KeymakerError {
            throw error
        } catch {
            throw .crypto(error as? CofferCryptoError ?? .authenticationFailed)
        }
        defer { for index in json.indices { json[index] = 0 } }
        do { return try JSONDecoder().decode(T.self, from: Data(json)) } catch { throw .corrupt("sealed \(label)") }
    }

    private static func context(_ label: String) -> EnvelopeContext { ["coffer.locked.v1", label] }
}

extension Locked: CustomStringConvertible {
    /// Only the label and size.
    public var description: String { "Locked<\(T.self)>(\(label), \(encrypted.count) bytes)" }
}
