import CofferCrypto
import NIOConcurrencyHelpers

/// Why a caller wants the MainKey: the one thing that decides whether a use restarts the autolock interval.
///
/// The request path says it once: the dispatcher runs a person's request under ``userRequest``, and everything else
/// (a push-driven sync, FastSync, a queued job) runs under ``background``, the default. Code below the request path
/// (the store, the attachment cache, sync) reads ``current`` when it asks for the key, so it never decides on its
/// own.
public enum KeyUse: Sendable, Equatable {
    /// A request a person made at a terminal: counts as activity for the autolock.
    case userRequest
    /// Work nobody at the terminal asked for just now: never counts as activity, so mail arriving can never hold an
    /// account unlocked; may use a key granted for the job (``AccountKeys/withBackgroundKey(_:_:)``) while locked.
    case background

    /// The use of the running task (``background`` unless a request path said otherwise).
    ///
    /// - Warning: A task created inside ``withValue(_:operation:)`` inherits the value. Long-lived work started from a
    ///   request must run its jobs under ``background`` explicitly (the account's coordinator does).
    @TaskLocal public static var current: KeyUse = .background

    /// Runs `operation` with ``current`` set to `self`.
    public func run<T>(_ operation: () async throws -> T) async rethrows -> T {
        try await Self.$current.withValue(self, operation: operation)
    }
}

/// Whether the running job works on a key granted while its account is locked (FastSync's key,
/// ``AccountKeys/withBackgroundKey(_:_:)``). Such a job stores mail, but the user's own secret keys (their OpenPGP
/// keys) are never opened under it: what they would decrypt waits for the next unlock.
public enum KeyGrant {
    /// True inside a job that runs on a granted key, and in its child tasks.
    @TaskLocal public static var isActive = false
}

/// The one way the store, the attachment cache and every library above the Keymaker get an account's MainKey.
public protocol MainKeySource: Sendable {
    /// The MainKey for `use`.
    ///
    /// - Throws: ``KeymakerError/locked`` when no key is available for that use.
    func mainKey(for use: KeyUse) async throws(KeymakerError) -> MainKey
}

extension MainKeySource {
    /// The MainKey for the running task's use (``KeyUse/current``).
    public func mainKey() async throws(KeymakerError) -> MainKey { try await mainKey(for: KeyUse.current) }
}

extension Keymaker: MainKeySource {}

/// A MainKey held for one background job and nothing else: FastSync's key, unwrapped from a push while the account
/// is locked. It never serves a person's request, and ``end()`` wipes it.
public final class EphemeralKeySource: MainKeySource {
    private let key: NIOLockedValueBox<MainKey?>

    /// Takes `secret` (the MainKey's 32 bytes) as the key; it is wiped by ``end()``.
    ///
    /// - Throws: ``KeymakerError/locked`` if `secret` is not a MainKey's size.
    public init(taking secret: SecretBytes) throws(KeymakerError) {
        guard secret.count == MainKey.byteCount, !secret.isWiped else {
            secret.wipe()
            throw .locked
        }
        key = NIOLockedValueBox(MainKey(secret: secret))
    }

    /// The key, for ``KeyUse/background`` only.
    ///
    /// - Throws: ``KeymakerError/locked`` for a person's request, or after ``end()``.
    public func mainKey(for use: KeyUse) throws(KeymakerError) -> MainKey {
        guard use == .background, let current = key.withLockedValue({ $0 }), !current.isWiped else { throw .locked }
        return current
    }

    /// Wipes the key; every later call throws ``KeymakerError/locked``.
    public func end() {
        key.withLockedValue {
            $0?.wipe()
            $0 = nil
        }
    }

    deinit { end() }
}

/// An account's key source: its ``Keymaker``, and while a background job holds one, that job's
/// ``EphemeralKeySource``, which serves background work only and only while the Keymaker is locked.
public final class AccountKeys: MainKeySource {
    /// The account's Keymaker.
    public let keymaker: Keymaker
    private let granted = NIOLockedValueBox<EphemeralKeySource?>(nil)

    /// The key source of the account `keymaker` serves.
    public init(keymaker: Keymaker) { self.keymaker = keymaker }

    /// The Keymaker's key (counting as activity only for ``KeyUse/userRequest``); else, for background work, the
    /// key granted to the running job.
    ///
    /// - Throws: ``KeymakerError/locked`` when neither has a key for `use`.
    public func mainKey(for use: KeyUse) async throws(KeymakerError) -> MainKey {
        do {
            return try await keymaker.mainKey(for: use)
        } catch .locked where use == .background {
            guard let grant = granted.withLockedValue({ $0 }) else { throw .locked }
            return try grant.mainKey(for: .background)
        }
    }

    /// Whether a background job holds a granted key now.
    public var hasBackgroundKey: Bool { granted.withLockedValue { $0 != nil } }

    /// Runs `body` (background work) with `secret` as the account's key for background use, then wipes it.
    /// ``KeyGrant/isActive`` is true while it runs.
    ///
    /// - Parameters:
    ///   - secret: The MainKey's bytes, taken and wiped when `body` ends, whatever happens.
    ///   - body: The job; it must run under ``KeyUse/background`` to see the key.
    /// - Throws: ``KeymakerError/locked`` if another job holds a key (the account's coordinator runs one job at a
    ///   time), or what `body` throws.
    public func withBackgroundKey<T>(
        _ secret: SecretBytes,
        _ body: () async throws -> T
    ) async throws -> T {
        let source = try EphemeralKeySource(taking: secret)
        defer { source.end() }
        let installed = granted.withLockedValue { current -> Bool in
            guard current == nil else { return false }
            current = source
            return true
        }
        guard installed else { throw KeymakerError.locked }
        defer { granted.withLockedValue { $0 = nil } }
        return try await KeyGrant.$isActive.withValue(true) { try await KeyUse.background.run(body) }
    }
}
