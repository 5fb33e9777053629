import CofferCrypto

/// Where a keychain item lives: access group, service and account, as on iOS.
public struct KeychainAddress: Hashable, Sendable, CustomStringConvertible {
    /// The group of programs that share the item (Coffer uses one group for the app and its extensions).
    public let accessGroup: String
    /// What the item is for, for example `coffer.mainkey`.
    public let service: String
    /// Which instance, for example an account id.
    public let account: String

    /// Creates an address.
    public init(accessGroup: String = "coffer", service: String, account: String) {
        self.accessGroup = accessGroup
        self.service = service
        self.account = account
    }

    /// `group/service/account`.
    public var description: String { "\(accessGroup)/\(service)/\(account)" }
}

/// Secret storage with iOS keychain semantics.
///
/// Implementations: ``FileKeychain`` (Linux, sealed files bound to the device) and ``InMemoryKeychain`` (tests).
public protocol Keychain: Sendable {
    /// Adds an item; throws ``KeychainError/duplicateItem`` if one exists.
    func add(
        _ value: SecretBytes,
        at address: KeychainAddress,
        accessibility: KeychainAccessibility
    )
        throws(KeychainError)
    /// Replaces an existing item's value, keeping its accessibility; throws ``KeychainError/itemNotFound`` if none.
    func update(_ value: SecretBytes, at address: KeychainAddress) throws(KeychainError)
    /// Reads an item's value.
    func read(_ address: KeychainAddress) throws(KeychainError) -> SecretBytes
    /// Deletes an item; succeeds if it does not exist.
    func delete(_ address: KeychainAddress) throws(KeychainError)
    /// The addresses of every item in `accessGroup` with `service`, for clean-up (logout).
    func addresses(accessGroup: String, service: String) throws(KeychainError) -> [KeychainAddress]
    /// Whether an item is at `address` and could be read now: it throws what ``read(_:)`` throws for an item that
    /// is there but not accessible or damaged, without handing out its value.
    func contains(_ address: KeychainAddress) throws(KeychainError) -> Bool
    /// Deletes every `whenPasscodeSetThisDeviceOnly` item: call when the device passcode is removed.
    func passcodeRemoved() throws(KeychainError)
}

extension Keychain {
    /// Adds the item, or replaces its value if it exists.
    public func set(
        _ value: SecretBytes,
        at address: KeychainAddress,
        accessibility: KeychainAccessibility
    )
        throws(KeychainError)
    {
        do {
            try add(value, at: address, accessibility: accessibility)
        } catch .duplicateItem {
            try update(value, at: address)
        }
    }

    /// Reads the item and drops its value (a keychain that can tell without opening the value says so itself).
    public func contains(_ address: KeychainAddress) throws(KeychainError) -> Bool {
        try readIfPresent(address) != nil
    }

    /// Reads an item, or `nil` if there is none.
    public func readIfPresent(_ address: KeychainAddress) throws(KeychainError) -> SecretBytes? {
        do {
            return try read(address)
        } catch .itemNotFound {
            return nil
        }
    }
}
