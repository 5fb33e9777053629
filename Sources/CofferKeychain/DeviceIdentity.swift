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

    /// The files the machine id is read from by default, first readable wins.
    public static let defaultMachineIDPaths = ["/etc/machine-id", "/var/lib/dbus/machine-id"]

    /// Loads the device secret from `secretPath` and reads the machine id. Never creates anything: every command
    /// but first set-up uses this.
    ///
    /// - Parameters:
    ///   - secretPath: The device secret file, outside the data and keychain folders.
    ///   - machineIDPaths: Files to take the machine id from, first readable wins.
    /// - Throws: ``KeychainError/deviceSecretMissing`` if the file does not exist,
    ///   ``KeychainError/corruptDeviceSecret``, or ``KeychainError/storage(_:)`` (with
    ///   `CofferCryptoError.notPrivate` when the file or its folder is open to other users or owned by another user:
    ///   Coffer refuses such a secret rather than repairing it, since it may already have been copied).
    public static func load(
        secretPath: String,
        machineIDPaths: [String] = defaultMachineIDPaths
    ) throws(KeychainError) -> DeviceIdentity {
        guard let secret = try readSecret(secretPath) else { throw .deviceSecretMissing }
        return try DeviceIdentity(secret: secret, machineID: readMachineID(machineIDPaths))
    }

    /// First set-up (`coffer init`): loads the device secret, or creates it (mode 0600, in a 0700 folder) if it does
    /// not exist and `keychainFolder` holds no items yet.
    ///
    /// A keychain with items but no device secret is never given a fresh secret: those items were sealed under the
    /// lost one, so this throws ``KeychainError/deviceSecretMissing`` instead.
    ///
    /// - Parameters:
    ///   - secretPath: The device secret file, outside the data and keychain folders.
    ///   - keychainFolder: The keychain folder the secret seals (it need not exist yet).
    ///   - machineIDPaths: Files to take the machine id from, first readable wins.
    /// - Throws: As ``load(secretPath:machineIDPaths:)``, and ``KeychainError/deviceSecretMissing`` as above.
    public static func loadOrCreate(
        secretPath: String,
        keychainFolder: String,
        machineIDPaths: [String] = defaultMachineIDPaths
    ) throws(KeychainError) -> DeviceIdentity {
        if let secret = try readSecret(secretPath) {
            return try DeviceIdentity(secret: secret, machineID: readMachineID(machineIDPaths))
        }
        guard try !FileKeychain.hasItems(in: keychainFolder) else { throw .deviceSecretMissing }
        let folder = String(secretPath[..<(secretPath.lastIndex(of: "/") ?? secretPath.startIndex)])
        let secret = SecretBytes(randomCount: 32)
        var file = magic + [1]
        secret.withUnsafeBytes { file += $0 }
        defer { for index in file.indices { file[index] = 0 } }
        do {
            if !folder.isEmpty { try SecureFile.makePrivateDirectory(folder) }
            try SecureFile.writeAtomically(file, to: secretPath)
        } catch {
            throw .storage(error)
        }
        return try DeviceIdentity(secret: secret, machineID: readMachineID(machineIDPaths))
    }

    /// The secret in the file at `path` after checking that it and its folder are private; `nil` if it is absent.
    private static func readSecret(_ path: String) throws(KeychainError) -> SecretBytes? {
        let folder = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        var bytes: [UInt8]
        do {
            guard let read = try SecureFile.read(path, maxBytes: 64) else { return nil }
            bytes = read
            try SecureFile.checkPrivate(path, folder: false)
            if !folder.isEmpty { try SecureFile.checkPrivate(folder, folder: true) }
        } catch {
            throw .storage(error)
        }
        defer { for index in bytes.indices { bytes[index] = 0 } }
        guard bytes.count == 37, Array(bytes[0..<4]) == magic, bytes[4] == 1 else { throw .corruptDeviceSecret }
        return SecretBytes(copying: bytes[5...])
    }

    /// The first non-empty machine id among `paths`, with every byte up to 0x20 (spaces, newlines, control
    /// characters) removed; empty if none is readable (then only the device secret binds `…ThisDeviceOnly` items).
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

extension DeviceIdentity: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Never shows the secret.
    public var description: String { "DeviceIdentity(<redacted>)" }
    /// Never shows the secret.
    public var debugDescription: String { description }
    /// Empty, so `dump` and debuggers that use mirrors show nothing.
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}
