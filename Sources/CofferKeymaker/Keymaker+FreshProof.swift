extension Keymaker {
    /// A fresh MainKey from `proof`, whether or not the key is in memory, for an operation that must ask the person
    /// every time (turning FastSync on or renewing it). A PIN is a counted attempt, as at unlock; the lock state does
    /// not change and the use does not count as autolock activity.
    ///
    /// - Throws: what an unlock with `proof` throws (``KeymakerError/wrongPIN(attemptsLeft:)`` and the others).
    public func freshKey(authorizedBy proof: UnlockMethod) async throws(KeymakerError) -> MainKey {
        try await authenticate(proof)
    }
}
