import CofferKeymaker
import NIOConcurrencyHelpers

/// A presence authenticator whose answer a test chooses, and which counts how often it was asked.
public final class TestPresence: PresenceAuthenticator {
    private let answer: NIOLockedValueBox<Bool>
    private let asked = NIOLockedValueBox(0)

    /// Answers `present` until changed.
    public init(present: Bool = true) { answer = NIOLockedValueBox(present) }

    /// Changes the answer.
    public func setPresent(_ present: Bool) { answer.withLockedValue { $0 = present } }

    /// How many times presence was asked for.
    public var askCount: Int { asked.withLockedValue { $0 } }

    /// Returns the chosen answer.
    public func confirmPresence(reason: String) async -> Bool {
        asked.withLockedValue { $0 += 1 }
        return answer.withLockedValue { $0 }
    }
}

/// A presence authenticator that fails the test (by crashing with a message) if it is ever asked: for code paths
/// that must not touch the secure element.
public struct UnimplementedPresence: PresenceAuthenticator {
    /// Creates the double.
    public init() {}

    /// Never to be called.
    public func confirmPresence(reason: String) async -> Bool {
        fatalError("UnimplementedPresence.confirmPresence was called: this path must not ask for presence")
    }
}
