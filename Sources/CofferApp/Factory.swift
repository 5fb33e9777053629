import NIOConcurrencyHelpers

/// How long a ``Factory`` keeps what it made.
public enum FactoryScope: Sendable, Equatable {
    /// A new instance on every resolution.
    case unique
    /// One instance for the container that declares the factory: on ``GlobalContainer``, one for the process.
    case shared
    /// One instance per account: declared on a ``UserContainer``, kept by it, and gone with it.
    case perUser
}

/// The instances and test overrides of one container's factories.
public final class FactoryStorage: Sendable {
    /// Which kind of container owns the storage.
    public enum Level: Sendable, Equatable {
        /// A ``GlobalContainer``.
        case global
        /// A ``UserContainer``.
        case user
    }

    /// The owner's kind.
    public let level: Level
    private let instances = NIOLockedValueBox<[String: any Sendable]>([:])
    private let overrides = NIOLockedValueBox<[String: @Sendable () throws -> any Sendable]>([:])
    /// One lock per key, held while that key's instance is made.
    private let making = NIOLockedValueBox<[String: NIOLock]>([:])

    /// Empty storage for a container of `level`.
    public init(level: Level) { self.level = level }

    func instance<T: Sendable>(_ key: String, make: () throws -> T) rethrows -> T {
        if let existing: T = kept(key) { return existing }
        // One maker per key: a second caller waits and gets the first one's instance (two stores on one file, each
        // sweeping at open, would be one too many). The lock is the key's own, because a factory may resolve other
        // factories of the same container while it makes its instance.
        let lock = making.withLockedValue { locks in
            if let lock = locks[key] { return lock }
            let lock = NIOLock()
            locks[key] = lock
            return lock
        }
        return try lock.withLock {
            if let existing: T = kept(key) { return existing }
            let made = try make()
            instances.withLockedValue { $0[key] = made }
            return made
        }
    }

    private func kept<T>(_ key: String) -> T? { instances.withLockedValue { $0[key] } as? T }

    /// Whether a scoped factory named `key` has made its instance.
    public func contains(_ key: String) -> Bool { instances.withLockedValue { $0[key] != nil } }

    func override(_ key: String) -> (@Sendable () throws -> any Sendable)? { overrides.withLockedValue { $0[key] } }

    func register(_ key: String, _ make: @escaping @Sendable () throws -> any Sendable) {
        overrides.withLockedValue { $0[key] = make }
        instances.withLockedValue { $0[key] = nil }
    }

    /// Drops the kept instance of `key` (an override stays registered); the next resolution makes a new one.
    func dropInstance(_ key: String) { _ = instances.withLockedValue { $0.removeValue(forKey: key) } }

    func reset(_ key: String) {
        overrides.withLockedValue { $0[key] = nil }
        instances.withLockedValue { $0[key] = nil }
    }
}

/// Makes one dependency of a container, with a scope: the small stand-in for the seeds' Factory library.
///
/// Containers expose factories as computed properties named `<name>Factory`, and the `Has<Name>` property resolves
/// it. Tests replace what a factory makes with ``register(_:)``.
public struct Factory<T: Sendable>: Sendable {
    /// The scope.
    public let scope: FactoryScope
    private let storage: FactoryStorage
    private let key: String
    private let make: @Sendable () throws -> T

    /// A factory whose instances (for scoped factories) and overrides live in `storage` under `key`.
    ///
    /// - Parameters:
    ///   - storage: The declaring container's storage.
    ///   - key: A name unique in that container (the property's name by default).
    ///   - scope: How long an instance is kept; ``FactoryScope/perUser`` only on a user container's storage.
    ///   - make: Makes a new instance.
    public init(
        _ storage: FactoryStorage,
        key: String = #function,
        scope: FactoryScope,
        make: @escaping @Sendable () throws -> T
    ) {
        precondition(
            scope != .perUser || storage.level == .user,
            "Factory \(key): a per-user factory belongs on a UserContainer"
        )
        self.storage = storage
        self.key = key
        self.scope = scope
        self.make = make
    }

    /// The instance: a new one (``FactoryScope/unique``) or the one kept by the container.
    public func callAsFunction() throws -> T {
        let build: () throws -> T
        if let override = storage.override(key) {
            build = {
                guard let made = try override() as? T else {
                    preconditionFailure("Factory \(key): wrong override type")
                }
                return made
            }
        } else {
            build = make
        }
        switch scope {
        case .unique: return try build()
        case .shared, .perUser: return try storage.instance(key, make: build)
        }
    }

    /// Replaces what this factory makes (test doubles), dropping an instance already kept. A test hook: `package`,
    /// so no code outside Coffer's package can swap a live container's keychain.
    package func register(_ make: @escaping @Sendable () throws -> T) { storage.register(key) { try make() } }

    /// Removes an override and the kept instance (tests).
    package func reset() { storage.reset(key) }
}
