import CofferCrypto

/// Everything that can go wrong in the keychain, written for the person who reads it. No case carries an item's
/// value.
public enum KeychainError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No item exists at the address.
    case itemNotFound
    /// `add` found an item already at the address.
    case duplicateItem
    /// The item's accessibility class does not allow access in the device's current state.
    case notAccessible(KeychainAccessibility, because: String)
    /// The item was written on another machine or with another device secret; it cannot be opened here.
    case deviceMismatch
    /// The item's file is damaged or was edited.
    case corruptItem
    /// The device secret file is damaged.
    case corruptDeviceSecret
    /// The keychain holds items but the device secret is gone (or was never on this machine): the items cannot be
    /// opened, and a new secret is not made silently.
    case deviceSecretMissing
    /// Reading or writing the keychain's files failed.
    case storage(CofferCryptoError)

    /// A sentence for people.
    public var description: String {
        switch self {
        case .itemNotFound: "The keychain has no such item."
        case .duplicateItem: "The keychain already has an item at that address."
        case .notAccessible(let accessibility, let reason):
            "The keychain item (\(accessibility)) cannot be used now: \(reason)."
        case .deviceMismatch:
            "These files belong to another device (or the device secret is gone): the keychain was sealed with a "
                + "different device secret or machine id, so it cannot be opened here."
        case .corruptItem: "The keychain item is damaged or was tampered with."
        case .corruptDeviceSecret: "The device secret file is damaged; keychain items cannot be opened."
        case .deviceSecretMissing:
            "These files belong to another device (or the device secret is gone): the keychain has items but this "
                + "machine has no device secret to open them, and Coffer does not make a new one over them."
        case .storage(let error): "The keychain's storage failed: \(error)"
        }
    }
}
