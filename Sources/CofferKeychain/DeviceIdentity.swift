import CofferCrypto
import Crypto

/// What binds data to this machine: a random 256-bit device secret, kept outside the data and keychain folders
/// (XDG state), and the system's machine id.
///
/// Keychain item keys and the PIN pepper are HKDF-SHA256 outputs of the device secret; `…ThisDeviceOnly` item keys
/// also mix in the machine id. Losing the device secret makes every keychain item unreadable (a device mismatch),
/// which is the point: a backup of the data and keychain folders alone opens nothing.
public struct DeviceIdentity: Sendable {
    /// `"CFDS"`, the device secret file's magic.
    static let magic: [UInt8] = [0x43, 0x46, 0x44, 0x53]
    private let secret: SecretBytes
    /// The machine id mixed into `…ThisDeviceOnly` keys (from `/etc/machine-id`); not secret.
    public let machineID: [UInt8]

    /// Uses a given secret and machine id (tests, or a platform that provides its own).
    public init(secret: SecretBytes, machineID: [UInt8]) throws(KeychainError) {
        guard secret.count == 32 else { throw .corruptDeviceSecret }
        self.secret = secret
        self.machineID = machineID
    }

    /// Loads the device secret from `secretPath`, creating it (mode 0600, in a 0700 folder) on first use, and reads
    /// the machine id.
    ///
    /// - Parameters:
    ///   - secretPath: The device secret file, outside the data and keychain folders.
    ///   - machineIDPaths: Files to take the machine id from, first readable wins.
    public static func load(
        secretPath: String,
        machineIDPaths: [String] = ["/etc/machine-id", "/var/lib/dbus/machine-id"]
    ) throws(KeychainError) -> DeviceIdentity {
        let secret: SecretBytes
        let existing: [UInt8]?
        do { existing = try SecureFile.read(secretPath, maxBytes: 64) } catch { throw .storage(error) }
        if let bytes = existing {
            guard bytes.count == 37, Array(bytes[0..<4]) == magic, bytes[4] == 1 else { throw .corruptDeviceSecret }
            secret = SecretBytes(copying: bytes[5...])
        } else {
            let folder = String(secretPath[..<(secretPath.lastIndex(of: "/") ?? secretPath.startIndex)])
            secret = SecretBytes(randomCount: 32)
            var file = magic + [1]
            secret.withUnsafeBytes { file += $0 }
            defer { for index in file.indices { file[index] = 0 } }
            do {
                if !folder.isEmpty { try SecureFile.makePrivateDirectory(folder) }
                try SecureFile.writeAtomically(file, to: secretPath)
            } catch {
                throw .storage(error)
            }
        }
        return try DeviceIdentity(secret: secret, machineID: readMachineID(machineIDPaths))
    }

    /// The first non-empty machine id among `paths`, trimmed; empty if none is readable (then only the device
    /// secret binds `…ThisDeviceOnly` items).
    static func readMachineID(_ paths: [String]) -> [UInt8] {
        for path in paths {
            if let bytes = try? SecureFile.read(path, maxBytes: 256) {
                let trimmed = bytes.filter { $0 > 0x20 }
                if !trimmed.isEmpty { return trimmed }
            }
        }
        return []
    }

    /// The key that seals keychain items of the given binding.
    func itemKey(thisDeviceOnly: Bool) -> EnvelopeKey {
        let info =
            thisDeviceOnly ? Array("item-key.this-device-only".utf8) + machineID : Array("item-key.portable".utf8)
        return try! EnvelopeKey(derive(info: info))
    }

    /// A 32-byte secret for `label`, bound to this device and machine (for example the PIN KDF pepper).
    public func pepper(label: String) -> SecretBytes {
        let key = derive(info: Array("pepper.".utf8) + Array(label.utf8) + [0] + machineID)
        return key.withUnsafeBytes { SecretBytes(copying: $0) }
    }

    private func derive(info: [UInt8]) -> SymmetricKey {
        secret.withUnsafeBytes { raw in
            HKDF<SHA256>.deriveKey(
                inputKeyMaterial: SymmetricKey(data: raw),
                salt: Array("coffer.device.v1".utf8),
                info: info,
                outputByteCount: 32
            )
        }
    }
}

extension DeviceIdentity: CustomStringConvertible {
    /// Never shows the secret.
    public var description: String { "DeviceIdentity(<redacted>)" }
}
