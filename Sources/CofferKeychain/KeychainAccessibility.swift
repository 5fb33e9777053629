/// When a keychain item may be read, after iOS's `kSecAttrAccessible…` classes.
///
/// `…ThisDeviceOnly` items are additionally bound to this machine: a copy of the keychain on another machine (or
/// without the device secret) does not open them.
public enum KeychainAccessibility: UInt8, Sendable, CaseIterable, CustomStringConvertible {
    /// Only while the device is unlocked; may move to another device with the device secret.
    case whenUnlocked = 1
    /// After the first unlock since boot; may move to another device with the device secret.
    case afterFirstUnlock = 2
    /// Only while unlocked and only while a passcode is set; deleted when the passcode is removed; this device only.
    case whenPasscodeSetThisDeviceOnly = 3
    /// Only while unlocked; this device only.
    case whenUnlockedThisDeviceOnly = 4
    /// After the first unlock since boot; this device only. The class Coffer uses for wrapped MainKeys.
    case afterFirstUnlockThisDeviceOnly = 5

    /// Whether the item is bound to this machine.
    public var isThisDeviceOnly: Bool {
        switch self {
        case .whenUnlocked, .afterFirstUnlock: false
        case .whenPasscodeSetThisDeviceOnly, .whenUnlockedThisDeviceOnly, .afterFirstUnlockThisDeviceOnly: true
        }
    }

    /// Throws ``KeychainError/notAccessible(_:because:)`` unless `state` allows this class.
    public func check(_ state: some DeviceState) throws(KeychainError) {
        switch self {
        case .whenUnlocked, .whenUnlockedThisDeviceOnly:
            guard state.isUnlocked else { throw .notAccessible(self, because: "the device is locked") }
        case .afterFirstUnlock, .afterFirstUnlockThisDeviceOnly:
            guard state.hasBeenUnlockedSinceBoot else {
                throw .notAccessible(self, because: "the device has not been unlocked since it started")
            }
        case .whenPasscodeSetThisDeviceOnly:
            guard state.isPasscodeSet else { throw .notAccessible(self, because: "no passcode is set") }
            guard state.isUnlocked else { throw .notAccessible(self, because: "the device is locked") }
        }
    }

    /// The iOS-style name, for example `afterFirstUnlockThisDeviceOnly`.
    public var description: String {
        switch self {
        case .whenUnlocked: "whenUnlocked"
        case .afterFirstUnlock: "afterFirstUnlock"
        case .whenPasscodeSetThisDeviceOnly: "whenPasscodeSetThisDeviceOnly"
        case .whenUnlockedThisDeviceOnly: "whenUnlockedThisDeviceOnly"
        case .afterFirstUnlockThisDeviceOnly: "afterFirstUnlockThisDeviceOnly"
        }
    }
}

/// The device's lock state: the seam that gates accessibility classes.
///
/// Linux has no system-wide equivalent of iOS data protection; ``SystemDeviceState`` reports an unlocked device
/// with a passcode (the login password). Tests and future platforms inject their own.
public protocol DeviceState: Sendable {
    /// Whether the device is unlocked now.
    var isUnlocked: Bool { get }
    /// Whether the device has been unlocked at least once since it started.
    var hasBeenUnlockedSinceBoot: Bool { get }
    /// Whether a passcode (device password) is set.
    var isPasscodeSet: Bool { get }
}

/// The state of a Linux session: a logged-in user is past first unlock, unlocked, and has a login password.
public struct SystemDeviceState: DeviceState {
    /// Creates the Linux session state.
    public init() {}
    /// Always `true` on Linux.
    public var isUnlocked: Bool { true }
    /// Always `true` on Linux.
    public var hasBeenUnlockedSinceBoot: Bool { true }
    /// Always `true` on Linux: the login password plays the passcode's part.
    public var isPasscodeSet: Bool { true }
}
