import Foundation

/// Where coffer-notify keeps sessions and pending messages. GRDB/SQLite (``SQLiteNotifyStorage``) now; PostgreSQL
/// later behind the same protocol.
public protocol NotifyStorage: Sendable {
    /// Stores a new session.
    ///
    /// - Throws: `NotifyError.pushKeyInUse` when another session (live or not) has the same push public key.
    func createSession(_ session: NotifySession) async throws(NotifyError)
    /// The session whose token, or whose previous token (``NotifySession/previousTokenHash``), hashes to
    /// `tokenHash`, whatever its state.
    func session(tokenHash: [UInt8]) async throws(NotifyError) -> NotifySession?
    /// The session with this id, whatever its state.
    func session(id: String) async throws(NotifyError) -> NotifySession?
    /// The user's sessions, oldest first.
    func sessions(user: String) async throws(NotifyError) -> [NotifySession]
    /// Every session, oldest first (the admin command).
    func allSessions() async throws(NotifyError) -> [NotifySession]
    /// Records that the session used its token at `date`.
    func touch(id: String, at date: Date) async throws(NotifyError)
    /// Replaces the session's token hash and expiry (refresh) and sets the previous hash, which is still accepted
    /// until ``forgetPreviousToken(id:)``. Does nothing to a revoked session.
    func replaceToken(id: String, tokenHash: [UInt8], previous: [UInt8], expires: Date) async throws(NotifyError)
    /// Stops accepting the session's previous token (its new token has been used).
    func forgetPreviousToken(id: String) async throws(NotifyError)
    /// Drops the session's RFC 8030 push endpoint (its push service said the subscription is gone); the session
    /// keeps its stream.
    func forgetPushEndpoint(id: String) async throws(NotifyError)
    /// Revokes the session and deletes its pending messages; returns false when there is no such session.
    func revoke(id: String) async throws(NotifyError) -> Bool
    /// Queues encrypted messages (an event's pushes to each of its user's sessions) in one transaction: all of them
    /// or, on an error, none.
    func enqueue(_ messages: [PendingMessage]) async throws(NotifyError)
    /// The session's unexpired pending messages, oldest first, at most `limit`.
    func pending(sessionID: String, now: Date, limit: Int) async throws(NotifyError) -> [PendingMessage]
    /// How many unexpired messages wait on the session's stream.
    func pendingCount(sessionID: String, now: Date) async throws(NotifyError) -> Int
    /// How many unexpired messages wait on each of these sessions' streams (every id is a key), read at once.
    func pendingCounts(sessionIDs: [String], now: Date) async throws(NotifyError) -> [String: Int]
    /// Deletes the session's messages with these ids; returns how many were deleted.
    func ack(sessionID: String, ids: [String]) async throws(NotifyError) -> Int
    /// How many sessions are neither revoked nor expired at `now` (the metrics gauge).
    func liveSessionCount(now: Date) async throws(NotifyError) -> Int
    /// Deletes the session's pending messages that carry its FastSync key (``PendingMessage/holdsKey``); returns how
    /// many.
    func deleteKeyPushes(sessionID: String) async throws(NotifyError) -> Int
    /// Deletes expired pending messages; returns how many.
    func purgeExpired(now: Date) async throws(NotifyError) -> Int
}

extension NotifyStorage {
    /// ``pendingCount(sessionID:now:)`` for each session in turn; engines that can read them at once do.
    public func pendingCounts(sessionIDs: [String], now: Date) async throws(NotifyError) -> [String: Int] {
        var counts: [String: Int] = [:]
        for id in sessionIDs { counts[id] = try await pendingCount(sessionID: id, now: now) }
        return counts
    }
}
