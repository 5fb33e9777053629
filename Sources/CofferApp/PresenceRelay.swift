import CofferKeymaker

/// The presence authenticator of the agent's secure element: it asks whoever the current request's task says is
/// at a terminal (the client, over its connection), and refuses when nobody is.
///
/// The agent has no terminal of its own; the client that asked to unlock shows the code on its terminal and answers.
public struct PresenceRelay: PresenceAuthenticator {
    /// The authenticator of the request running in this task, if any.
    @TaskLocal public static var current: (any PresenceAuthenticator)?

    /// A relay.
    public init() {}

    /// Asks ``current``; `false` without one.
    public func confirmPresence(reason: String) async -> Bool {
        guard let current = Self.current else { return false }
        return await current.confirmPresence(reason: reason)
    }
}
