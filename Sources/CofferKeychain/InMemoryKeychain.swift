import CofferCrypto
import NIOConcurrencyHelpers

/// A keychain that keeps items in process memory, with the same accessibility gating as ``FileKeychain``.
///
/// For tests and for short-lived processes that must not persist anything.
public final class InMemoryKeychain: Keychain {
    private struct Item {
        var value: SecretBytes
        var accessibility: KeychainAccessibility
    }

    private let items = NIOLockedValueBox<[KeychainAddress: Item]>([:])
    private let state: any DeviceState

    /// An empty keychain gated by `state`.
    public init(state: any DeviceState = SystemDeviceState()) { self.state = state }

    /// See ``Keychain/add(_:at:accessibility:)``.
    public func add(
        _ value: SecretBytes,
        at address: KeychainAddress,
        accessibility: KeychainAccessibility
    )
        throws(KeychainError)
    {
        try accessibility.check(state)
        try items.withLockedValue { items in
            Result { () throws(KeychainError) in
                guard items[address] == nil else { throw .duplicateItem }
                items[address] = Item(
                    value: SecretBytes(copying: value.withUnsafeBytes { Array($0) }),
                    accessibility: accessibility
                )
            }
        }.get()
    }

    /// See ``Keychain/update(_:at:)``.
    public func update(_ value: SecretBytes, at address: KeychainAddress) throws(KeychainError) {
        let state = self.state
        try items.withLockedValue { items in
            Result { () throws(KeychainError) in
                guard let item = items[address] else { throw .itemNotFound }
                try item.accessibility.check(state)
                items[address]?.value = value.withUnsafeBytes { SecretBytes(copying: $0) }
            }
        }.get()
    }

    /// See ``Keychain/read(_:)``.
    public func read(_ address: KeychainAddress) throws(KeychainError) -> SecretBytes {
        let state = self.state
        return try items.withLockedValue { items in
            Result { () throws(KeychainError) in
                guard let item = items[address] else { throw .itemNotFound }
                if item.accessibility == .whenPasscodeSetThisDeviceOnly && !state.isPasscodeSet {
                    items[address] = nil
                    throw .itemNotFound
                }
                try item.accessibility.check(state)
                return item.value.withUnsafeBytes { SecretBytes(copying: $0) }
            }
        }.get()
    }

    /// See ``Keychain/delete(_:)``.
    public func delete(_ address: KeychainAddress) {
        _ = items.withLockedValue { $0.removeValue(forKey: address) }
    }

    /// See ``Keychain/addresses(accessGroup:service:)``.
    public func addresses(accessGroup: String, service: String) -> [KeychainAddress] {
        items.withLockedValue { items in
            items.keys.filter { $0.accessGroup == accessGroup && $0.service == service }
                .sorted { $0.account < $1.account }
        }
    }

    /// See ``Keychain/passcodeRemoved()``.
    public func passcodeRemoved() {
        items.withLockedValue { items in
            items = items.filter { $0.value.accessibility != .whenPasscodeSetThisDeviceOnly }
        }
    }
}
