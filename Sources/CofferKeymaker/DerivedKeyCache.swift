import NIOConcurrencyHelpers

/// Values derived from an account's MainKey that are worth deriving once per unlock (column subkeys, prepared
/// hashers), shared by the store and the attachment cache.
///
/// The key comes from the account's ``MainKeySource`` for the running task's ``KeyUse``, so a read on behalf of a
/// person's request counts as activity and background work never does. A value is reused only while the MainKey it
/// came from is the source's current one and has not been wiped; after
/// a lock and a new unlock it is derived again. The cache keeps the MainKey object it came from (a wiped key is
/// zeroed, so keeping it holds nothing secret) so that a new key at a reused address is never mistaken for the old
/// one.
public final class DerivedKeyCache<Value: Sendable>: Sendable {
    private let entry = NIOLockedValueBox<(key: MainKey, value: Value)?>(nil)

    /// An empty cache.
    public init() {}

    /// The value for the source's current MainKey, derived with `derive` when there is none for that key yet.
    ///
    /// - Parameters:
    ///   - source: The account's key source.
    ///   - mapError: Turns the source's error (``KeymakerError/locked`` while locked) into the caller's.
    ///   - derive: Derives the value from the MainKey.
    /// - Throws: The mapped Keymaker error (the cache is emptied), or what `derive` throws.
    public func value<E: Error>(
        from source: any MainKeySource,
        mapError: (KeymakerError) -> E,
        derive: (MainKey) throws(E) -> Value
    ) async throws(E) -> Value {
        let mainKey: MainKey
        do {
            mainKey = try await source.mainKey()
        } catch {
            forget()
            throw mapError(error)
        }
        if let cached = entry.withLockedValue({ $0 }), cached.key === mainKey, !mainKey.isWiped { return cached.value }
        let value = try derive(mainKey)
        entry.withLockedValue { $0 = (mainKey, value) }
        return value
    }

    /// Drops the cached value now.
    public func forget() { entry.withLockedValue { $0 = nil } }
}
